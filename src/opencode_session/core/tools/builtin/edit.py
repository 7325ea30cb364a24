"""The `edit` tool: replaces exact text in one file; text that is absent or ambiguous changes nothing."""

from __future__ import annotations

import difflib
from pathlib import Path

import anyio.to_thread
from pydantic import BaseModel, Field

from ..arguments import schema_of
from ..files import changing, read_text, write_atomic
from ..tool import ToolContext, ToolFailure, ToolOutput

MAX_DIFF_CHARS = 16 * 1024
MAX_DIFF_INPUT_CHARS = 256 * 1024

DESCRIPTION = (
    "Replace exact text in a file.\n"
    "\n"
    "- `oldString` must appear in the file exactly as given (whitespace and indentation included). Read the file"
    " first.\n"
    "- If it appears more than once, add surrounding lines to make it unique, or set `replaceAll` to replace every"
    " occurrence.\n"
    "- An empty `oldString` writes `newString` as the whole file (creating it).\n"
    "- When the edit fails, the file is left unchanged."
)


class EditArguments(BaseModel):
    path: str = Field(min_length=1, description="Path of the file to change")
    oldString: str = Field(description="The exact text to replace")  # noqa: N815 - OpenCode's argument names
    newString: str = Field(description="The text to put in its place")  # noqa: N815
    replaceAll: bool = Field(False, description="Replace every occurrence (default false)")  # noqa: N815


class EditTool:
    name = "edit"
    description = DESCRIPTION
    arguments = EditArguments
    parameters = schema_of(EditArguments)

    async def execute(self, args: EditArguments, ctx: ToolContext) -> ToolOutput:
        old, new, replace_all = args.oldString, args.newString, args.replaceAll
        if old == new:
            raise ToolFailure("oldString and newString are identical; there is nothing to change.")
        path = await ctx.permit_path("edit", args.path)
        ctx.refuse_unreadable(path)

        def edit() -> tuple[int, str]:
            before = "" if old == "" and not path.exists() else read_text(path)
            after, count = replace(before, old, new, replace_all, path)
            try:
                write_atomic(path, after)
            except OSError as exc:
                raise ToolFailure(f"Cannot write {path}: {exc.strerror or exc}") from None
            return count, _diff(path, before, after)

        async with changing(path):
            count, diff = await anyio.to_thread.run_sync(edit)
        noun = "occurrence" if count == 1 else "occurrences"
        return ToolOutput.of_text(f"Edited {path}: replaced {count} {noun}.",
                                  {"path": str(path), "replacements": count, "diff": diff}, title=ctx.display(path))


def replace(text: str, old: str, new: str, replace_all: bool, path: Path) -> tuple[str, int]:
    """`text` with `old` replaced by `new`, and how many were replaced; ToolFailure when `old` is absent or, without
    `replace_all`, ambiguous. A file with CRLF line endings also matches `old` written with LF."""
    if old == "":
        return new, 1
    count = text.count(old)
    if count == 0 and "\r\n" in text and "\n" in old and "\r\n" not in old:
        old, new = old.replace("\n", "\r\n"), new.replace("\n", "\r\n")
        count = text.count(old)
    if count == 0:
        raise ToolFailure(f"oldString was not found in {path}. Read the file and copy the text exactly, including "
                          "whitespace and indentation.")
    if count > 1 and not replace_all:
        raise ToolFailure(f"oldString appears {count} times in {path}. Include more surrounding lines so it is "
                          "unique, or set replaceAll to replace every occurrence.")
    return text.replace(old, new), count


def _diff(path: Path, before: str, after: str) -> str:
    """A unified diff for clients to show; omitted when large, since the structured result is not bounded (and
    diffing a big file costs more than the edit)."""
    if len(before) > MAX_DIFF_INPUT_CHARS:
        return ""
    diff = "".join(difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True),
                                        fromfile=str(path), tofile=str(path)))
    return diff if len(diff) <= MAX_DIFF_CHARS else ""
