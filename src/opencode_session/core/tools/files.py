"""File access shared by the editing tools: reading a text file whole, replacing a file atomically (temp file and
rename in the same directory, keeping the file's mode), and one change at a time per file."""

from __future__ import annotations

import asyncio
import os
import stat
import tempfile
import weakref
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

from ..permission import read_regular_file
from .tool import ToolFailure

# Files the editing tools load whole; a larger one is not something to rewrite through a model's text.
MAX_EDIT_BYTES = 10 * 1024 * 1024


_changing: weakref.WeakValueDictionary[Path, asyncio.Lock] = weakref.WeakValueDictionary()


@asynccontextmanager
async def changing(*paths: Path) -> AsyncIterator[None]:
    """Hold `paths` for one read-modify-write: two edits of one file in the same Step would otherwise both read the
    original and the last write would silently undo the first. Locks are taken in path order, so calls naming several
    files cannot deadlock."""
    locks = [_changing.setdefault(path, asyncio.Lock()) for path in sorted(set(paths))]
    async with AsyncExitStack() as held:
        for lock in locks:
            await held.enter_async_context(lock)
        yield


def read_text(path: Path) -> str:
    """The UTF-8 text of the regular file at `path`, or a ToolFailure the model can act on."""
    data = read_regular_file(path, MAX_EDIT_BYTES, ToolFailure)
    if b"\x00" in data:
        raise ToolFailure(f"Cannot edit binary file: {path}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ToolFailure(f"Cannot edit {path}: it is not UTF-8 text") from None


def write_atomic(path: Path, content: str | bytes) -> None:
    """Replace (or create) `path` with `content` so a reader sees the old file or the new one, never a torn one.
    An existing file keeps its permission bits; a new one gets the usual umask-derived mode. Missing parent
    directories are created. Raises OSError."""
    data = content.encode("utf-8") if isinstance(content, str) else content
    try:
        mode: int | None = stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        mode = None
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temp, mode if mode is not None else _default_mode())
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def _default_mode() -> int:
    # Setting os.umask to read it would race with other threads creating files, so read it from /proc (Linux).
    try:
        with open("/proc/self/status") as status:
            mask = next(int(line.split()[1], 8) for line in status if line.startswith("Umask:"))
    except (OSError, StopIteration, ValueError, IndexError):
        mask = 0o022
    return 0o666 & ~mask
