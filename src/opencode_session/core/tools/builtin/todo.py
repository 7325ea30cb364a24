"""The `todowrite` tool: the session's todo list, replaced whole by each call, kept in the call's result and
published live as `todo.updated`."""

from __future__ import annotations

from pydantic import BaseModel, Field

from opencode_session.schema.events import Todo, TodoUpdated

from ..arguments import Arguments, schema_of
from ..tool import ToolContext, ToolOutput

_MARKS = {"completed": "[x]", "in_progress": "[~]", "cancelled": "[-]"}


class TodoItem(Arguments):
    content: str = Field(description="What the task is, briefly")
    status: str = Field(description="pending, in_progress, completed or cancelled")
    priority: str = Field(description="high, medium or low")


class TodoWriteArguments(BaseModel):
    todos: list[TodoItem] = Field(description="The complete, updated todo list")


class TodoWriteTool:
    name = "todowrite"
    changes_files = False
    description = (
        "Write the session's todo list, replacing the previous one. Use it to plan and track multi-step work.\n"
        "\n"
        "- Send the whole list every time, with each item's `content`, `status` (pending, in_progress, completed or"
        " cancelled) and `priority` (high, medium or low).\n"
        "- Keep one item in_progress at a time and mark items completed as soon as they are done."
    )
    arguments = TodoWriteArguments
    parameters = schema_of(TodoWriteArguments)

    async def execute(self, args: TodoWriteArguments, ctx: ToolContext) -> ToolOutput:
        todos = [t.model_dump() for t in args.todos]
        await ctx.permit("todowrite", ["*"])
        if ctx.publish_live is not None:  # clients following the instance stream see the new list at once
            ctx.publish_live(TodoUpdated(sessionID=ctx.session_id, todos=[Todo(**t) for t in todos]))
        open_items = sum(1 for t in todos if t["status"] not in ("completed", "cancelled"))
        lines = [f"{_MARKS.get(t['status'], '[ ]')} {t['content']} ({t['priority']})" for t in todos]
        text = "\n".join(lines) if lines else "(The todo list is empty.)"
        return ToolOutput.of_text(text, {"todos": todos}, title=f"{open_items} todos")
