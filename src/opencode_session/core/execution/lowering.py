"""Projected Session History lowered to the provider-neutral LLM messages of one request (pure)."""

from __future__ import annotations

from ...schema import message_data as md
from ...schema.common import ModelRef
from ..compaction.render import lower_compaction
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
from ..session.history import HistoryEntry


def _user_parts(message: md.SessionMessageUserData) -> list[TextPart | FilePart]:
    parts: list[TextPart | FilePart] = []
    if message.get("text"):
        parts.append(TextPart(message["text"]))
    for f in message.get("files") or ():
        parts.append(FilePart(uri=f["uri"], mime=f["mime"], name=f.get("name")))
    return parts or [TextPart("")]


def _tool_result_text(state: md.ToolStateCompletedData) -> str:
    return "\n".join(c["text"] for c in state.get("content", ()) if c["type"] == "text")


def lower_message(message: md.SessionMessageData, current: ModelRef | None) -> list[LLMMessage]:
    """One projected message as provider-neutral messages; native continuation metadata survives only for an
    error-free assistant of the same provider and model, otherwise reasoning becomes plain text."""
    if message["type"] == "user":
        return [UserMessage(_user_parts(message))]
    if message["type"] == "synthetic":
        return [UserMessage([TextPart(message["text"])])]
    if message["type"] == "system":
        return [SystemUpdate(message["text"])]
    if message["type"] == "shell":
        return [UserMessage([TextPart(f"Shell command: {message['command']}\n\n{message['output']}")])]
    if message["type"] == "assistant":
        return _assistant(message, current)
    if message["type"] == "compaction":
        return lower_compaction(message)
    return []  # agent/model switches are transcript facts, not model input


def lower_entries(entries: list[HistoryEntry], current: ModelRef | None) -> list[LLMMessage]:
    """The request messages for cached history entries, reusing each entry's lowering for the same model."""
    key = ("lowered", current.providerID, current.id) if current is not None else ("lowered",)
    out: list[LLMMessage] = []
    for entry in entries:
        lowered = entry.derived.get(key)
        if lowered is None:
            lowered = entry.derived[key] = lower_message(entry.message, current)
        out.extend(lowered)
    return out


def _assistant(message: md.SessionMessageAssistantData, current: ModelRef | None) -> list[LLMMessage]:
    model = message["model"]
    native = (current is not None and not message.get("error") and model["id"] == current.id
              and model["providerID"] == current.providerID)
    parts: list[TextPart | ReasoningPart | ToolCallPart] = []
    results: list[ToolResultMessage] = []
    for part in message["content"]:
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
            if state["status"] == "streaming" or state["status"] == "running":
                continue  # never settled: nothing the provider could pair with a result
            provider = part.get("provider")
            hosted = bool(provider and provider["executed"])
            metadata = provider.get("metadata") if provider is not None and native else None
            if hosted:
                # the provider ran it: call and result stay inline, and only its own model can read them natively
                if native and provider is not None and state["status"] == "completed":
                    replay = provider.get("resultMetadata") or metadata
                    parts.append(ToolCallPart(part["id"], part["name"], state.get("input") or {}, replay,
                                              provider_executed=True, result=state.get("result")))
                continue
            parts.append(ToolCallPart(part["id"], part["name"], state.get("input") or {}, metadata))
            if state["status"] == "completed":
                results.append(ToolResultMessage(part["id"], part["name"], _tool_result_text(state)))
            else:
                results.append(ToolResultMessage(part["id"], part["name"], state["error"]["message"], is_error=True))
    if not parts:
        return []
    return [AssistantMessage(parts), *results]
