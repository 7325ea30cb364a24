"""The `grep` tool: lines matching a regular expression under a directory, grouped by file, newest file first.
ripgrep does the search when it is on PATH (or installed with this package); otherwise a pure-Python search with the
same rules and output. Either way only regular files are read, and only the lines of files `read` may see."""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio.to_thread
import regex  # type: ignore[import-untyped]
from pydantic import BaseModel, Field
from wcmatch import glob as wcglob

from ...permission import open_regular_file
from ..arguments import schema_of
from ..ignores import SKIPPED, named_by, walk
from ..tool import ToolContext, ToolFailure, ToolOutput
from .glob import MAX_ENTRIES, MAX_EXPANSIONS, MAX_SECONDS

DEFAULT_LIMIT = 100
MAX_LINE_CHARS = 2000
MAX_COLLECTED = 20_000  # matches held in memory to sort; past this the search stops and says so
MAX_FILE_BYTES = 16 * 1024 * 1024  # the fallback skips larger files
REGEX_SECONDS = 1.0  # the fallback's budget for one line or file: a pathological pattern cannot stall it
# Assertions that see past a line's ends; with them the fallback cannot first test a file's whole text at once.
_SEES_PAST_LINE = regex.compile(r"\\[AZz]|\(\?<?[=!]")
_GLOB_FLAGS = wcglob.GLOBSTAR | wcglob.BRACE | wcglob.DOTGLOB

DESCRIPTION = """Search file contents with a regular expression.

- `pattern` is a regular expression (ripgrep syntax), e.g. "def \\w+\\(" or "TODO|FIXME". Matching is case-sensitive.
- `path` is the directory (or file) to search (default: the session's working directory).
- `include` limits the files searched by glob, e.g. "*.py" or "*.{ts,tsx}".
- Returns matching lines with their line numbers, grouped by file, most recently modified files first, at most
  `limit` matches (default 100). Hidden files are searched; files ignored by .gitignore (and .ignore), `.git`,
  `node_modules`, symlinks and binary files are not."""


@dataclass
class _Match:
    path: str
    line: int
    text: str


@dataclass
class _Found:
    matches: list[_Match] = field(default_factory=list)
    stopped: str | None = None  # why the search ended before it saw everything
    withheld: int = 0  # files with matches the read rules do not let the model see


class GrepArguments(BaseModel):
    pattern: str = Field(min_length=1, description="The regular expression to search for")
    path: str | None = Field(None, description="Directory or file to search (default: the working directory)")
    include: str | None = Field(None, description='Glob of the files to search, e.g. "*.py"')
    limit: int = Field(DEFAULT_LIMIT, ge=1, description="Maximum number of matches (default 100)")


class GrepTool:
    name = "grep"
    changes_files = False
    idempotent = True  # no effect beyond its answer: after a lost host it may run again
    description = DESCRIPTION
    arguments = GrepArguments
    parameters = schema_of(GrepArguments)

    async def execute(self, args: GrepArguments, ctx: ToolContext) -> ToolOutput:
        pattern, include, limit = args.pattern, args.include or None, args.limit
        root = await ctx.locate(args.path or ".")
        await ctx.permit("grep", [pattern])
        if not root.exists():
            raise ToolFailure(f"Path not found: {root}")
        env = ctx.env if ctx.env is not None else os.environ
        rg = find_ripgrep(env)
        stop = threading.Event()
        authority = ctx.authority

        def search() -> _Found:
            found = (_ripgrep(rg, pattern, root, include, env, stop) if rg
                     else _python_grep(pattern, root, include, env, stop))
            # the read rules hold for every file whose lines are returned, as for `read` (`.env` is denied)
            allowed: dict[str, bool] = {}
            kept = []
            for match in found.matches:
                if match.path not in allowed:
                    allowed[match.path] = authority.effect_on("read", Path(match.path)) == "allow"
                if allowed[match.path]:
                    kept.append(match)
            found.matches, found.withheld = kept, sum(1 for ok in allowed.values() if not ok)
            return found

        try:
            # cancelled (an interrupt): `stop` ends the search (ripgrep is killed), the worker thread is freed
            found = await anyio.to_thread.run_sync(search, abandon_on_cancel=True)
        finally:
            stop.set()
        return _render(found, limit, ctx.display(root))


