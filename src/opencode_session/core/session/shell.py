"""A user's shell commands in a session (`POST .../shell`) and the session's shell environment (`PUT
.../environment`): one command run in the session's Location under its permission rules, recorded in its history
between durable `session.shell.started` and `session.shell.ended` events."""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from ...schema import events as ev
from ...schema.errors import ConflictError, ForbiddenError, InvalidRequestError
from ...schema.ids import message_id
from ..attachments import admission_authority
from ..child_env import inherited
from ..config import ConfigError
from ..location import resolve_location
from ..permission import Requirement
from ..permission.command import simple_commands
from ..permission.rules import with_session_rules
from ..store import Tx
from .service import Sessions, require_session

if TYPE_CHECKING:
    from ..tools.builtin.bash import CommandRun

# A user's command has the bash tool's longest timeout: it is stopped (and its output so far kept) after it.
SHELL_TIMEOUT_SECONDS = 600.0  # bash's MAX_TIMEOUT_MS, whose module a server loads with the runner, not at start


class SessionShell:
    """Runs a user's shell commands in sessions; `environments` are the variables each session's commands get over
    the server's own (inherited without its secrets, as the bash tool's), kept by this process until replaced."""

    def __init__(self, sessions: Sessions) -> None:
        self.sessions = sessions
        self.environments: dict[str, dict[str, str]] = {}

    async def set_environment(self, session_id: str, variables: Mapping[str, str]) -> None:
        """Replace the variables the session's shell commands get (SessionNotFoundError for an unknown session)."""
        for name in variables:
            if not name or "=" in name or "\x00" in name:
                raise InvalidRequestError(f"Not a usable variable name: {name!r}", field="variables")
        await self.sessions.require(session_id)
        self.environments[session_id] = dict(variables)

    def forget(self, session_id: str) -> None:
        self.environments.pop(session_id, None)

    async def environment(self, session_id: str) -> dict[str, str]:
        """What a command of the session runs with: the server's environment without its secrets (the server's
        password, provider keys), then the session's variables, then the bash tool's forced values."""
        info = await self.sessions.get(session_id)
        try:
            config = await self.sessions.config.at(resolve_location(info.location.directory,
                                                                    info.location.workspaceID))
        except ConfigError:
            config = None
        from ..tools.builtin.bash import command_environment

        return command_environment(inherited(self.sessions.env, config), self.environments.get(session_id, {}))

    async def run(self, session_id: str, command: str, id: str | None = None) -> None:
        """Run `command` in the session's Location while the session is idle (SessionBusyError while it executes),
        under its rules for `bash` (a `deny` refuses it before anything runs; what would ask is allowed: the user
        asked). Its merged output is the `shell` message's; an exact retry of `id` is answered as done."""
        if not simple_commands(command):
            raise InvalidRequestError("The command is empty", field="command")
        info = await self.sessions.get(session_id)
        rules = await anyio.to_thread.run_sync(lambda: admission_authority(
            info.location.directory, info.agent, self.sessions.config, self.sessions.env).rules)
        rules = with_session_rules(rules, info.permissions)
        for simple in simple_commands(command):
            if Requirement("bash", simple).effect(rules) == "deny":
                raise ForbiddenError(f"Permission denied: bash {simple}")
        env = await self.environment(session_id)
        msg_id = id or message_id()
        call_id = "call_" + secrets.token_hex(12)

        def _start(tx: Tx) -> bool:
            require_session(tx, session_id)
            existing = tx.messages.load(msg_id)
            if existing is not None:
                if existing.get("type") == "shell" and existing.get("command") == command and \
                        tx.messages.find(session_id, msg_id) is not None:
                    return False
                raise ConflictError(f"Message ID conflicts with an existing message: {msg_id}", resource=msg_id)
            tx.append(ev.ShellStarted(sessionID=session_id, messageID=msg_id, callID=call_id, command=command))
            return True

        async with self.sessions.hold(session_id):
            if not await self.sessions.store.write(_start):
                return
            from ..tools.builtin.bash import CommandRun

            run = CommandRun()
            output: str | None = None
            try:
                code = await run.run(command, Path(info.location.directory), env, SHELL_TIMEOUT_SECONDS)
                output = _with_note(run, code)
            except Exception as failed:  # the shell could not start: the message says so
                output = f"(Cannot run the command: {failed})"
            finally:
                if output is None:  # cancelled (the request went away): the command was stopped
                    output = _with_note(run, None, "The command was stopped.")
                text = output

                def _end(tx: Tx) -> None:
                    tx.append(ev.ShellEnded(sessionID=session_id, callID=call_id, output=text))

                with anyio.CancelScope(shield=True):
                    await self.sessions.store.write(_end)


def _with_note(run: CommandRun, code: int | None, note: str | None = None) -> str:
    text = run.output()
    if note is None:
        note = (f"The command was stopped after the {SHELL_TIMEOUT_SECONDS:g} s timeout." if run.timed_out
                else f"Exit code {code}." if code not in (0, None) else None)
    if note is not None:
        text = (text.rstrip("\n") + "\n\n" if text else "") + f"({note})"
    return text
