"""The `glob` tool: files matching a glob pattern under a directory, most recently modified first."""

from __future__ import annotations

import os
import re
from functools import partial
from pathlib import Path
from typing import Any

import anyio.to_thread

from ..tool import ToolContext, ToolFailure, ToolOutput

MAX_RESULTS = 100
SKIPPED_DIRS = frozenset({".git", "node_modules"})
_MAGIC = re.compile(r"[*?\[{]")

DESCRIPTION = """Find files by glob pattern.

- Supports `*`, `**`, `?`, `[abc]` and `{a,b}`, e.g. "**/*.py", "src/**/*.{ts,tsx}".
- A pattern without `/` matches file names at any depth ("*.py" finds every Python file).
- `path` is the directory to search (default: the session's working directory).
- Returns absolute paths, most recently modified first, at most 100. `.git` and `node_modules` are skipped."""


class GlobTool:
    name = "glob"
    description = DESCRIPTION
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "minLength": 1, "description": "The glob pattern to match files against"},
            "path": {
                "type": "string",
                "description": "Directory to search in, absolute or relative to the working directory (default: the working directory)",
            },
        },
        "required": ["pattern"],
    }

    async def execute(self, input: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        pattern: str = input["pattern"]
        base = ctx.resolve(input.get("path") or ".")
        base, pattern, anchored = _split_pattern(base, pattern)
        matcher = re.compile(_translate(pattern), re.DOTALL)
        # Abandoning on cancel is safe: the walk only reads, and a large tree should not delay an abort.
        paths, total = await anyio.to_thread.run_sync(partial(_search, base, matcher, anchored), abandon_on_cancel=True)
        truncated = total > len(paths)
        if not paths:
            text = "No files found"
        else:
            text = "\n".join(paths)
            if truncated:
                text += (
                    f"\n\n(Showing the {len(paths)} most recently modified of {total} matches. "
                    "Use a more specific path or pattern to narrow the results.)"
                )
        return ToolOutput.of_text(text, {"count": len(paths), "truncated": truncated}, title=ctx.display(base))


def _split_pattern(base: Path, pattern: str) -> tuple[Path, str, bool]:
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
    return Path(os.path.normpath(base / prefix)), "/".join(parts[literal:]), True


def _translate(pattern: str) -> str:
    """A regex for a glob: `*` and `?` stay within one path segment, `**` crosses segments."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "*":
            if pattern.startswith("**", i):
                at_segment_start = i == 0 or pattern[i - 1] == "/"
                if at_segment_start and pattern.startswith("/", i + 2):
                    # "**/" may match no directory at all, so "**/*.py" also matches "a.py".
                    out.append("(?:.*/)?")
                    i += 3
                else:
                    out.append(".*")
                    i += 2
                continue
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            end = _class_end(pattern, i)
            if end < 0:
                out.append(re.escape(c))
            else:
                out.append(_translate_class(pattern[i + 1 : end]))
                i = end
        elif c == "{":
            end, alternatives = _brace_alternatives(pattern, i)
            if end < 0:
                out.append(re.escape(c))
            else:
                out.append("(?:" + "|".join(_translate(alt) for alt in alternatives) + ")")
                i = end
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


def _class_end(pattern: str, start: int) -> int:
    j = start + 1
    if j < len(pattern) and pattern[j] in "!^":
        j += 1
    # A "]" right after the opening bracket is a member, not the end.
    if j < len(pattern) and pattern[j] == "]":
        j += 1
    end = pattern.find("]", j)
    return end


def _translate_class(body: str) -> str:
    negate = body[:1] in ("!", "^")
    if negate:
        body = body[1:]
    # Escape every member except range dashes, so nothing in the body reads as regex set syntax.
    members = "".join(ch if ch == "-" else re.escape(ch) for ch in body)
    return f"[^/{members}]" if negate else f"[{members}]"


def _brace_alternatives(pattern: str, start: int) -> tuple[int, list[str]]:
    depth = 0
    alternatives: list[str] = []
    piece_start = start + 1
    for j in range(start, len(pattern)):
        ch = pattern[j]
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                alternatives.append(pattern[piece_start:j])
                return j, alternatives
        elif ch == "," and depth == 1:
            alternatives.append(pattern[piece_start:j])
            piece_start = j + 1
    return -1, []


def _search(base: Path, matcher: re.Pattern[str], anchored: bool) -> tuple[list[str], int]:
    if not base.exists():
        raise ToolFailure(f"Directory not found: {base}")
    if not base.is_dir():
        raise ToolFailure(f"Not a directory: {base}")
    found: list[tuple[float, str]] = []
    for root, dirs, files in os.walk(base):
        dirs[:] = [d for d in dirs if d not in SKIPPED_DIRS]
        relative_root = os.path.relpath(root, base)
        prefix = "" if relative_root == "." else relative_root.replace(os.sep, "/") + "/"
        for name in files:
            if not matcher.fullmatch(prefix + name if anchored else name):
                continue
            full = os.path.join(root, name)
            try:
                mtime = os.stat(full).st_mtime
            except OSError:
                # A dangling symlink still names a file the model may want to know about.
                mtime = 0.0
            found.append((mtime, full))
    found.sort(key=lambda item: (-item[0], item[1]))
    return [path for _, path in found[:MAX_RESULTS]], len(found)
