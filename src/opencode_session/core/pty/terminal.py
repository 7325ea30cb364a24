"""One pseudo-terminal: a process forked onto a pty with the standard `pty`/`os` calls, leading its own session and
process group; its output read on the event loop into a bounded buffer of absolute positions, fanned out to
attached readers; its input, window size, exit status, and the killing of everything it started."""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import fcntl
import os
import signal
import struct
import sys
import termios
import threading
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ...schema.pty import Pty

# Output kept for a reader that (re)connects, in characters: the oldest is dropped beyond it.
BUFFER_LIMIT = 2 * 1024 * 1024
# Output a reader may have waiting before it is cut off (it can reconnect from its cursor).
READER_BACKLOG = 4 * 1024 * 1024
# Input waiting for a terminal that does not read it, in bytes: more is dropped.
INPUT_BACKLOG = 1024 * 1024
# How long a killed group has to go after SIGHUP before SIGKILL.
KILL_GRACE_S = 2.0
_READ_SIZE = 65536


@dataclass
class Reader:
    """One attached reader: output chunks after its cursor arrive in `queue`; None there means the end (the process
    exited, the terminal was removed, or the reader fell too far behind)."""

    queue: asyncio.Queue[str | None] = field(default_factory=asyncio.Queue)
    backlog: int = 0

    def push(self, chunk: str | None) -> bool:
        """False when the reader is too far behind to keep."""
        if chunk is not None:
            self.backlog += len(chunk)
            if self.backlog > READER_BACKLOG:
                self.queue.put_nowait(None)
                return False
        self.queue.put_nowait(chunk)
        return True

    async def next(self) -> str | None:
        chunk = await self.queue.get()
        if chunk is not None:
            self.backlog -= len(chunk)
        return chunk


def _exit_code(status: int) -> int:
    code = os.waitstatus_to_exitcode(status)
    return code if code >= 0 else 128 - code  # killed by signal N: 128 + N, as shells report it


