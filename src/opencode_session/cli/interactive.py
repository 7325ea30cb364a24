"""Interactive `ocs`: a prompt loop on a terminal. What is typed while a turn streams is sent when the user
presses Enter (steering the running turn) or Tab (queued until the session would otherwise go idle); between turns
Tab cycles the agents and the built-in `/` commands (slash.py) run."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Literal

from rich.text import Text

from ..client.generated import OpenCodeClient
from .asking import Answerer, Policy
from .commands import expand, slash
from .keys import KeyReader
from .render import View
from .run import (
    EXIT_OK,
    Interrupts,
    RunRequest,
    answerer,
    describe_failure,
    make_view,
    model_ref,
    opened_session,
    permission_policy,
    run_command,
)
from .slash import Shell, builtin, cycle_agent
from .slash import run as run_builtin
from .startup import StartupError
from .terminal import TerminalView
from .turn import Turn

CYCLE_AGENT = "\t"  # what Tab on an empty line between turns submits: the next agent

Delivery = Literal["steer", "queue"]
class PromptLoop:
    """The line being typed, what Enter and Tab do with it, and the turns it starts."""

    def __init__(self, client: OpenCodeClient, session_id: str, view: TerminalView, interrupts: Interrupts,
                 policy: tuple[Policy, str] = ("ask", ""), directory: Path | None = None) -> None:
        self.client = client
        self.directory = directory or Path.cwd()  # where `/NAME` commands are looked up
        self.shell = Shell(client, session_id, self.directory, view.info, view.notice, busy=self._busy)
        self.view = view
        self.interrupts = interrupts
        self.buffer = ""
        self.submissions: asyncio.Queue[tuple[str, Delivery] | None] = asyncio.Queue()
        self.turn: Turn | None = None
        self.policy = policy
        self.answers: Answerer | None = None  # the running turn's: a request on screen takes the keys
        self._sent: set[asyncio.Future[None]] = set()

    @property
    def session_id(self) -> str:
        return self.shell.session_id  # `/new` and `/sessions ID` change it

    def _busy(self, on: bool) -> None:
        self.view.busy = on
        self.view.refresh()

    def draw(self) -> None:
        running = self.turn is not None
        hint = ("  Enter steers · Tab queues" if running else
                "  Enter sends · Tab switches agent · /help · Ctrl-D quits")
        agent = (f"{self.shell.agent} ", "dim") if self.shell.agent else ("", "")
        self.view.prompt = Text.assemble(agent, ("› ", "bold magenta"), self.buffer, ("▏", "dim"),
                                         (hint if not self.buffer else "", "dim"))
        self.view.refresh()

    def key(self, key: str) -> None:
        if self.answers is not None and self.answers.key(key):
            return
        if key in ("\r", "\n"):
            self.send("steer")
        elif key == "\t":
            if not self.buffer.strip() and self.turn is None:
                self.submissions.put_nowait((CYCLE_AGENT, "queue"))
            else:
                self.send("queue")
        elif key in ("\x7f", "\x08"):
            self.buffer = self.buffer[:-1]
        elif key == "\x15":  # Ctrl-U
            self.buffer = ""
        elif key == "\x04":  # Ctrl-D
            if not self.buffer and self.turn is None:
                self.submissions.put_nowait(None)
        elif key.isprintable():
            self.buffer += key
        self.draw()

    def ctrl_c_at_prompt(self) -> bool:
        """A Ctrl-C with no turn running clears the line, or (with nothing typed) ends the loop."""
        if not self.buffer:
            return False
        self.buffer = ""
        self.draw()
        return True

    def send(self, delivery: Delivery) -> None:
        text = self.buffer.strip()
        self.buffer = ""
        if not text:
            return
        turn = self.turn
        if builtin(text) is not None and turn is not None and not turn.done:
            self.view.notice(f"{text.split()[0]} works between turns: wait for this one, or Ctrl-C to interrupt it")
            return
        if turn is None or turn.done or slash(text) is not None:  # a command runs as a turn of its own
            self.submissions.put_nowait((text, delivery))
            return
        self.view.user(text)
        sent = turn.submit(text, delivery)
        self._sent.add(sent)
        sent.add_done_callback(lambda done: self._admitted(done, delivery))

    def _admitted(self, sent: asyncio.Future[None], delivery: Delivery) -> None:
        self._sent.discard(sent)
        if sent.cancelled():
            return
        if sent.exception() is not None:
            self.view.notice(f"not sent: {sent.exception()}")
        else:  # said once the session has it, not when the key is pressed
            self.view.info("↳ steering the running turn" if delivery == "steer" else "↳ queued until the turn is done")

    async def run_turn(self, text: str, delivery: Delivery) -> None:
        called = slash(text)
        if called is not None:
            try:
                expanded = await expand(self.client, self.directory, *called)
            except StartupError as unknown:
                self.view.notice(str(unknown))
                self.draw()
                return
            if expanded.agent:
                await self.client.session.switch_agent(self.session_id, agent=expanded.agent)
                self.shell.agent = expanded.agent
            if expanded.model:
                await self.client.session.switch_model(self.session_id, model=model_ref(expanded.model))
            self.view.info(f"/{called[0]}" + (f" (agent {expanded.agent})" if expanded.agent else ""))
            text = expanded.text
        self.view.user(text)
        self.view.busy = True
        self.answers = answerer(self.client, self.session_id, self.view, self.policy)
        async with Turn(self.client, self.session_id, self.answers) as turn:
            self.turn = turn
            self.interrupts.turn = (self.client, self.session_id)
            self.draw()
            try:
                await turn.prompt(text, delivery)
                outcome = await turn.settled()
            finally:
                self.turn = None
                self.answers = None
                self.interrupts.settled()
                self.view.busy = False
        if outcome.status == "failed":
            self.view.notice(describe_failure(outcome))
        elif outcome.status == "interrupted":
            self.view.notice("interrupted: send a message to carry on")
        self.draw()


def execute(request: RunRequest) -> int:
    """`ocs` (or `ocs run -i`) to its exit code."""

    async def body(view: View, interrupts: Interrupts) -> int:
        async with opened_session(request, view, interrupts) as (client, session):
            return await interact(client, session.id, request, view, interrupts)

    return run_command(make_view(request.json), body)


async def interact(client: OpenCodeClient, session_id: str, request: RunRequest, view: View,
                   interrupts: Interrupts) -> int:
    if not isinstance(view, TerminalView) or not sys.stdin.isatty():
        raise StartupError("interactive mode needs a terminal; pass the message as an argument instead")
    loop = PromptLoop(client, session_id, view, interrupts, permission_policy(request, view), request.directory)
    reader = KeyReader(sys.stdin.fileno(), loop.key)
    interrupts.restore.append(reader.stop)
    interrupts.idle = loop.ctrl_c_at_prompt
    reader.start()
    try:
        if request.message:
            loop.submissions.put_nowait((request.message, request.delivery))
        await loop.shell.refresh()
        loop.draw()
        while (item := await loop.submissions.get()) is not None:
            called = builtin(item[0])
            if item[0] == CYCLE_AGENT:
                await cycle_agent(loop.shell)
                loop.draw()
            elif called is not None:
                await run_builtin(loop.shell, *called)
                loop.draw()
            else:
                await loop.run_turn(*item)
    finally:
        reader.stop()
        view.close()
    return EXIT_OK
