"""The example plugin: `plugin` is what the entry point names; `setup` says what it contributes."""

from __future__ import annotations

import json
import os
import re
from typing import Annotated, Any

import anyio
from pydantic import Field

from opencode_session.sdk import (
    EventRecord,
    InstructionRequest,
    Plugin,
    PluginRegistry,
    ProviderRequest,
    ToolContext,
    ToolOutput,
    ToolResult,
    ToolTextContent,
)

AUDIT_ENV = "OCS_EXAMPLE_AUDIT"
REDACTED = "[redacted]"
# what an OpenAI- or Anthropic-style API key looks like
KEY = re.compile(r"\bsk-[A-Za-z0-9_-]{16,}")


async def count_words(ctx: ToolContext,
                      path: Annotated[str, Field(description="The file, relative to the project.")]) -> ToolOutput:
    """Count the lines, words and characters of a text file in the project."""
    file = await ctx.permit_path("read", path)  # resolved in the Location, asking where rules say
    text = await anyio.to_thread.run_sync(lambda: file.read_text(encoding="utf-8", errors="replace"))
    counts = {"lines": len(text.splitlines()), "words": len(text.split()), "characters": len(text)}
    return ToolOutput.of_text(f"{ctx.display(file)}: {counts['lines']} lines, {counts['words']} words,"
                              f" {counts['characters']} characters", structured=counts, title=ctx.display(file))


def guidance(asked: InstructionRequest) -> str:
    return ("To count the words, lines or characters of a file, call the count_words tool instead of running wc"
            " in the shell.")


def redact(result: ToolResult) -> ToolOutput | None:
    """Every tool's text output with what looks like an API key cut out; None (unchanged) when there is none."""
    content = result.output.content
    if not any(isinstance(part, ToolTextContent) and KEY.search(part.text) for part in content):
        return None
    cleaned = [ToolTextContent(text=KEY.sub(REDACTED, part.text)) if isinstance(part, ToolTextContent) else part
               for part in content]
    return ToolOutput(content=cleaned, structured=result.output.structured, title=result.output.title)


def _audit(entry: dict[str, Any]) -> None:
    target = os.environ.get(AUDIT_ENV)
    if target:
        with open(target, "a", encoding="utf-8") as audit:
            audit.write(json.dumps(entry) + "\n")


def audit_request(hooked: ProviderRequest) -> None:
    _audit({"request": f"{hooked.provider_id}/{hooked.model_id}", "session": hooked.session_id,
            "tools": [tool.name for tool in hooked.request.tools]})


def audit_event(record: EventRecord) -> None:
    _audit({"event": record.type, "session": record.aggregate_id, "seq": record.seq})


def setup(registry: PluginRegistry) -> None:
    registry.tool(count_words, changes_files=False)  # a typed function: its signature is the schema
    registry.instructions("count-words", guidance)
    registry.after_tool_result(redact)
    registry.before_request(audit_request)
    registry.on_event(audit_event)


plugin = Plugin(name="example", setup=setup, description="count_words, its guidance, key redaction and an audit log")