class Terminal:
    """Spawned with `Terminal.spawn`; `info` is what the API shows. Everything runs on the event loop it was spawned
    on, except reaping where no pidfd exists (a thread waits for the process there)."""

    def __init__(self, info: Pty, master: int, loop: asyncio.AbstractEventLoop) -> None:
        self.info = info
        self._master: int | None = master
        self._loop = loop
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._buffer = ""
        self._buffer_start = 0  # the absolute position of the buffer's first character
        self.cursor = 0  # the absolute position after the last character read
        self._readers: list[Reader] = []
        self._input = bytearray()  # typed but not yet taken by the terminal
        self._writing = False
        self.exited = asyncio.Event()
        self._pidfd: int | None = None
        loop.add_reader(master, self._readable)
        self._watch_exit()

    @classmethod
    def spawn(cls, info: Pty, executable: str, argv: Sequence[str], cwd: Path, env: Mapping[str, str],
              rows: int = 24, cols: int = 80) -> Terminal:
        """Fork `executable` (already resolved) onto a new pty in `cwd`; `info.pid` is filled in."""
        master, slave = os.openpty()
        try:
            _set_size(master, rows, cols)
            os.set_blocking(master, False)
            environment = {k: v for k, v in env.items()}
            argument_list = list(argv)
            with warnings.catch_warnings():
                # Python warns that forking a threaded process may deadlock the child; this child only closes two
                # descriptors, takes the pty as its controlling terminal and execs, all prepared beforehand.
                warnings.simplefilter("ignore", DeprecationWarning)
                pid = os.fork()
            if pid == 0:  # the child
                try:
                    os.close(master)
                    os.login_tty(slave)  # a new session, the pty its controlling terminal and stdin/out/err
                    os.chdir(cwd)
                    os.execve(executable, argument_list, environment)
                finally:
                    os._exit(127)
        except BaseException:
            os.close(master)
            raise
        finally:
            os.close(slave)
        info.pid = pid
        return cls(info, master, asyncio.get_running_loop())

    # --- output ---------------------------------------------------------------------------------------------

    def _readable(self) -> None:
        assert self._master is not None
        try:
            data = os.read(self._master, _READ_SIZE)
        except BlockingIOError:
            return
        except OSError:  # EIO: every holder of the pty's other side has closed it
            data = b""
        if not data:
            self._stop_reading()
            return
        self._take(self._decoder.decode(data))

    def _take(self, text: str) -> None:
        if not text:
            return
        self.cursor += len(text)
        self._readers = [r for r in self._readers if r.push(text)]
        self._buffer += text
        excess = len(self._buffer) - BUFFER_LIMIT
        if excess > 0:
            self._buffer = self._buffer[excess:]
            self._buffer_start += excess

    def _stop_reading(self) -> None:
        if self._master is not None:
            self._loop.remove_reader(self._master)
            if self._writing:
                self._loop.remove_writer(self._master)
                self._writing = False

    def attach(self, cursor: int | None) -> tuple[str, int, Reader | None]:
        """The retained output after `cursor` (all of it for None, none for -1), the position it ends at, and a
        reader for what follows (None once the process has exited: nothing follows)."""
        start = self.cursor if cursor == -1 else max(cursor or 0, 0)
        offset = max(0, start - self._buffer_start)
        replay = self._buffer[offset:] if start < self.cursor else ""
        if self.exited.is_set():
            return replay, self.cursor, None
        reader = Reader()
        self._readers.append(reader)
        return replay, self.cursor, reader

    def detach(self, reader: Reader) -> None:
        with contextlib.suppress(ValueError):
            self._readers.remove(reader)

    # --- input and window -----------------------------------------------------------------------------------

    def write(self, data: str | bytes) -> None:
        """Type `data` into the terminal; nothing happens once the process has exited. What the terminal cannot take
        yet waits (up to INPUT_BACKLOG bytes; beyond that input is dropped) until it can."""
        if self._master is None or self.exited.is_set():
            return
        raw = data.encode("utf-8") if isinstance(data, str) else data
        if len(self._input) + len(raw) > INPUT_BACKLOG:
            return
        self._input.extend(raw)
        self._flush()

    def _flush(self) -> None:
        while self._input and self._master is not None:
            try:
                written = os.write(self._master, self._input)
            except BlockingIOError:
                if not self._writing:
                    self._loop.add_writer(self._master, self._flush)
                    self._writing = True
                return
            except OSError:
                self._input.clear()
                break
            del self._input[:written]
        if self._writing and self._master is not None:
            self._loop.remove_writer(self._master)
        self._writing = False

    def resize(self, rows: int, cols: int) -> None:
        if self._master is not None and not self.exited.is_set():
            _set_size(self._master, rows, cols)

    # --- exit -----------------------------------------------------------------------------------------------

    def _watch_exit(self) -> None:
        pidfd_open = getattr(os, "pidfd_open", None)
        if pidfd_open is not None:
            try:
                self._pidfd = pidfd_open(self.info.pid)
            except OSError:
                self._pidfd = None
        if self._pidfd is not None:
            self._loop.add_reader(self._pidfd, self._reap)
            return

        def wait() -> None:  # no pidfd (not Linux): a thread blocks in waitpid for this one process
            try:
                _, status = os.waitpid(self.info.pid, 0)
            except ChildProcessError:
                status = 0
            self._loop.call_soon_threadsafe(self._exited, status)

        threading.Thread(target=wait, name=f"pty-wait-{self.info.pid}", daemon=True).start()

    def _reap(self) -> None:
        try:
            pid, status = os.waitpid(self.info.pid, os.WNOHANG)
        except ChildProcessError:
            pid, status = self.info.pid, 0
        if pid == 0:
            return
        self._exited(status)

    def _exited(self, status: int) -> None:
        if self.exited.is_set():
            return
        if self._pidfd is not None:
            self._loop.remove_reader(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = None
        self._drain()
        self.info.status = "exited"
        self.info.exitCode = _exit_code(status)
        self.exited.set()
        for reader in self._readers:
            reader.push(None)
        self._readers.clear()
        self._close_master()

    def _drain(self) -> None:
        """Read what the process wrote before it exited and is still in the pty."""
        if self._master is None:
            return
        while True:
            try:
                data = os.read(self._master, _READ_SIZE)
            except OSError:
                break
            if not data:
                break
            self._take(self._decoder.decode(data))
        self._take(self._decoder.decode(b"", final=True))

    def _close_master(self) -> None:
        if self._master is not None:
            self._stop_reading()
            os.close(self._master)
            self._master = None

    async def kill(self) -> None:
        """End the process and everything it started: SIGHUP to its process group, the terminal's foreground
        group and every process of its session, then SIGKILL to what is left after a grace period."""
        if not self.exited.is_set():
            self._signal_all(signal.SIGHUP)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.exited.wait(), KILL_GRACE_S)
        self._signal_all(signal.SIGKILL)
        if not self.exited.is_set():
            with contextlib.suppress(TimeoutError):  # a process stuck in the kernel: do not hold the caller
                await asyncio.wait_for(self.exited.wait(), KILL_GRACE_S)
        for reader in self._readers:
            reader.push(None)
        self._readers.clear()
        self._close_master()

    def _signal_all(self, sig: signal.Signals) -> None:
        pid = self.info.pid
        if not self.exited.is_set():
            # Only while the leader is unreaped is its pid surely still its own: a reaped one may name another
            # process (a new group leader) by now. Its session's remaining members keep the ID in use, so they can
            # still be found by it.
            groups = {pid}
            if self._master is not None:
                with contextlib.suppress(OSError):
                    groups.add(os.tcgetpgrp(self._master))
            # A terminal whose child has not taken it yet has no foreground group: 0, which killpg reads as the
            # caller's own group. Never signal that one.
            for group in groups - {0, os.getpgrp()}:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(group, sig)
        for member in _session_members(pid):  # background jobs an interactive shell put in groups of their own
            if member not in (pid, os.getpid()):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(member, sig)


def _set_size(fd: int, rows: int, cols: int) -> None:
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


def _session_members(sid: int) -> list[int]:
    """The processes whose session is `sid` (Linux's /proc; elsewhere none are found beyond the groups)."""
    if not sys.platform.startswith("linux"):
        return []
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if len(fields) > 3 and int(fields[3]) == sid:  # after the name: state, ppid, pgrp, session
            members.append(int(entry))
    return members
