"""The `glob` tool: files matching a glob pattern under a directory, most recently modified first."""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio.to_thread
from pydantic import BaseModel, Field
from wcmatch import glob as wcglob

from ...permission import Authority
from ..arguments import schema_of
from ..ignores import named_by, walk
from ..tool import ToolContext, ToolFailure, ToolOutput

MAX_RESULTS = 100
_MAGIC = re.compile(r"[*?\[{]")
# wcmatch compiles globs to regexes that never backtrack catastrophically; these bound the walk itself.
_FLAGS = wcglob.GLOBSTAR | wcglob.BRACE | wcglob.DOTGLOB
MAX_EXPANSIONS = 1000  # brace alternatives a pattern may expand to
MAX_ENTRIES = 200_000  # files and directories one search examines
MAX_SECONDS = 20.0

DESCRIPTION = """Find files by glob pattern.

- Supports `*`, `**`, `?`, `[abc]` and `{a,b}`, e.g. "**/*.py", "src/**/*.{ts,tsx}".
- A pattern without `/` matches file names at any depth ("*.py" finds every Python file).
- `path` is the directory to search (default: the session's working directory).
- Returns absolute paths, most recently modified first, at most `limit` (default 100).
  Files ignored by .gitignore (and .ignore) are skipped unless the pattern names them; `.git`, `node_modules` and
  symlinks always are."""


class GlobArguments(BaseModel):
    pattern: str = Field(min_length=1, description="The glob pattern to match files against")
    path: str | None = Field(None, description="Directory to search in, absolute or relative to the working directory"
                                               " (default: the working directory)")
    limit: int = Field(MAX_RESULTS, ge=1, description="Maximum number of paths to return (default 100)")


class GlobTool:
    name = "glob"
    changes_files = False
    idempotent = True  # no effect beyond its answer: after a lost host it may run again
    description = DESCRIPTION
    arguments = GlobArguments
    parameters = schema_of(GlobArguments)

    async def execute(self, args: GlobArguments, ctx: ToolContext) -> ToolOutput:
        pattern, limit = args.pattern, args.limit
        stop = threading.Event()
        base, rest, anchored = _split_pattern(args.path or ".", pattern)
        root = await ctx.locate(base)
        await ctx.permit("glob", [pattern])

        def search() -> _Found:
            try:
                matcher = wcglob.compile(rest, flags=_FLAGS, limit=MAX_EXPANSIONS)
            except Exception as bad:  # wcmatch's PatternLimitException and pattern errors
                raise ToolFailure(f"Invalid glob pattern {pattern!r}: {bad}") from None
            return _search(root, matcher, anchored, ctx.env if ctx.env is not None else os.environ, stop, limit,
                           ctx.authority)

        # The walk runs in a worker thread; cancelling the call abandons it and `stop` ends it at the next entry.
        try:
            found = await anyio.to_thread.run_sync(search, abandon_on_cancel=True)
        finally:
            stop.set()
        truncated = found.total > len(found.paths)
        if not found.paths:
            text = "No files found"
        else:
            text = "\n".join(found.paths)
            if truncated:
                text += (
                    f"\n\n(Showing the {len(found.paths)} most recently modified of {found.total} matches. "
                    "Use a more specific path or pattern to narrow the results.)"
                )
        if found.stopped:
            text += (f"\n\n(The search stopped early ({found.stopped}), so there may be more matches. "
                     "Use a more specific path or pattern.)")
        return ToolOutput.of_text(text, {"count": len(found.paths), "truncated": truncated or bool(found.stopped)},
                                  title=ctx.display(found.base))


@dataclass
class _Found:
    base: Path
    paths: list[str]
    total: int
    stopped: str | None  # why the walk ended before the whole tree was seen


def _split_pattern(base: str, pattern: str) -> tuple[str, str, bool]:
    """Move a literal leading directory of the pattern into the base, so "/abs/dir/*.py" or "../x/*.py" work.

    Returns the base, the remaining pattern and whether it is anchored to the base (has a `/`).
    """
    while pattern.startswith("./"):
        pattern = pattern[2:]
    anchored = "/" in pattern
    if not (os.path.isabs(pattern) or pattern.startswith("../")):
        return base, pattern, anchored
    parts = pattern.split("/")
    literal = 0
    while literal < len(parts) - 1 and not _MAGIC.search(parts[literal]):
        literal += 1
    prefix = "/".join(parts[:literal]) or "/"
    return os.path.join(base, prefix), "/".join(parts[literal:]), True


def _search(base: Path, matcher: Any, anchored: bool, env: Mapping[str, str], stop: threading.Event,
            limit: int, authority: Authority | None = None) -> _Found:
    if not base.exists():
        raise ToolFailure(f"Directory not found: {base}")
    if not base.is_dir():
        raise ToolFailure(f"Not a directory: {base}")
    found: list[tuple[float, str]] = []
    deadline = time.monotonic() + MAX_SECONDS
    examined = 0
    stopped: str | None = None
    # The files ripgrep would list (see ignores), the pattern taking precedence as its --glob does; symlinks are
    # not followed, so the walk stays under the checked base.
    for root, dirs, files in walk(base, env, named_by(matcher, anchored)):
        examined += len(dirs) + len(files)
        if stop.is_set():
            stopped = "cancelled"
            break
        if examined > MAX_ENTRIES:
            stopped = f"more than {MAX_ENTRIES} entries"
            break
        if time.monotonic() > deadline:
            stopped = f"after {MAX_SECONDS:g} seconds"
            break
        for name in files:
            full = os.path.join(root, name)
            if authority is not None and authority.effect_on("read", Path(full)) == "deny":
                continue  # a file the rules deny reading is not listed either: its name may be the secret
            try:
                mtime = os.stat(full).st_mtime
            except OSError:
                mtime = 0.0  # gone since the walk saw it
            found.append((mtime, full))
    found.sort(key=lambda item: (-item[0], item[1]))
    return _Found(base, [path for _, path in found[:limit]], len(found), stopped)
