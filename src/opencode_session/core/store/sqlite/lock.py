"""One SQLite database, one running runtime: an advisory OS lock on `<database>.lock` that names its holder's pid and
vanishes with the holder's process, so a crash never leaves the database blocked."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from ..errors import DatabaseInUseError

LOCK_SUFFIX = ".lock"  # the lock file is the database's path with this appended
# where the `ocs serve` holding the lock says it listens (cli/listening.py), beside the lock file
SERVER_SUFFIX = ".server"


class DatabaseLock:
    """Held from `acquire` to `release` by an open file description, so the OS drops it when the process dies."""

    def __init__(self, database: str | Path) -> None:
        self.database = str(database)
        self.path = Path(self.database + LOCK_SUFFIX)
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock or raise DatabaseInUseError naming the holder."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_pid(fd)
            os.close(fd)
            raise DatabaseInUseError(self.database, holder) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            # the file stays (removing it would let a later opener lock a different inode); only the pid goes
            os.ftruncate(fd, 0)
            os.close(fd)


def holder(database: str | Path) -> DatabaseInUseError | None:
    """What opening the database would fail with now: DatabaseInUseError naming the process that holds it, or None
    when none does. Takes nothing: the lock file is only tried (a holder creates it before it locks it)."""
    try:
        fd = os.open(f"{database}{LOCK_SUFFIX}", os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return DatabaseInUseError(str(database), _read_pid(fd))
    finally:
        os.close(fd)  # and the shared lock with it, if it was taken
    return None


def _read_pid(fd: int) -> int | None:
    try:
        return int(os.pread(fd, 32, 0).decode().strip())
    except (OSError, ValueError):
        return None  # the holder has not written it yet
