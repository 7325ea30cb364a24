"""OpenCode's patch format (`*** Begin Patch` ... `*** End Patch` with Add/Update/Delete File sections) parsed into
file operations, and an Update's hunks applied to a file's text. Pure: no file system access."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from .tool import ToolFailure

BEGIN = "*** Begin Patch"
END = "*** End Patch"
ADD = "*** Add File: "
DELETE = "*** Delete File: "
UPDATE = "*** Update File: "
MOVE = "*** Move to: "
END_OF_FILE = "*** End of File"


@dataclass
class Hunk:
    """One change in an Update: `old` lines (context and removals) become `new` lines (context and additions).
    `anchor` is the line after `@@` the hunk follows; `at_end` pins it to the end of the file."""

    anchor: str | None = None
    old: list[str] = field(default_factory=list)
    new: list[str] = field(default_factory=list)
    at_end: bool = False


@dataclass
class FileOp:
    kind: str  # "add", "update" or "delete"
    path: str
    content: str = ""  # for "add": the whole new file
    move_to: str | None = None
    hunks: list[Hunk] = field(default_factory=list)


def parse_patch(text: str) -> list[FileOp]:
    """The file operations of a patch, in order; ToolFailure naming the line when it is malformed."""
    lines = text.strip().splitlines()
    # Models sometimes wrap the patch in a heredoc (`<<'EOF'` ... `EOF`); the patch is what is inside.
    if len(lines) >= 2 and lines[0].lstrip().startswith("<<") and lines[-1].strip() in ("EOF", "'EOF'", '"EOF"'):
        lines = lines[1:-1]
    if not lines or lines[0].strip() != BEGIN:
        raise ToolFailure(f"The patch must start with '{BEGIN}'.")
    if lines[-1].strip() != END:
        raise ToolFailure(f"The patch must end with '{END}'.")
    ops: list[FileOp] = []
    i = 1
    body = lines[:-1]
    while i < len(body):
        line = body[i]
        if line.startswith(ADD):
            op = FileOp("add", _path(line, ADD, i))
            added: list[str] = []
            i += 1
            while i < len(body) and body[i].startswith("+"):
                added.append(body[i][1:])
                i += 1
            op.content = "".join(a + "\n" for a in added)
            ops.append(op)
        elif line.startswith(DELETE):
            ops.append(FileOp("delete", _path(line, DELETE, i)))
            i += 1
        elif line.startswith(UPDATE):
            op = FileOp("update", _path(line, UPDATE, i))
            i += 1
            if i < len(body) and body[i].startswith(MOVE):
                op.move_to = _path(body[i], MOVE, i)
                i += 1
            i = _parse_hunks(body, i, op)
            ops.append(op)
        elif not line.strip():
            i += 1
        else:
            raise ToolFailure(f"Patch line {i + 1}: expected a file header ('{ADD}', '{UPDATE}' or '{DELETE}'), "
                              f"got {line!r}.")
    if not ops:
        raise ToolFailure("The patch contains no file operations.")
    return ops


def _path(line: str, prefix: str, index: int) -> str:
    path = line[len(prefix):].strip()
    if not path:
        raise ToolFailure(f"Patch line {index + 1}: the file path is missing.")
    return path


def _parse_hunks(body: list[str], i: int, op: FileOp) -> int:
    hunk: Hunk | None = None
    while i < len(body):
        line = body[i]
        if line.startswith("*** ") and line != END_OF_FILE:
            break  # the next file section
        if line == END_OF_FILE:
            if hunk is None:
                raise ToolFailure(f"Patch line {i + 1}: '{END_OF_FILE}' outside a hunk.")
            hunk.at_end = True
        elif line.startswith("@@"):
            hunk = Hunk(anchor=line[2:].strip() or None)
            op.hunks.append(hunk)
        else:
            if hunk is None:  # the first hunk may leave out its "@@" line
                hunk = Hunk()
                op.hunks.append(hunk)
            marker, rest = (line[:1], line[1:]) if line else (" ", "")
            if marker == " ":
                hunk.old.append(rest)
                hunk.new.append(rest)
            elif marker == "-":
                hunk.old.append(rest)
            elif marker == "+":
                hunk.new.append(rest)
            else:
                raise ToolFailure(f"Patch line {i + 1}: a hunk line must start with ' ', '-' or '+', got {line!r}.")
        i += 1
    if not any(h.old or h.new for h in op.hunks):
        raise ToolFailure(f"Update of {op.path} has no changes.")
    return i


# Ways a hunk's lines may match the file's, strictest first: models often get trailing or indenting blanks wrong.
_MATCHERS: tuple[Callable[[str], str], ...] = (lambda s: s, str.rstrip, str.strip)


def apply_hunks(text: str, hunks: list[Hunk], path: str) -> str:
    """`text` with every hunk applied, in order; ToolFailure when a hunk's old lines are not found."""
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()  # the file's final newline ends its last line; it is not an empty line of its own
    edits: list[tuple[int, int, list[str]]] = []
    cursor = 0
    for number, hunk in enumerate(hunks, start=1):
        if hunk.anchor is not None:
            found = _seek(lines, [hunk.anchor], cursor, False)
            if found is None:
                raise ToolFailure(f"{path}: hunk {number}: the line {hunk.anchor!r} after '@@' was not found.")
            cursor = found + 1
        if not hunk.old:
            start = len(lines) if hunk.anchor is None else cursor
        else:
            found = _seek(lines, hunk.old, cursor, hunk.at_end)
            if found is None:
                raise ToolFailure(f"{path}: hunk {number}: these lines were not found in order:\n"
                                  + "\n".join(hunk.old[:10]))
            start = found
        edits.append((start, len(hunk.old), hunk.new))
        cursor = start + len(hunk.old)
    for start, length, new in reversed(edits):
        lines[start:start + length] = new
    return "".join(line + "\n" for line in lines)


def _seek(lines: list[str], wanted: list[str], start: int, at_end: bool) -> int | None:
    """Where `wanted` first occurs in `lines` at or after `start` (only at the very end when `at_end`)."""
    last = len(lines) - len(wanted)
    candidates = [last] if at_end and last >= start else range(start, last + 1)
    for norm in _MATCHERS:
        target = [norm(w) for w in wanted]
        for index in candidates:
            if all(norm(lines[index + k]) == target[k] for k in range(len(wanted))):
                return index
    return None
