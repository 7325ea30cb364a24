"""The runtime's pseudo-terminals, by Location: creating one (the PTY Environment merge, the shell, the working
directory under the Location authority), finding, renaming, resizing and removing them, and killing them all when
their Location is released or the runtime closes."""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from ...schema import session_errors
from ...schema.errors import ForbiddenError, InvalidRequestError, PtyNotFoundError
from ...schema.ids import pty_id
from ...schema.pty import Pty
from ..child_env import inherited
from ..permission import AccessRefused, Authority
from .terminal import Terminal

# Set last, whatever the caller or the host asked for: what a program in the terminal may rely on.
FORCED_ENV: Mapping[str, str] = {"TERM": "xterm-256color", "OPENCODE_TERMINAL": "1"}
# Terminals (running or exited) one runtime keeps at once; creating more is refused.
MAX_TERMINALS = 64
# Exited terminals kept per Location for their status and output: the oldest beyond this are forgotten.
EXITED_LIMIT = 25


def _shell(env: Mapping[str, str]) -> str:
    return env.get("SHELL") or shutil.which("bash", path=env.get("PATH")) or "/bin/sh"


def _executable(command: str, cwd: Path, env: Mapping[str, str]) -> str:
    """The program `command` names: a path (taken in `cwd`) or a name found on the environment's PATH."""
    if os.sep in command:
        candidate = str(cwd / command)
        found = candidate if os.path.isfile(candidate) and os.access(candidate, os.X_OK) else None
    else:
        found = shutil.which(command, path=env.get("PATH", os.defpath))
    if found is None:
        raise InvalidRequestError(f"Command not found or not executable: {command}", kind="body", field="command")
    return found


class Terminals:
    """Every terminal of the runtime, each owned by the Location directory it was created for."""

    def __init__(self, env: Mapping[str, str], limit: int = MAX_TERMINALS) -> None:
        self._env = env
        self._limit = limit
        self._by_location: dict[Path, dict[str, Terminal]] = {}
        self._closed = False
        self._watchers: set[asyncio.Task[None]] = set()

    def list(self, directory: Path) -> list[Pty]:
        return [t.info for t in self._by_location.get(directory, {}).values()]

    def get(self, directory: Path, id: str) -> Terminal:
        terminal = self._by_location.get(directory, {}).get(id)
        if terminal is None:
            raise PtyNotFoundError(ptyID=id)
        return terminal

    def create(self, authority: Authority, *, command: str | None = None, args: Sequence[str] = (),
               cwd: str | None = None, title: str | None = None, env: Mapping[str, str] | None = None,
               overlay: Callable[[Path], Mapping[str, str]] | None = None) -> Pty:
        """Start a terminal in the Location `authority` is rooted at. Its environment (the PTY Environment) is the
        runtime's, then the caller's `env`, then what the host's `overlay` gives for the working directory, then
        FORCED_ENV; `cwd` is taken relative to the Location and outside it needs an allowing `external_directory`
        rule."""
        if self._closed:
            raise InvalidRequestError("The server is shutting down", kind="pty")
        if sum(len(t) for t in self._by_location.values()) >= self._limit:
            raise InvalidRequestError(f"This server already keeps {self._limit} terminals: remove one first",
                                      kind="pty")
        directory = authority.root
        bad = [name for name in (env or {}) if not name or "=" in name or "\x00" in name]
        if bad:
            raise InvalidRequestError(f"Not an environment variable name: {bad[0]!r}", kind="body", field="env")
        where = self._working_directory(authority, cwd)
        environment = {**inherited(self._env), **(env or {}), **(overlay(where) if overlay else {}), **FORCED_ENV}
        program = command or _shell(environment)
        executable = _executable(program, where, environment)
        id = pty_id()
        info = Pty(id=id, title=title or f"Terminal {id[-4:]}", command=program, args=list(args), cwd=str(where),
                   status="running", pid=0)
        try:
            terminal = Terminal.spawn(info, executable, [program, *args], where, environment)
        except OSError as exc:
            raise InvalidRequestError(f"Cannot start {program}: {exc.strerror or exc}", kind="body",
                                      field="command") from None
        self._by_location.setdefault(directory, {})[id] = terminal
        watcher = asyncio.get_running_loop().create_task(self._forget_old(directory, terminal))
        self._watchers.add(watcher)
        watcher.add_done_callback(self._watchers.discard)
        return info

    @staticmethod
    def _working_directory(authority: Authority, cwd: str | None) -> Path:
        try:
            path, needs = authority.locate(cwd or ".")
            for need in needs:
                authority.require(need.action, need.resource, need.absolute)
        except AccessRefused as refused:
            if refused.type == session_errors.TOOL_EXECUTION:  # not a usable path at all
                raise InvalidRequestError(refused.message, kind="body", field="cwd") from None
            raise ForbiddenError(refused.message) from None
        if not path.is_dir():
            raise InvalidRequestError(f"Not a directory: {cwd}", kind="body", field="cwd")
        return path

    async def _forget_old(self, directory: Path, terminal: Terminal) -> None:
        await terminal.exited.wait()
        terminals = self._by_location.get(directory, {})
        exited = [t for t in terminals.values() if t.exited.is_set()]
        for old in exited[:max(0, len(exited) - EXITED_LIMIT)]:
            terminals.pop(old.info.id, None)
            await old.kill()

    def update(self, directory: Path, id: str, *, title: str | None = None,
               size: tuple[int, int] | None = None) -> Pty:
        terminal = self.get(directory, id)
        if title:
            terminal.info.title = title
        if size is not None:
            terminal.resize(*size)
        return terminal.info

    async def remove(self, directory: Path, id: str) -> None:
        terminal = self.get(directory, id)
        del self._by_location[directory][id]
        await terminal.kill()

    async def release(self, directory: Path) -> None:
        """Kill the terminals of a Location whose last session is gone."""
        terminals = self._by_location.pop(directory, {})
        await asyncio.gather(*(t.kill() for t in terminals.values()))

    async def close(self) -> None:
        """Kill every terminal (the runtime is closing); no new one starts after this."""
        self._closed = True
        for directory in list(self._by_location):
            await self.release(directory)
        for watcher in list(self._watchers):
            watcher.cancel()
        await asyncio.gather(*self._watchers, return_exceptions=True)
