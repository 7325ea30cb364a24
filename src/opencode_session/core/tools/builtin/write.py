"""The `write` tool: creates or replaces one file with the given text, atomically."""

from __future__ import annotations

import anyio.to_thread
from pydantic import BaseModel, Field

from ..arguments import schema_of
from ..files import changing, write_atomic
from ..tool import ToolContext, ToolFailure, ToolOutput


class WriteArguments(BaseModel):
    path: str = Field(min_length=1, description="Path of the file to write")
    content: str = Field(description="The complete new content of the file")


class WriteTool:
    name = "write"
    description = (
        "Create a file or replace its whole content.\n"
        "\n"
        "- path may be absolute or relative to the session's working directory; missing directories are created.\n"
        "- The file ends up holding exactly `content`. To change part of an existing file, prefer `edit`.\n"
        "- An existing file keeps its permissions."
    )
    arguments = WriteArguments
    parameters = schema_of(WriteArguments)

    async def execute(self, args: WriteArguments, ctx: ToolContext) -> ToolOutput:
        path = await ctx.permit_path("edit", args.path)
        content = args.content

        def write() -> bool:
            if path.is_dir():
                raise ToolFailure(f"{path} is a directory; give a file path")
            existed = path.exists()
            try:
                write_atomic(path, content)
            except OSError as exc:
                raise ToolFailure(f"Cannot write {path}: {exc.strerror or exc}") from None
            return existed

        async with changing(path):
            existed = await anyio.to_thread.run_sync(write)
        verb = "Replaced" if existed else "Created"
        return ToolOutput.of_text(f"{verb} {path} ({len(content.encode('utf-8'))} bytes).",
                                  {"path": str(path), "created": not existed}, title=ctx.display(path))
