"""The `read` tool: numbered lines of a UTF-8 text file, or the sorted listing of a directory."""

from __future__ import annotations

import base64
import difflib
import os
import stat
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

import anyio.to_thread
from pydantic import BaseModel, Field

from opencode_session.schema.message import ToolFileContent, ToolTextContent

from ...permission import NotRegularFileError, open_regular_file
from ..arguments import schema_of
from ..output import DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES
from ..tool import ToolContext, ToolFailure, ToolOutput

DEFAULT_LIMIT = 2000
MAX_LINE_CHARS = 2000
# A page stops short of the registry's final bound, leaving room for the closing note, so the model gets an
# "offset=" hint instead of a cut-out middle.
PAGE_MAX_LINES = DEFAULT_MAX_LINES - 2
PAGE_MAX_BYTES = DEFAULT_MAX_BYTES - 1024
BINARY_SNIFF_BYTES = 8192
# Bytes kept of one line: always more than MAX_LINE_CHARS characters (at most 4 bytes each) when the line is longer,
# so it still reads as truncated; the rest of a long line is skipped, never held in memory.
LINE_KEEP_BYTES = 4 * MAX_LINE_CHARS + 4
SKIP_CHUNK_BYTES = 64 * 1024
MAX_SUGGESTIONS = 3
# An image is sent to the model inline; larger ones would blow the request (OpenCode's inline media limit).
MAX_IMAGE_BYTES = 5 * 1024 * 1024
# Leading bytes of the image formats providers take as input.
_IMAGE_SIGNATURES = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)
# Text files hold few control characters; a sniffed prefix with more than this share of them is binary.
MAX_CONTROL_SHARE = 0.3

DESCRIPTION = (
    "Read a file or list a directory.\n"
    "\n"
    "- path may be absolute or relative to the session's working directory.\n"
    "- Lines come back numbered as `00001| text`, starting at `offset` (1-based, default 1), at most `limit` lines"
    " (default 2000).\n"
    "- One call returns at most about 50 KB. Lines longer than 2000 characters are cut.\n"
    "- When the file has more lines, the output ends with the offset to continue from.\n"
    "- A directory path returns its entries sorted by name; subdirectories end with `/`.\n"
    "- Images (PNG, JPEG, GIF, WebP) come back as an attachment when the model accepts images.\n"
    "- Other binary files cannot be read."
)


class ReadArguments(BaseModel):
    path: str = Field(min_length=1, description="Path of the file or directory to read, absolute or relative to the"
                                                " working directory")
    offset: int = Field(1, ge=1, description="Line number to start from (1-based)")
    limit: int = Field(DEFAULT_LIMIT, ge=1, le=DEFAULT_LIMIT,
                       description="Maximum number of lines to read (default 2000)")


class ReadTool:
    name = "read"
    changes_files = False
    idempotent = True  # no effect beyond its answer: after a lost host it may run again
    description = DESCRIPTION
    arguments = ReadArguments
    parameters = schema_of(ReadArguments)

    async def execute(self, args: ReadArguments, ctx: ToolContext) -> ToolOutput:
        # JSON Schema "integer" admits 5.0; parsed as int, line numbers and "offset=" hints print as integers.
        offset, limit = args.offset, args.limit
        path = await ctx.permit_path("read", args.path)
        # Abandoning on cancel is safe: the worker only reads, and its result is simply dropped.
        output = await anyio.to_thread.run_sync(_read, path, offset, limit, ctx.model_accepts_images,
                                                abandon_on_cancel=True)
        output.title = ctx.display(path)
        if ctx.on_read is not None:
            await ctx.on_read(path)
        return output


def _read(path: Path, offset: int, limit: int, images: bool) -> ToolOutput:
    try:
        info = path.stat()
    except (FileNotFoundError, NotADirectoryError):
        raise ToolFailure(_not_found(path)) from None
    except OSError as exc:
        raise ToolFailure(f"Cannot read {path}: {exc.strerror or exc}") from None
    if stat.S_ISDIR(info.st_mode):
        return _list_directory(path, offset, limit)
    try:
        # A FIFO or device would block the worker thread forever or stream without end.
        with open_regular_file(path) as raw:
            return _read_file(raw, path, offset, limit, images)
    except NotRegularFileError:
        raise ToolFailure(f"Not a regular file: {path}") from None
    except OSError as exc:
        raise ToolFailure(f"Cannot read {path}: {exc.strerror or exc}") from None


def _read_file(raw: BinaryIO, path: Path, offset: int, limit: int, images: bool) -> ToolOutput:
    head = raw.read(BINARY_SNIFF_BYTES)
    mime = _image_mime(head)
    if mime is not None:
        return _read_image(raw, head, path, mime, images)
    if _looks_binary(head):
        raise ToolFailure(f"Cannot read binary file: {path}")
    raw.seek(0)
    # Streaming keeps memory flat on big files; the whole file is still scanned to report its length.
    shown, total, capped = _page(_lines(raw), offset, limit, _number_line)
    return _paged_output(path, shown, total, capped, offset, unit="lines", empty="(File is empty)",
                         action="read", end=f"End of file: {total} lines")


def _image_mime(head: bytes) -> str | None:
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    return next((mime for signature, mime in _IMAGE_SIGNATURES if head.startswith(signature)), None)


