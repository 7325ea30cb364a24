"""`ocs run`: one prompt (or, interactively, many) in a session of this directory, shown as it happens, with
Ctrl-C interrupting the session cleanly and a second Ctrl-C leaving at once."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..client.errors import ClientError
from ..client.generated import OpenCodeClient
from ..core.config import ConfigError, parse_model_string
from ..core.store import BackendNotInstalledError, DatabaseInUseError
from ..schema.errors import TaggedError
from ..schema.session import SessionV2Info
from .asking import Answerer, Policy
from .commands import expand
from .hosts import open_host
from .plugins import plugin_problems, said_here
from .render import EventAdapter, View
from .startup import StartupError, report_config, say_stderr, survey
from .turn import Outcome, Turn
from .views import make_view

EXIT_OK, EXIT_FAILED, EXIT_INTERRUPTED = 0, 1, 130
INTERRUPT_GRACE = 10.0  # seconds an interrupt may take before a Ctrl-C'd command leaves anyway
TITLE_GRACE = 5.0  # seconds a one-shot run waits for its session's title before closing the embedded host


@dataclass
class RunRequest:
    directory: Path
    message: str | None = None
    model: str | None = None
    agent: str | None = None
    session: str | None = None
    continue_last: bool = False
    attach: str | None = None
    json: bool = False
    queue: bool = False
    interactive: bool = False
    db: str | Path | None = None
    yes: bool = False  # allow permission asks once and take questions' first options, without asking
    no: bool = False  # reject permission asks and dismiss questions, without asking
    command: str | None = None  # a custom command: `message` is then its arguments
    created: bool = False  # set once this command made the session it works in

    @property
    def delivery(self) -> Literal["steer", "queue"]:
        return "queue" if self.queue else "steer"


def model_ref(value: str) -> dict[str, str]:
    parsed = parse_model_string(value)
    if parsed is None:
        raise StartupError(f"--model takes provider/model, not {value!r}")
    return {"providerID": parsed[0], "id": parsed[1]}


# --- Ctrl-C ---------------------------------------------------------------------------------------------------


@dataclass
class Interrupts:
    """The first Ctrl-C interrupts the running turn (or ends the command when none runs); a Ctrl-C while that
    interrupt is under way, or one that takes longer than INTERRUPT_GRACE, leaves at once with 130."""

    main: asyncio.Task[Any]
    say: Callable[[str], None]
    restore: list[Callable[[], None]] = field(default_factory=list)
    turn: tuple[OpenCodeClient, str] | None = None  # set while a turn runs
    idle: Callable[[], bool] | None = None  # interactive: handles a Ctrl-C at the prompt, False to end
    interrupting: bool = False

    def __call__(self) -> None:
        if self.interrupting:
            self.leave()
        loop = asyncio.get_running_loop()
        if self.turn is None:
            if self.idle is None or not self.idle():
                self.interrupting = True
                self.main.cancel()
                loop.call_later(INTERRUPT_GRACE, self._overdue)
            return
        self.interrupting = True
        self.say("interrupting… (Ctrl-C again to quit at once)")
        client, session_id = self.turn
        loop.create_task(self._interrupt(client, session_id))
        loop.call_later(INTERRUPT_GRACE, self._overdue)

    async def _interrupt(self, client: OpenCodeClient, session_id: str) -> None:
        try:
            await client.session.interrupt(session_id)
        except (ClientError, TaggedError) as failed:
            self.say(f"could not interrupt the session: {failed}")
            self.leave()

    def _overdue(self) -> None:
        if self.interrupting:
            self.say("stopping took too long; leaving")
            self.leave()

    def settled(self) -> None:
        self.turn = None
        self.interrupting = False

    def leave(self) -> None:
        for undo in reversed(self.restore):
            try:
                undo()
            except Exception:  # noqa: BLE001 - best effort on the way out
                pass
        sys.stdout.flush()
        os._exit(EXIT_INTERRUPTED)


# --- sessions -------------------------------------------------------------------------------------------------


async def find_session(client: OpenCodeClient, request: RunRequest) -> SessionV2Info | None:
    """The session `--session` names, or for `--continue` the most recently updated one of this directory."""
    if request.session:
        return await client.session.get(request.session)
    if request.continue_last:
        page = await client.session.list(directory=str(request.directory), limit=200)
        mine = [s for s in page.items if s.parentID is None]
        return max(mine, key=lambda s: s.time.updated, default=None)
    return None


async def prepare_session(client: OpenCodeClient, request: RunRequest, say: Callable[[str], None]) -> SessionV2Info:
    """Find or create the session, switch its model and agent as asked, and (embedded) check a model will answer."""
    session = await find_session(client, request)
    if session is None and request.continue_last:
        say("no earlier session in this directory: starting a new one")
    if getattr(client, "runtime", None) is not None:  # embedded: a server has its own config and says what is wrong
        current = f"{session.model.providerID}/{session.model.id}" if session and session.model else None
        found = survey(request.directory, os.environ, model=request.model or current,
                       agent=request.agent or (session.agent if session else None))
        report_config(found, say)
        if found.model_problem:
            raise StartupError(found.model_problem)
    model = model_ref(request.model) if request.model else None
    if session is None:
        created = await client.session.create(agent=request.agent, model=model,
                                              location={"directory": str(request.directory)})
        request.created = True
        return created
    if model is not None:
        await client.session.switch_model(session.id, model=model)
    if request.agent:
        await client.session.switch_agent(session.id, agent=request.agent)
    return session


def permission_policy(request: RunRequest | None, view: View) -> tuple[Policy, str]:
    """How permission asks and questions are answered: a flag, else the user when there is a terminal to ask on,
    else declined."""
    if request is not None and request.yes:
        return "once", "--yes"
    if request is not None and request.no:
        return "reject", "--no"
    if hasattr(view, "show_ask") and sys.stdin.isatty():
        return "ask", ""
    return "reject", "no terminal to ask on; --yes allows"


def answerer(client: OpenCodeClient, session_id: str, view: View, policy: tuple[Policy, str]) -> Answerer:
    """The sink a turn feeds: permission asks and questions answered as `policy` says, every event shown in
    `view`."""
    show = getattr(view, "show_ask", None) if policy[0] == "ask" else None
    return Answerer(client, session_id, EventAdapter(view), view.notice, policy[0], show=show, flag=policy[1])


async def run_turn(client: OpenCodeClient, session_id: str, text: str, delivery: Literal["steer", "queue"],
                   view: View, interrupts: Interrupts | None, policy: tuple[Policy, str] | None = None) -> Outcome:
    """One prompt shown from admission until the execution that ran it ends; permission asks are answered as
    `policy` says (by default: by the user's keys on a terminal, else rejected)."""
    sink = answerer(client, session_id, view, policy or permission_policy(None, view))
    reader = None
    if sink.policy == "ask":
        from .keys import KeyReader

        reader = KeyReader(sys.stdin.fileno(), sink.key)
        reader.start()
        if interrupts is not None:
            interrupts.restore.append(reader.stop)
    async with Turn(client, session_id, sink) as turn:
        if interrupts is not None:
            interrupts.turn = (client, session_id)
        view.working(True)
        try:
            await turn.prompt(text, delivery)
            outcome = await turn.settled()
            if outcome.status == "interrupted" and sink.declined and not (interrupts and interrupts.interrupting):
                # stopped because the command declined what it could not ask (--no, or no terminal): a failure to
                # report (exit 1), not the user's Ctrl-C (130)
                return Outcome("failed", "permission.declined", f"declined by the command line ({sink.flag})")
            return outcome
        finally:
            view.working(False)
            if reader is not None:
                reader.stop()
            if interrupts is not None:
                interrupts.settled()


def describe_failure(outcome: Outcome) -> str:
    return f"error: {outcome.error_type}: {outcome.message}"


def exit_code(outcome: Outcome) -> int:
    return {"succeeded": EXIT_OK, "failed": EXIT_FAILED, "interrupted": EXIT_INTERRUPTED}[outcome.status]


# --- the command ----------------------------------------------------------------------------------------------


@asynccontextmanager
async def opened_session(request: RunRequest, view: View, interrupts: Interrupts) -> AsyncIterator[
        tuple[OpenCodeClient, SessionV2Info]]:
    """The host a command talks to and the session it works in (new, named, or this directory's latest)."""
    said_here()
    async with open_host(request.attach, request.db, request.directory, plugins=True,
                         say=interrupts.say) as client:
        runtime = getattr(client, "runtime", None)
        if runtime is not None and runtime.plugins is not None:
            for line in plugin_problems(runtime.plugins):
                interrupts.say(line)
        if request.command is not None:
            # the request becomes the command's prompt (the caller sends `request.message`); its agent and model
            # apply unless the command line names its own
            expanded = await expand(client, request.directory, request.command, request.message or "")
            request.message, request.command = expanded.text, None
            request.agent, request.model = request.agent or expanded.agent, request.model or expanded.model
        session = await prepare_session(client, request, interrupts.say)
        view.info(f"session {session.id}")
        yield client, session


async def _run(request: RunRequest, view: View, interrupts: Interrupts) -> int:
    async with opened_session(request, view, interrupts) as (client, session):
        assert request.message is not None
        outcome = await run_turn(client, session.id, request.message, request.delivery, view, interrupts,
                                 permission_policy(request, view))
        view.close()
        if outcome.status == "failed":
            interrupts.say(describe_failure(outcome))
        runtime = getattr(client, "runtime", None)
        if outcome.status != "interrupted" and runtime is not None:
            await runtime.settle_background(TITLE_GRACE)  # the session's title, if it is still being written
        if outcome.status == "failed" and request.created and not await _answered(client, session.id):
            # the session this run made holds nothing but the prompt no Step answered: leave none behind
            await client.session.remove(session.id)
            interrupts.say(f"session {session.id} removed: it holds nothing but the prompt")
        return exit_code(outcome)


async def _answered(client: OpenCodeClient, session_id: str) -> bool:
    """Whether any Step of the session began (an assistant message, even one that failed)."""
    page = await client.session.messages(session_id, order="asc", limit=50)
    while True:
        if any(m.type == "assistant" for m in page.items):
            return True
        if page.next is None or not page.items:
            return False
        page = await client.session.messages(session_id, cursor=page.next)


def execute(request: RunRequest) -> int:
    """`ocs run MESSAGE` to its exit code (interactive mode is `interactive.execute`)."""
    return run_command(make_view(request.json), lambda view, interrupts: _run(request, view, interrupts))


def run_command(view: View, body: Callable[[View, Interrupts], Awaitable[int]]) -> int:
    """Run a command that shows a session, with Ctrl-C handled; every failure a user can cause ends in one line
    on stderr."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="replace")  # a terminal that cannot show a character shows "?" instead of failing

    async def main() -> int:
        loop = asyncio.get_running_loop()
        # on a terminal, through the view: a line printed past its live area would leave that area on screen twice
        interrupts = Interrupts(asyncio.current_task(), getattr(view, "say", say_stderr))  # type: ignore[arg-type]
        interrupts.restore.append(view.close)
        loop.add_signal_handler(signal.SIGINT, interrupts)
        try:
            return await body(view, interrupts)
        finally:
            loop.remove_signal_handler(signal.SIGINT)

    try:
        return asyncio.run(main())
    except (KeyboardInterrupt, asyncio.CancelledError):
        return EXIT_INTERRUPTED
    except (StartupError, ConfigError) as cannot:
        say_stderr(f"ocs: {cannot}")
        return EXIT_FAILED
    except BackendNotInstalledError as missing:
        say_stderr(f"ocs: {missing}")
        return EXIT_FAILED
    except DatabaseInUseError as busy:
        say_stderr(f"ocs: {busy}; talk to that server with --attach URL instead")
        return EXIT_FAILED
    except TaggedError as declined:
        say_stderr(f"error: {declined.tag}: {declined.message}")
        return EXIT_FAILED
    except ClientError as broken:
        say_stderr(f"error: ClientError ({broken.reason}): {broken}")
        return EXIT_FAILED
    finally:
        view.close()
