"""What an MCP server's tools become for the model: their names (OpenCode's `SERVER_TOOL`, with every character
outside `[a-zA-Z0-9_-]` made `_`), their parameter schemas, and a `tools/call` result lowered to tool output (text,
images and audio as data URIs, embedded resources, resource links, structured content). Pure functions."""

from __future__ import annotations

import re
from typing import Any

from opencode_session.schema.message import ToolContent, ToolFileContent, ToolTextContent

from ..tools.tool import ToolOutput

_UNSAFE = re.compile(r"[^a-zA-Z0-9_-]")


def sanitize(name: str) -> str:
    return _UNSAFE.sub("_", name)


def tool_name(server: str, tool: str) -> str:
    """The name the model calls a server's tool by: `SERVER_TOOL`, as OpenCode names it."""
    return f"{sanitize(server)}_{sanitize(tool)}"


def parameters(input_schema: dict[str, Any] | None) -> dict[str, Any]:
    """The tool's input schema as the model is offered it: always an object with properties."""
    schema = dict(input_schema or {})
    schema["type"] = "object"
    schema.setdefault("properties", {})
    return schema


def _data_uri(mime: str, data: str) -> str:
    return f"data:{mime};base64,{data}"


def lower_resource(resource: Any) -> list[ToolContent]:
    """One resource's contents (`TextResourceContents` or `BlobResourceContents`) as tool output parts: its text, or
    a note and the bytes as a file (an image among them reaches a model that accepts images)."""
    uri, mime = str(resource.uri), resource.mime_type
    if getattr(resource, "text", None) is not None:
        return [ToolTextContent(text=f"Resource {uri}:\n{resource.text}")]
    mime = mime or "application/octet-stream"
    return [ToolTextContent(text=f"[resource {uri} ({mime}), about {len(resource.blob) * 3 // 4} bytes]"),
            ToolFileContent(uri=_data_uri(mime, resource.blob), mime=mime, name=uri)]


def lower_content(blocks: list[Any]) -> list[ToolContent]:
    """MCP content blocks (the SDK's models) as tool output parts."""
    parts: list[ToolContent] = []
    for block in blocks:
        kind = getattr(block, "type", None)
        if kind == "text":
            parts.append(ToolTextContent(text=block.text))
        elif kind in ("image", "audio"):
            mime = block.mime_type or "application/octet-stream"
            size = len(block.data) * 3 // 4
            parts.append(ToolTextContent(text=f"[{kind} {mime}, about {size} bytes]"))
            parts.append(ToolFileContent(uri=_data_uri(mime, block.data), mime=mime))
        elif kind == "resource":
            parts.extend(lower_resource(block.resource))
        elif kind == "resource_link":
            described = f": {block.description}" if getattr(block, "description", None) else ""
            parts.append(ToolTextContent(text=f"Resource link {block.uri} ({block.name}){described}"))
    return parts


def lower_result(result: Any, title: str) -> ToolOutput:
    """A successful `CallToolResult` as ToolOutput; its structured content is the output's structured value (the
    model reads that value's JSON when the result has no text)."""
    structured = result.structured_content if isinstance(result.structured_content, dict) else {}
    return ToolOutput(content=lower_content(list(result.content or [])), structured=dict(structured), title=title)


def error_text(result: Any) -> str:
    """What a result marked `isError` says, for the tool error the model reads."""
    texts = [part.text for part in lower_content(list(result.content or [])) if isinstance(part, ToolTextContent)]
    return "\n".join(texts) or "the tool reported an error without a message"


__all__ = ["error_text", "lower_content", "lower_resource", "lower_result", "parameters", "sanitize",
           "tool_name"]
