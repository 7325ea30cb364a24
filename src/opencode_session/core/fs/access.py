"""Reading one file and listing one directory for the API, under the Location authority: paths resolved like the
tools' (`..`, symbolic links), outside the Location only where a rule allows, regular files only and bounded."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from ...schema import session_errors
from ...schema.errors import ForbiddenError, InvalidRequestError
from ...schema.fs import FileSystemEntry
from ..permission import AccessRefused, Authority, read_regular_file
from ..tools.ignores import walk

MAX_READ_BYTES = 10 * 1024 * 1024
_SNIFF_BYTES = 8192


def _bad_path(message: str) -> InvalidRequestError:
    return InvalidRequestError(message, kind="path", field="path")


def _reach(authority: Authority, action: str, raw: str) -> Path:
    try:
        return authority.check(action, raw)
    except AccessRefused as refused:
        if refused.type == session_errors.TOOL_EXECUTION:  # not a usable path at all
            raise _bad_path(refused.message) from None
        raise ForbiddenError(refused.message) from None


def is_binary(data: bytes) -> bool:
    """Not UTF-8 text: a NUL byte or an invalid sequence in its first 8 KiB."""
    sample = data[:_SNIFF_BYTES]
    if b"\x00" in sample:
        return True
    try:
        sample.decode("utf-8")
    except UnicodeDecodeError as bad:
        return bad.start < len(sample) - 3  # a character cut by the sample's end is still text
    return False


def read_file(authority: Authority, raw: str) -> bytes:
    """The bytes of the regular file `raw` names; InvalidRequestError for a missing, non-regular or oversized one,
    ForbiddenError where the rules refuse reading it."""
    if not raw:
        raise _bad_path("A file path is required after /api/fs/read/")
    return read_regular_file(_reach(authority, "read", raw), MAX_READ_BYTES, _bad_path, name=raw)


def relative_name(authority: Authority, path: Path) -> str:
    """`path` as the API names it: relative to the Location (`/`-separated), or absolute outside it."""
    try:
        return path.relative_to(authority.root).as_posix()
    except ValueError:
        return str(path)


def list_directory(authority: Authority, raw: str | None, env: Mapping[str, str]) -> list[FileSystemEntry]:
    """The entries directly in the directory `raw` names (the Location by default), directories first, each sorted
    by name, without what the ignore files exclude (and never `.git`, `node_modules` or symbolic links)."""
    path = _reach(authority, "list", raw or ".")
    if not path.is_dir():
        raise _bad_path(f"Not a directory: {raw}")
    try:
        _, dirs, files = next(walk(path, env))
    except (StopIteration, OSError) as exc:
        raise _bad_path(f"Cannot list {raw}: {exc}") from None
    base = relative_name(authority, path)
    prefix = "" if base == "." else base + "/"
    # a file the rules deny reading is not listed: its name may be the secret, as in the glob tool
    files = [f for f in files if authority.effect_on("read", path / f) != "deny"]
    return [*(FileSystemEntry(path=prefix + d, type="directory") for d in dirs),
            *(FileSystemEntry(path=prefix + f, type="file") for f in files)]


__all__ = ["MAX_READ_BYTES", "is_binary", "list_directory", "read_file", "relative_name"]
