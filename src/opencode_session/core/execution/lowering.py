"""Projected Session History lowered to the provider-neutral LLM messages of one request (pure)."""

from __future__ import annotations

from typing import Any

from ...schema.common import ModelRef
from ..llm.model import (
    AssistantMessage,
    FilePart,
    LLMMessage,
    ReasoningPart,
    SystemUpdate,
    TextPart,
    ToolCallPart,
    ToolResultMessage,
    UserMessage,
)


def _user_parts(message: dict[str, Any]) -> list[TextPart | FilePart]:
    parts: list[TextPart | FilePart] = []
    if message.get("text"):
        parts.append(TextPart(message["text"]))
    for f in message.get("files") or ():
        parts.append(FilePart(uri=f["uri"], mime=f["mime"], name=f.get("name")))
    return parts or [TextPart("")]


def _tool_result_text(state: dict[str, Any]) -> str:
    texts = [c["text"] for c in state.get("content", ()) if c.get("type") == "text"]
    return "\n".join(texts)


def to_llm_messages(history: list[dict[str, Any]], current: ModelRef | None) -> list[LLMMessage]:
    """Lower history; native continuation metadata survives only for an error-free assistant of the same
    provider and model, otherwise reasoning becomes plain text."""
    out: list[LLMMessage] = []
    for message in history:
        kind = message["type"]
        if kind == "user":
            out.append(UserMessage(_user_parts(message)))
        elif kind == "synthetic":
            out.append(UserMessage([TextPart(message["text"])]))
        elif kind == "system":
            out.append(SystemUpdate(message["text"]))
        elif kind == "shell":
            out.append(UserMessage([TextPart(f"Shell command: {message['command']}\n\n{message['output']}")]))
        elif kind == "assistant":
            out.extend(_assistant(message, current))
    return out


def _assistant(message: dict[str, Any], current: ModelRef | None) -> list[LLMMessage]:
    model = message.get("model") or {}
    native = (current is not None and not message.get("error") and model.get("id") == current.id
              and model.get("providerID") == current.providerID)
    parts: list[TextPart | ReasoningPart | ToolCallPart] = []
    results: list[ToolResultMessage] = []
    for part in message.get("content", ()):
        if part["type"] == "text":
            if part["text"]:
                parts.append(TextPart(part["text"]))
        elif part["type"] == "reasoning":
            if native:
                parts.append(ReasoningPart(part["text"], part.get("providerMetadata")))
            elif part["text"]:
                parts.append(TextPart(part["text"]))
        elif part["type"] == "tool":
            state = part["state"]
            if state["status"] not in ("completed", "error"):
                continue  # never settled: nothing the provider could pair with a result
            parts.append(ToolCallPart(part["id"], part["name"], state.get("input") or {}))
            if state["status"] == "completed":
                results.append(ToolResultMessage(part["id"], part["name"], _tool_result_text(state)))
            else:
                results.append(ToolResultMessage(part["id"], part["name"], state["error"]["message"], is_error=True))
    if not parts:
        return []
    return [AssistantMessage(parts), *results]