def find_ripgrep(env: Mapping[str, str]) -> str | None:
    """ripgrep on the environment's PATH, else the one installed with this package (the venv's `bin`, next to the
    interpreter: `python3 run.py serve` does not put it on PATH)."""
    found = shutil.which("rg", path=env.get("PATH", os.defpath))
    if found:
        return found
    for folder in (Path(sys.prefix) / "bin", Path(sys.executable).parent):
        candidate = folder / "rg"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def _render(found: _Found, limit: int, title: str) -> ToolOutput:
    withheld = (f"\n\n({found.withheld} file{'s' if found.withheld != 1 else ''} with matches left out: the"
                " permission rules do not allow reading them.)") if found.withheld else ""
    if not found.matches:
        text = "No matches found"
        if found.stopped:
            text += f" (the search stopped early: {found.stopped})"
        return ToolOutput.of_text(text + withheld, {"matches": 0, "truncated": bool(found.stopped)}, title=title)
    mtimes: dict[str, float] = {}
    for match in found.matches:
        if match.path not in mtimes:
            try:
                mtimes[match.path] = os.stat(match.path).st_mtime
            except OSError:
                mtimes[match.path] = 0.0
    ordered = sorted(found.matches, key=lambda m: (-mtimes[m.path], m.path, m.line))
    shown = ordered[:limit]
    lines = [f"Found {len(found.matches)} match{'es' if len(found.matches) != 1 else ''}"]
    current = None
    for match in shown:
        if match.path != current:
            if current is not None:
                lines.append("")
            lines.append(f"{match.path}:")
            current = match.path
        text = match.text if len(match.text) <= MAX_LINE_CHARS else match.text[:MAX_LINE_CHARS] + "..."
        lines.append(f"  Line {match.line}: {text}")
    truncated = len(ordered) > len(shown) or bool(found.stopped)
    if len(ordered) > len(shown):
        lines += ["", f"(Showing {len(shown)} of {len(ordered)} matches. Use a more specific pattern, path or include "
                      "to narrow the search.)"]
    if found.stopped:
        lines += ["", f"(The search stopped early ({found.stopped}), so there may be more matches.)"]
    return ToolOutput.of_text("\n".join(lines) + withheld, {"matches": len(found.matches), "truncated": truncated},
                              title=title)


# --- ripgrep ------------------------------------------------------------------------------------------------


def _ripgrep(rg: str, pattern: str, root: Path, include: str | None, env: Mapping[str, str],
             stop: threading.Event) -> _Found:
    # The rules the fallback follows (see ignores): hidden files yes, ignore files yes, .git / node_modules /
    # symlinks no; the skips come last so that `include` cannot bring them back. --crlf: `$` matches before "\r\n"
    # too, as in the fallback. A directory is searched from inside, so an `include` with a `/` is taken below it.
    args = [rg, "--json", "--hidden", "--no-messages", "--no-config", "--crlf", "--regexp", pattern]
    if include:
        args += ["--glob", include]
    for skipped in sorted(SKIPPED):
        args += ["--glob", f"!{skipped}"]
    directory = root.is_dir()
    args += ["--", "." if directory else str(root)]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                            cwd=root if directory else None, env=dict(env))
    found = _Found()
    deadline = time.monotonic() + MAX_SECONDS

    def watch() -> None:  # a search that prints nothing for long is still ended by a stop or the deadline
        stop.wait(MAX_SECONDS)
        if proc.poll() is None:
            proc.kill()

    threading.Thread(target=watch, name="grep-watch", daemon=True).start()
    try:
        assert proc.stdout is not None
        for raw in proc.stdout:
            if stop.is_set():
                found.stopped = "cancelled"
                break
            if time.monotonic() > deadline:
                found.stopped = f"after {MAX_SECONDS:g} seconds"
                break
            if len(found.matches) >= MAX_COLLECTED:
                found.stopped = f"more than {MAX_COLLECTED} matches"
                break
            event = json.loads(raw)
            if event.get("type") == "match":
                data = event["data"]
                path = _rg_text(data["path"])
                found.matches.append(_Match(os.path.normpath(os.path.join(root, path)) if directory else path,
                                            data["line_number"], _rg_text(data["lines"]).rstrip("\r\n")))
    finally:
        if proc.poll() is None:
            proc.kill()
        _, err = proc.communicate()
        stop.set()  # the watcher ends
    # ripgrep exits 1 when nothing matched, 2 on errors (a bad pattern; unreadable files are silenced above).
    if proc.returncode == -signal.SIGKILL and not found.stopped:
        found.stopped = "cancelled" if time.monotonic() < deadline else f"after {MAX_SECONDS:g} seconds"
    if proc.returncode == 2 and not found.matches and not found.stopped:
        message = err.decode("utf-8", "replace").strip()
        raise ToolFailure(f"Invalid search: {message}" if message else "The search failed.")
    return found


