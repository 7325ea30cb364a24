"""The `bash` tool: runs one command line in the Location (or `workdir`) in its own process group, streams its
output live, and kills the whole group on timeout or interrupt."""

from __future__ import annotations

import asyncio
import codecs
import os
import shutil
import signal
import subprocess
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import anyio.to_thread
from pydantic import BaseModel, Field

from ...child_env import inherited
from ...permission import AccessRefused, Authority, Requirement
from ...permission.command import save_pattern, simple_commands
from ...permission.shell_paths import command_paths
from ...telemetry import hooks
from ..arguments import schema_of
from ..tool import ToolContext, ToolFailure, ToolOutput, refusals_as_failures

DEFAULT_TIMEOUT_MS = 120_000
MAX_TIMEOUT_MS = 600_000
# Output kept for the result: the registry bounds what the model sees, this bounds what the process holds in memory.
KEEP_HEAD_CHARS = 1024 * 1024
KEEP_TAIL_CHARS = 1024 * 1024
READ_CHUNK = 64 * 1024
# After the command ends, how long leftover background jobs may keep its output open before the group is killed.
DRAIN_SECONDS = 1.0
# Between the polite SIGTERM at a timeout and the SIGKILL.
TERM_GRACE_SECONDS = 2.0
# Forced last, over the caller environment and the host overlay (the PTY Environment rule): no terminal is attached,
# so programs must not page or wait for one.
FORCED_ENV = {"TERM": "dumb", "OPENCODE_TERMINAL": "1", "PAGER": "cat", "GIT_PAGER": "cat"}
_SHELLS = ("bash", "zsh", "sh", "dash", "ksh")

DESCRIPTION = (
    "Run a shell command and return its combined stdout and stderr.\n"
    "\n"
    "- It runs in the session's working directory, or in `workdir` (absolute or relative to it). Prefer `workdir`"
    " over `cd`.\n"
    "- `timeout` is in milliseconds: default 120000, at most 600000. At the timeout the command and everything it"
    " started are stopped, and the output so far is returned.\n"
    "- There is no terminal and no input: do not run interactive programs or pagers.\n"
    "- Use the dedicated tools to read, search and edit files rather than cat, grep or sed."
)


class BashArguments(BaseModel):
    command: str = Field(min_length=1, description="The command line to run")
    workdir: str | None = Field(None, description="Directory to run in (default: the working directory)")
    timeout: int = Field(DEFAULT_TIMEOUT_MS, gt=0, le=MAX_TIMEOUT_MS,
                         description="Timeout in milliseconds (default 120000)")


class BashTool:
    name = "bash"
    description = DESCRIPTION
    arguments = BashArguments
    parameters = schema_of(BashArguments)

    def __init__(self, overlay: Mapping[str, str] | None = None) -> None:
        # The host's environment overlay: applied over the caller's environment, under the forced values.
        self.overlay = dict(overlay or {})

    async def execute(self, args: BashArguments, ctx: ToolContext) -> ToolOutput:
        command = args.command
        timeout = args.timeout / 1000
        simple = simple_commands(command)
        if not simple:
            raise ToolFailure("The command is empty.")
        # the server's password and the provider keys are not the model's to read back with `env`
        env = hooks.with_traceparent(command_environment(
            inherited(ctx.env if ctx.env is not None else os.environ, ctx.config), self.overlay))
        workdir, outside = await anyio.to_thread.run_sync(
            lambda: _outside_directories(ctx.authority, args.workdir or ".", command, env.get("HOME")),
            abandon_on_cancel=True)
        # Leaving the Location is asked first (all directories in one request), then the commands; a `deny` of
        # either fails the call before anything is asked.
        await ctx.satisfy([*outside, *(Requirement("bash", s) for s in simple)], {"command": command},
                          save={"bash": list(dict.fromkeys(save_pattern(s) for s in simple))})
        if not workdir.is_dir():  # after the asking, which the directory may not outlast
            raise ToolFailure(f"workdir is not a directory: {workdir}")
        run = CommandRun(ctx.on_output)
        exit_code = await run.run(command, workdir, env, timeout)
        text = run.output()
        note = (f"The command was stopped after the {timeout:g} s timeout." if run.timed_out
                else f"Exit code {exit_code}." if exit_code != 0 else None)
        if note is not None:
            text = (text.rstrip("\n") + "\n\n" if text else "") + f"({note})"
        return ToolOutput.of_text(text or "(no output)",
                                  {"exit": None if run.timed_out else exit_code, "timedOut": run.timed_out,
                                   "workdir": str(workdir)},
                                  title=command if len(command) <= 80 else command[:77] + "...")


