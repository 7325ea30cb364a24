"""The `apply_patch` tool: adds, updates, moves and deletes files from one patch text, all or nothing."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import anyio.to_thread
from pydantic import BaseModel, Field

from ..arguments import schema_of
from ..files import changing, read_text, write_atomic
from ..patch import FileOp, apply_hunks, parse_patch
from ..tool import ToolContext, ToolFailure, ToolOutput

DESCRIPTION = """Apply a patch that adds, updates, moves or deletes files. Either every change applies or none does.

The patch text has this shape:
*** Begin Patch
*** Add File: path/new.py
+every line of the new file, each starting with +
*** Update File: path/old.py
*** Move to: path/renamed.py   (optional)
@@ def some_function():   (optional: a line the hunk comes after)
 a context line, starting with a space
-a line to remove
+a line to add
*** Delete File: path/unused.py
*** End Patch

- Give about three lines of context around each change so it is found unambiguously.
- Add File fails when the file exists (update it instead); Update and Delete fail when it does not.
- Paths may be absolute or relative to the session's working directory."""


@dataclass
class _Change:
    path: Path
    content: str | None  # None: delete the file
    label: str  # "A", "M" or "D" with the path, for the summary


class ApplyPatchArguments(BaseModel):
    patchText: str = Field(min_length=1, description="The whole patch text")  # noqa: N815 - OpenCode's name


class ApplyPatchTool:
    name = "apply_patch"
    description = DESCRIPTION
    arguments = ApplyPatchArguments
    parameters = schema_of(ApplyPatchArguments)

    async def execute(self, args: ApplyPatchArguments, ctx: ToolContext) -> ToolOutput:
        ops = parse_patch(args.patchText)
        targets: list[tuple[FileOp, Path, Path | None]] = []
        for op in ops:
            path = await ctx.permit_path("edit", op.path)
            ctx.refuse_unreadable(path)
            dest = await ctx.permit_path("edit", op.move_to) if op.move_to else None
            targets.append((op, path, dest))

        def apply() -> list[_Change]:
            changes = _plan(targets, ctx)
            _commit(changes)
            return changes

        touched = [p for _, path, dest in targets for p in (path, dest) if p is not None]
        async with changing(*touched):
            changes = await anyio.to_thread.run_sync(apply)
        summary = "\n".join(c.label for c in changes)
        return ToolOutput.of_text(f"Applied the patch:\n{summary}",
                                  {"files": [{"path": str(c.path), "change": c.label[0]} for c in changes]})


def _plan(targets: list[tuple[FileOp, Path, Path | None]], ctx: ToolContext) -> list[_Change]:
    """Every change the patch makes, with the new contents computed; nothing is written yet."""
    changes: list[_Change] = []
    seen: set[Path] = set()

    def claim(path: Path) -> None:
        if path in seen:
            raise ToolFailure(f"The patch changes {path} more than once; combine those changes.")
        seen.add(path)

    for op, path, dest in targets:
        claim(path)
        if op.kind == "add":
            if os.path.lexists(path):
                raise ToolFailure(f"Cannot add {path}: it already exists. Use '*** Update File:' to change it.")
            changes.append(_Change(path, op.content, f"A {ctx.display(path)}"))
        elif op.kind == "delete":
            if not path.is_file():
                raise ToolFailure(f"Cannot delete {path}: no such file.")
            changes.append(_Change(path, None, f"D {ctx.display(path)}"))
        else:
            after = apply_hunks(read_text(path), op.hunks, ctx.display(path))
            if dest is None or dest == path:
                changes.append(_Change(path, after, f"M {ctx.display(path)}"))
                continue
            claim(dest)
            if os.path.lexists(dest):
                raise ToolFailure(f"Cannot move {path} to {dest}: the destination exists.")
            changes.append(_Change(dest, after, f"M {ctx.display(path)} -> {ctx.display(dest)}"))
            changes.append(_Change(path, None, f"D {ctx.display(path)}"))
    return changes


@dataclass
class _Backup:
    path: Path
    data: bytes | None  # None: the file did not exist
    mode: int = 0


def _commit(changes: list[_Change]) -> None:
    """Make every change; on the first failure put back what was already changed and raise ToolFailure."""
    done: list[_Backup] = []
    try:
        for change in changes:
            backup = _backup(change.path)
            if change.content is None:
                change.path.unlink()
            else:
                write_atomic(change.path, change.content)
            done.append(backup)
    except OSError as exc:
        problems = _restore(reversed(done))
        message = f"Could not apply the patch ({exc.strerror or exc}: {exc.filename or change.path})."
        if problems:
            raise ToolFailure(message + " Some changes could not be undone: " + "; ".join(problems)) from None
        raise ToolFailure(message + " No file was changed.") from None


def _backup(path: Path) -> _Backup:
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return _Backup(path, None)
    return _Backup(path, path.read_bytes(), stat.S_IMODE(info.st_mode))


def _restore(backups: Iterable[_Backup]) -> list[str]:
    problems = []
    for backup in backups:
        try:
            if backup.data is None:
                backup.path.unlink(missing_ok=True)
            else:
                write_atomic(backup.path, backup.data)
                os.chmod(backup.path, backup.mode)
        except OSError as exc:
            problems.append(f"{backup.path}: {exc.strerror or exc}")
    return problems
