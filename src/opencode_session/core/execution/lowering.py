"""Projected Session History lowered to the provider-neutral LLM messages of one request, and per session the last
lowering kept so a Step lowers only the entries that changed."""

from __future__ import annotations

import operator
from collections import OrderedDict
from dataclasses import dataclass, field
from itertools import compress, count

from ...schema import message_data as md
from ...schema.common import ModelRef
from ..attachments import needs_loading
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
from ..tools.output import settled_text

# The images a tool result may show a model (every provider's image input takes these), and the largest one sent
# (OpenCode's inline media limit); others stay the text note the tool wrote beside them.
TOOL_IMAGE_MIMES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
MAX_TOOL_IMAGE_BYTES = 5 * 1024 * 1024
TOOL_FILES_NOTE = "Attached image(s) from tool result:"


def _user_parts(message: md.SessionMessageUserData) -> list[TextPart | FilePart]:
    parts: list[TextPart | FilePart] = []
    if message.get("text"):
        parts.append(TextPart(message["text"]))
    for f in message.get("files") or ():
        parts.append(FilePart(uri=f["uri"], mime=f["mime"], name=f.get("name")))
    return parts or [TextPart("")]


def lower_message(message: md.SessionMessageData, current: ModelRef | None, images: bool = False) -> list[LLMMessage]:
    """One projected message as provider-neutral messages; native continuation metadata survives only for an
    error-free assistant of the same provider and model, otherwise reasoning becomes plain text. With `images` (the
    model accepts them) the images local tools returned go with their results."""
    if message["type"] == "user":
        return [UserMessage(_user_parts(message))]
    if message["type"] == "synthetic":
        return [UserMessage([TextPart(message["text"])])]
    if message["type"] == "system":
        return [SystemUpdate(message["text"])]
    if message["type"] == "shell":
        return [UserMessage([TextPart(f"Shell command: {message['command']}\n\n{message['output']}")])]
    if message["type"] == "assistant":
        return _assistant(message, current, images)
    if message["type"] == "compaction":
        return lower_compaction(message)
    return []  # agent/model switches are transcript facts, not model input


def _key(current: ModelRef | None, images: bool) -> tuple[str, ...]:
    base = ("lowered", current.providerID, current.id) if current is not None else ("lowered",)
    return (*base, "images") if images else base


def _lowered(entry: HistoryEntry, key: tuple[str, ...], current: ModelRef | None, images: bool) -> list[LLMMessage]:
    lowered = entry.derived.get(key)
    if lowered is None:
        lowered = entry.derived[key] = lower_message(entry.message, current, images)
    return lowered


@dataclass
class _Lowered:
    key: tuple[str, ...]
    entries: list[HistoryEntry]
    ends: list[int]  # ends[i]: how many messages entries[:i + 1] lower to
    messages: list[LLMMessage]
    unread: list[int]  # entries whose messages hold a local attachment still to be read
    loaded: dict[int, tuple[LLMMessage, LLMMessage]] = field(default_factory=dict)  # id: (message, as read)


class LoweredHistory:
    """Per session, the messages of the history it last lowered: a Step lowers, and looks for attachments to read
    in, only the entries after the first that is not the same object as last time (the history cache shares
    unchanged entries). Use it from one thread."""

    def __init__(self, max_sessions: int = 64) -> None:
        self.max_sessions = max_sessions
        self._sessions: OrderedDict[str, _Lowered] = OrderedDict()

    def lower(self, session_id: str, entries: list[HistoryEntry], current: ModelRef | None,
              images: bool = False) -> tuple[list[LLMMessage], bool]:
        """The request messages for `entries` (a list the caller may change), each entry's lowering reused for
        the same model, and whether `needs_loading` holds for them."""
        key = _key(current, images)
        state = self._sessions.pop(session_id, None)
        if state is None or state.key != key:
            state = _Lowered(key, [], [], [], [])
        seen = state.entries
        if all(map(operator.is_, entries, seen)):
            same = min(len(entries), len(seen))
        else:
            same = next(compress(count(), map(operator.is_not, entries, seen)))
        if same < len(seen):
            del state.entries[same:], state.ends[same:]
            del state.messages[state.ends[-1] if same else 0:]
            state.unread = [i for i in state.unread if i < same]
            state.loaded.clear()
        for index in range(same, len(entries)):
            lowered = _lowered(entries[index], key, current, images)
            state.entries.append(entries[index])
            state.messages.extend(lowered)
            state.ends.append(len(state.messages))
            if needs_loading(lowered):
                state.unread.append(index)
        self._sessions[session_id] = state
        while len(self._sessions) > self.max_sessions:
            self._sessions.popitem(last=False)
        return list(state.messages), bool(state.unread)

    def keep_loaded(self, session_id: str, messages: list[LLMMessage]) -> list[LLMMessage]:
        """`messages` (as `lower` gave them, attachments since read) with each message whose attachments read the
        same as at the previous Step replaced by the object read then, so it stays the same object Step after Step
        (and adapters reuse its wire form)."""
        state = self._sessions.get(session_id)
        if state is None:
            return messages
        for index in compress(count(), map(operator.is_not, messages, state.messages)):
            original = state.messages[index]
            before = state.loaded.get(id(original))
            if before is not None and before[0] is original and before[1] == messages[index]:
                messages[index] = before[1]
            else:
                state.loaded[id(original)] = (original, messages[index])
        return messages


def _tool_images(state: md.ToolStateCompletedData) -> tuple[FilePart, ...]:
    """The images among a completed call's content that a model may be shown."""
    found = []
    for part in state.get("content") or ():
        if part["type"] != "file":
            continue
        mime, uri = part.get("mime", "").lower(), part.get("uri", "")
        if mime in TOOL_IMAGE_MIMES and uri.startswith("data:") and len(uri) * 3 // 4 <= MAX_TOOL_IMAGE_BYTES:
            found.append(FilePart(uri=uri, mime=mime, name=part.get("name")))
    return tuple(found)


def _assistant(message: md.SessionMessageAssistantData, current: ModelRef | None,
               images: bool = False) -> list[LLMMessage]:
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
                files = _tool_images(state) if images else ()
                results.append(ToolResultMessage(part["id"], part["name"], settled_text(state), files=files))
            else:
                results.append(ToolResultMessage(part["id"], part["name"], state["error"]["message"], is_error=True))
    if not parts:
        return []
    shown = [file for result in results for file in result.files]
    trailer: list[LLMMessage] = [UserMessage([TextPart(TOOL_FILES_NOTE), *shown], tool_files=True)] if shown else []
    return [AssistantMessage(parts), *results, *trailer]