def _rg_text(value: dict[str, Any]) -> str:
    """ripgrep's JSON gives text, or base64 bytes when they are not UTF-8."""
    if "text" in value:
        return str(value["text"])
    return base64.b64decode(value.get("bytes", "")).decode("utf-8", "replace")


# --- pure Python --------------------------------------------------------------------------------------------


def _python_grep(pattern: str, root: Path, include: str | None, env: Mapping[str, str],
                 stop: threading.Event) -> _Found:
    try:
        compiled = regex.compile(pattern)
        # Most files do not match at all: one search over the whole text rules them out. In MULTILINE mode a line's
        # match is also a match in the whole text, unless the pattern looks past the line (lookarounds, \A, \Z).
        whole = None if _SEES_PAST_LINE.search(pattern) else regex.compile(pattern, regex.MULTILINE)
    except regex.error as bad:
        raise ToolFailure(f"Invalid search: regex parse error: {bad}") from None
    try:
        matcher = wcglob.compile(include, flags=_GLOB_FLAGS, limit=MAX_EXPANSIONS) if include else None
    except Exception as bad:  # wcmatch's pattern errors
        raise ToolFailure(f"Invalid include glob {include!r}: {bad}") from None
    found = _Found()
    deadline = time.monotonic() + MAX_SECONDS
    for path in _files(root, matcher, include is not None and "/" in include, env, found):
        if stop.is_set():
            found.stopped = "cancelled"
        elif time.monotonic() > deadline:
            found.stopped = f"after {MAX_SECONDS:g} seconds"
        if found.stopped:
            break
        try:
            _search_file(path, compiled, whole, found)
        except TimeoutError:
            found.stopped = "the pattern took too long on one line"
        if len(found.matches) >= MAX_COLLECTED and not found.stopped:
            found.stopped = f"more than {MAX_COLLECTED} matches"
    return found


def _files(root: Path, matcher: Any, anchored: bool, env: Mapping[str, str], found: _Found) -> Iterator[str]:
    """The regular files to search, as ripgrep picks them (see ignores); `include` matches the name, or the path
    below the root when it has a `/`. A file given as the root is searched whatever the rules say, as ripgrep does."""
    if not root.is_dir():
        if not root.is_symlink() and root.is_file():  # is_file: a regular file (not a FIFO)
            yield str(root)
        return
    examined = 0
    for directory, dirs, names in walk(root, env, None if matcher is None else named_by(matcher, anchored)):
        examined += len(dirs) + len(names)
        if examined > MAX_ENTRIES:
            found.stopped = f"more than {MAX_ENTRIES} entries"
            return
        for name in names:
            yield os.path.join(directory, name)


def _search_file(path: str, compiled: Any, whole: Any, found: _Found) -> None:
    try:
        # only regular files, as ripgrep: a FIFO (or device) would block the read forever
        with open_regular_file(Path(path)) as handle:
            if os.fstat(handle.fileno()).st_size > MAX_FILE_BYTES:
                return
            data = handle.read()
    except OSError:
        return  # unreadable files are skipped silently, as ripgrep does with --no-messages
    if b"\x00" in data:
        return  # binary
    text = data.decode("utf-8", "replace").replace("\r\n", "\n")
    if whole is not None and not whole.search(text, timeout=REGEX_SECONDS):
        return
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()  # the final newline ends the last line; nothing follows it
    for number, line in enumerate(lines, start=1):
        if compiled.search(line, timeout=REGEX_SECONDS):
            found.matches.append(_Match(path, number, line))