def _looks_binary(head: bytes) -> bool:
    """A NUL byte, or many control characters other than whitespace (UTF-8 text bytes are all >= 0x80 or
    printable)."""
    if b"\x00" in head:
        return True
    controls = sum(1 for byte in head if byte < 0x20 and byte not in b"\t\n\r\f\b\x1b")
    return bool(head) and controls / len(head) > MAX_CONTROL_SHARE


def _read_image(raw: BinaryIO, head: bytes, path: Path, mime: str, images: bool) -> ToolOutput:
    if not images:
        raise ToolFailure(f"Cannot read {path}: it is an image ({mime}) and the current model does not accept "
                          "image input.")
    data = head + raw.read(MAX_IMAGE_BYTES + 1 - len(head))
    if len(data) > MAX_IMAGE_BYTES:
        raise ToolFailure(f"Cannot read {path}: the image is larger than {MAX_IMAGE_BYTES // (1024 * 1024)} MiB.")
    uri = f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"
    return ToolOutput(content=[ToolTextContent(text=f"Image read: {path} ({mime}, {len(data)} bytes)"),
                               ToolFileContent(uri=uri, mime=mime, name=path.name)],
                      structured={"path": str(path), "mime": mime, "bytes": len(data)})


def _lines(raw: BinaryIO) -> Iterator[str]:
    """The file's lines without their ending, each cut to LINE_KEEP_BYTES, so a gigabyte without a newline costs
    no more memory than a short line. Undecodable bytes become U+FFFD: the model can still read the rest."""
    while line := raw.readline(LINE_KEEP_BYTES):
        if not line.endswith(b"\n"):
            while (rest := raw.readline(SKIP_CHUNK_BYTES)) and not rest.endswith(b"\n"):
                pass  # the rest of an over-long line
        yield line.rstrip(b"\n").removesuffix(b"\r").decode("utf-8", errors="replace")


def _list_directory(path: Path, offset: int, limit: int) -> ToolOutput:
    try:
        with os.scandir(path) as it:
            entries = sorted(entry.name + ("/" if _is_dir(entry) else "") for entry in it)
    except OSError as exc:
        raise ToolFailure(f"Cannot list {path}: {exc.strerror or exc}") from None
    shown, total, capped = _page(entries, offset, limit, lambda _, name: name)
    return _paged_output(path, shown, total, capped, offset, unit="entries", empty="(Empty directory)",
                         action="list", end=f"{total} {'entry' if total == 1 else 'entries'}")


def _paged_output(path: Path, shown: list[str], total: int, capped: bool, offset: int, *, unit: str, empty: str,
                  action: str, end: str) -> ToolOutput:
    """One page of a file or listing, with a closing note that says how to continue."""
    if offset > total and not (total == 0 and offset == 1):
        raise ToolFailure(f"Offset {offset} is past the end of {path}, which has {total} {unit}")
    last = offset + len(shown) - 1
    more = last < total
    if total == 0:
        text = empty
    elif more:
        text = "\n".join(shown) + (
            f"\n\n({_cap_note(capped)}Showing {unit} {offset}-{last} of {total}. "
            f"Use offset={last + 1} to {action} more.)"
        )
    else:
        text = "\n".join(shown) + f"\n\n({end})"
    return ToolOutput.of_text(text, {"path": str(path), "lines": total, "truncated": more})


def _page(
    items: Iterable[str], offset: int, limit: int, render: Callable[[int, str], str]
) -> tuple[list[str], int, bool]:
    """Render items offset..offset+limit-1 within the page budget; also count every item.

    Returns the rendered page, the total count and whether the budget (not `limit`) ended the page.
    """
    shown: list[str] = []
    size = 0
    capped = False
    total = 0
    for total, item in enumerate(items, start=1):
        if total < offset or len(shown) >= limit or capped:
            continue
        rendered = render(total, item)
        item_size = len(rendered.encode("utf-8")) + 1
        # The first item always shows, so a page is never empty; its length is already capped by render.
        if shown and (len(shown) >= PAGE_MAX_LINES or size + item_size > PAGE_MAX_BYTES):
            capped = True
            continue
        shown.append(rendered)
        size += item_size
    return shown, total, capped


def _number_line(number: int, line: str) -> str:
    if len(line) > MAX_LINE_CHARS:
        line = line[:MAX_LINE_CHARS] + f"... (line truncated to {MAX_LINE_CHARS} characters)"
    return f"{number:05d}| {line}"


def _cap_note(capped: bool) -> str:
    return f"Output limited to {PAGE_MAX_LINES} lines or {PAGE_MAX_BYTES // 1024} KB per call. " if capped else ""


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False


def _not_found(path: Path) -> str:
    message = f"File not found: {path}"
    try:
        siblings = os.listdir(path.parent)
    except OSError:
        return message
    wanted = path.name.lower()
    # Substring hits catch a missing extension ("config" -> "config.json"); close matches catch typos.
    candidates = [name for name in sorted(siblings) if wanted and wanted in name.lower()]
    candidates += difflib.get_close_matches(path.name, siblings, n=MAX_SUGGESTIONS, cutoff=0.6)
    suggestions = list(dict.fromkeys(candidates))[:MAX_SUGGESTIONS]
    if not suggestions:
        return message
    return message + "\n\nDid you mean one of these?\n" + "\n".join(str(path.parent / name) for name in suggestions)