def _outside_directories(authority: Authority, raw_workdir: str, command: str,
                         home: str | None) -> tuple[Path, list[Requirement]]:
    """The resolved workdir, and `external_directory` for it and for each directory outside the Location that the
    command names a path in (see permission/shell_paths.py)."""
    with refusals_as_failures():
        workdir, needs = authority.locate(raw_workdir)
    for path in command_paths(command, str(workdir), home):
        try:
            _, reach = authority.locate(path)
        except AccessRefused:
            continue  # a word that is no usable path names no file
        needs += reach
    return workdir, list(dict.fromkeys(needs))


def command_environment(caller: Mapping[str, str], overlay: Mapping[str, str]) -> dict[str, str]:
    """The PTY Environment rule: the caller's environment, then the host overlay, then the forced invariants."""
    return {**caller, **overlay, **FORCED_ENV}


def shell_for(env: Mapping[str, str]) -> str:
    """The user's shell when it is a POSIX-style one (fish and nu do not take bash syntax), else bash, else sh."""
    preferred = env.get("SHELL", "")
    if preferred and Path(preferred).name in _SHELLS and os.access(preferred, os.X_OK):
        return preferred
    return shutil.which("bash") or "/bin/sh"


class CommandRun:
    """One command's process group and the output it produced (each piece also given to `on_output` as it comes)."""

    def __init__(self, on_output: Callable[[str], None] | None = None) -> None:
        self.on_output = on_output
        self.head: list[str] = []
        self.head_chars = 0
        self.tail: deque[str] = deque()
        self.tail_chars = 0
        self.dropped = 0
        self.timed_out = False

    async def run(self, command: str, workdir: Path, env: dict[str, str], timeout: float) -> int | None:
        # Popen rather than asyncio's subprocess: on Python 3.11 asyncio's wait() also waits for the output pipe
        # to close, which a leftover background job can hold open for ever.
        try:
            proc = subprocess.Popen([shell_for(env), "-c", command], cwd=workdir, env=env, stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
        except OSError as exc:  # the directory vanished, no shell, out of processes
            raise ToolFailure(f"Cannot run the command: {exc.strerror or exc}") from None
        assert proc.stdout is not None
        loop = asyncio.get_running_loop()
        fd = proc.stdout.fileno()
        os.set_blocking(fd, False)
        eof = asyncio.Event()
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

        def readable() -> None:
            try:
                data = os.read(fd, READ_CHUNK)
            except BlockingIOError:
                return
            except OSError:
                data = b""
            if data:
                self._keep(decoder.decode(data))
            else:
                self._keep(decoder.decode(b"", final=True))
                loop.remove_reader(fd)
                eof.set()

        loop.add_reader(fd, readable)
        try:
            try:
                await asyncio.wait_for(_exited(proc), timeout)
            except TimeoutError:
                self.timed_out = True
                await self._stop(proc)
            # Background jobs may hold the output open after the command itself has ended; those are stopped so
            # the call settles. Jobs that let go of the output (`nohup x >log 2>&1 &`) keep running.
            if not await _within(eof.wait(), DRAIN_SECONDS):
                _kill_group(proc.pid, signal.SIGKILL)
                await _within(eof.wait(), DRAIN_SECONDS)  # a job that left the group may keep it open: stop reading
        except BaseException:
            # An interrupt (cancellation) or a failure: the whole group dies, not only the shell.
            _kill_group(proc.pid, signal.SIGKILL)
            raise
        finally:
            loop.remove_reader(fd)
            proc.stdout.close()
        return proc.returncode

    async def _stop(self, proc: subprocess.Popen[bytes]) -> None:
        _kill_group(proc.pid, signal.SIGTERM)
        if not await _within(_exited(proc), TERM_GRACE_SECONDS):
            _kill_group(proc.pid, signal.SIGKILL)
            await _exited(proc)

    def _keep(self, text: str) -> None:
        if not text:
            return
        if self.on_output is not None:
            self.on_output(text)
        if self.head_chars < KEEP_HEAD_CHARS:
            self.head.append(text)
            self.head_chars += len(text)
            return
        self.tail.append(text)
        self.tail_chars += len(text)
        while self.tail_chars - len(self.tail[0]) >= KEEP_TAIL_CHARS:
            first = self.tail.popleft()
            self.tail_chars -= len(first)
            self.dropped += len(first)

    def output(self) -> str:
        middle = f"\n[... {self.dropped} characters of output not kept ...]\n" if self.dropped else ""
        return "".join(self.head) + middle + "".join(self.tail)


async def _exited(proc: subprocess.Popen[bytes]) -> int:
    # A worker thread waits (and reaps); if the call is cancelled the thread is left to finish once the group is
    # killed.
    return await anyio.to_thread.run_sync(proc.wait, abandon_on_cancel=True)


async def _within(awaitable: Awaitable[Any], seconds: float) -> bool:
    """Whether `awaitable` finished within `seconds`."""
    try:
        await asyncio.wait_for(awaitable, seconds)
    except TimeoutError:
        return False
    return True


def _kill_group(pgid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass  # the group is already gone
