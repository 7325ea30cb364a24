"""OpenAI Chat Completions adapter (OpenAI and every OpenAI-compatible server): lowers an `LLMRequest` to the wire
once, as plain JSON, streams one call through the official SDK, and turns chunks into provider-neutral events."""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx2
import openai
from openai.types.chat import ChatCompletion

from ...compat import pin_sdk_headers
from .errors import InvalidProviderOutputError, TransportError
from .model import (
    AssistantMessage,
    FilePart,
    Finish,
    FinishReason,
    GenerationControls,
    LLMMessage,
    LLMRequest,
    ReasoningPart,
    StreamEvent,
    SystemUpdate,
    TextPart,
    ToolCallPart,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from .sdk_failures import SDKErrors
from .toolcalls import ToolCallAccumulator
from .wire import (
    DEFAULT_TIMEOUT,
    Blocks,
    SDKAdapter,
    WireHistory,
    data_url,
    field_of,
    file_label,
    int_of,
    is_remote,
    is_text_mime,
    lower_file,
    lower_history,
    text_file,
    unshowable,
    with_compat_fields,
    wrap_system_update,
)

# The SDK refuses to build a client without some key; keyless servers (Ollama, llama.cpp) get this
# placeholder and the Authorization header is then removed from every request.
KEYLESS_PLACEHOLDER = "keyless"
OPENAI_SDK = SDKErrors.of(openai, "OpenAIError")

_FINISH_REASONS: dict[str, FinishReason] = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool-calls",
    "function_call": "tool-calls",
    "content_filter": "content-filter",
}


@dataclass(frozen=True)
class ChatQuirks:
    """Where servers that speak Chat Completions differ, as data: OpenAI's reasoning models reject `max_tokens`
    while most compatible servers know only it, and compatible servers may reject fields they do not know."""

    max_tokens_field: str = "max_tokens"
    prompt_cache_key: bool = False
    reasoning_effort: bool = False


COMPATIBLE = ChatQuirks()
HOST_QUIRKS: dict[str, ChatQuirks] = {
    "api.openai.com": ChatQuirks(max_tokens_field="max_completion_tokens", prompt_cache_key=True,
                                 reasoning_effort=True),
}


def quirks_for(base_url: str) -> ChatQuirks:
    host = (urllib.parse.urlsplit(base_url).hostname or "").lower()
    return HOST_QUIRKS.get(host, COMPATIBLE)


# ---------------------------------------------------------------------------------------------
# Lowering: provider-neutral request -> Chat Completions body.


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _lower_file_unchecked(part: FilePart) -> dict[str, Any]:
    mime = part.mime.lower()
    if mime.startswith("image/"):
        return {"type": "image_url", "image_url": {"url": part.uri if is_remote(part) else data_url(part)}}
    if is_text_mime(mime):
        return _text(text_file(part))
    if mime == "application/pdf" and not is_remote(part):
        return {"type": "file", "file": {"filename": file_label(part), "file_data": data_url(part)}}
    # Chat Completions has no generic attachment type; tell the model the file exists rather than drop it.
    return _text(unshowable(part))


def _lower_user(message: UserMessage) -> dict[str, Any]:
    parts = [_text(p.text) if isinstance(p, TextPart) else lower_file(p, _lower_file_unchecked, _text)
             for p in message.parts]
    if all(p["type"] == "text" for p in parts):
        # Plain string content is the most widely accepted shape among compatible servers.
        return {"role": "user", "content": "\n".join(p["text"] for p in parts)}
    return {"role": "user", "content": parts}


def _lower_assistant(message: AssistantMessage) -> dict[str, Any] | None:
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, (TextPart, ReasoningPart)):
            # Reasoning has no replay slot in Chat Completions; it survives as plain assistant text.
            if part.text:
                texts.append(part.text)
        elif isinstance(part, ToolCallPart):
            calls.append(
                {
                    "id": part.call_id,
                    "type": "function",
                    "function": {"name": part.name, "arguments": json.dumps(part.input, ensure_ascii=False)},
                }
            )
    if not texts and not calls:
        return None  # several servers reject an assistant message with neither content nor calls
    lowered: dict[str, Any] = {"role": "assistant", "content": "\n".join(texts) if texts else None}
    if calls:
        lowered["tool_calls"] = calls
    return lowered


def _append_user_text(previous: dict[str, Any], text: str) -> None:
    content = previous["content"]
    if isinstance(content, str):
        previous["content"] = content + "\n" + text if content else text
    else:
        previous["content"] = [*content, _text(text)]


def _add_message(out: list[dict[str, Any]], message: LLMMessage) -> None:
    """One history message onto the messages so far: an Instruction Update joins a user message just before it."""
    if isinstance(message, SystemUpdate):
        wrapped = wrap_system_update(message.text)
        if out and out[-1]["role"] == "user":
            _append_user_text(out[-1], wrapped)
        else:
            out.append({"role": "user", "content": wrapped})
    elif isinstance(message, UserMessage):
        out.append(_lower_user(message))
    elif isinstance(message, AssistantMessage):
        lowered = _lower_assistant(message)
        if lowered is not None:
            out.append(lowered)
    elif isinstance(message, ToolResultMessage):
        out.append({"role": "tool", "tool_call_id": message.call_id, "content": message.text})
    else:  # pragma: no cover - guarded by the type union
        raise TypeError(f"unknown message type {type(message).__name__}")


def _system(request: LLMRequest) -> list[dict[str, Any]]:
    system = [s for s in request.system if s]
    # One system message: several chat templates (llama.cpp, vLLM) reject a second one.
    return [{"role": "system", "content": "\n\n".join(system)}] if system else []


def lower_messages(request: LLMRequest) -> list[dict[str, Any]]:
    """The Chat Completions `messages` array for a request (pure: attachments arrive loaded)."""
    return _system(request) + lower_history(request.messages, _add_message)


def _controls(controls: GenerationControls, quirks: ChatQuirks) -> dict[str, Any]:
    fields = {
        "temperature": controls.temperature,
        "top_p": controls.top_p,
        "top_k": controls.top_k,
        "seed": controls.seed,
        "stop": list(controls.stop) if controls.stop else None,
        "frequency_penalty": controls.frequency_penalty,
        "presence_penalty": controls.presence_penalty,
        quirks.max_tokens_field: controls.max_output_tokens,
    }
    return {k: v for k, v in fields.items() if v is not None}


# Model Request Options this protocol encodes (AI SDK names -> Chat Completions fields)
_OPTION_FIELDS = {
    "reasoningEffort": "reasoning_effort",
    "textVerbosity": "verbosity",
    "parallelToolCalls": "parallel_tool_calls",
    "serviceTier": "service_tier",
    "user": "user",
    "store": "store",
    "promptCacheKey": "prompt_cache_key",
}


def build_body(request: LLMRequest, *, quirks: ChatQuirks = COMPATIBLE,
               history: list[Any] | None = None) -> dict[str, Any]:
    """The streaming Chat Completions request body, with usage reporting; `history` stands for the lowered
    `request.messages` when given."""
    body: dict[str, Any] = {
        "model": request.model.wire_model,
        "messages": _system(request) + (lower_history(request.messages, _add_message) if history is None else history),
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if request.tools:
        body["tools"] = [
            {
                "type": "function",
                "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
            }
            for t in request.tools
        ]
        if request.tool_choice == "none":
            body["tool_choice"] = "none"
    body.update(_controls(request.controls, quirks))
    if request.prompt_cache_key is not None and quirks.prompt_cache_key:
        body["prompt_cache_key"] = request.prompt_cache_key
    for option, wire_field in _OPTION_FIELDS.items():
        if option in request.options:
            body[wire_field] = request.options[option]
    return with_compat_fields(body, request.model.body)


# ---------------------------------------------------------------------------------------------
# Streaming: chunks -> provider-neutral events.


def usage_from_chunk(raw: Any) -> Usage:
    prompt = int_of(field_of(raw, "prompt_tokens"))
    completion = int_of(field_of(raw, "completion_tokens"))
    prompt_details = field_of(raw, "prompt_tokens_details")
    completion_details = field_of(raw, "completion_tokens_details")
    cache_read = int_of(field_of(prompt_details, "cached_tokens"))
    cache_write = int_of(field_of(prompt_details, "cache_write_tokens"))
    reasoning = int_of(field_of(completion_details, "reasoning_tokens"))
    return Usage(
        input=max(0, prompt - cache_read - cache_write),
        output=max(0, completion - reasoning),
        reasoning=reasoning,
        cache_read=cache_read,
        cache_write=cache_write,
    )


class ChatStreamDecoder:
    """Stateful translation of Chat Completions chunks into stream events for one call. Only one text or reasoning
    block is open at a time; tool calls are completed when the choice finishes."""

    def __init__(self) -> None:
        self._blocks = Blocks()
        self._count = 0
        self._tools = ToolCallAccumulator()
        self._slot_for_index: dict[Any, int] = {}
        self._slots = 0
        self._id_from_provider: set[int] = set()
        self.finish_reason: str | None = None
        self.usage: Usage | None = None

    def _delta(self, kind: str, text: str, out: list[StreamEvent]) -> None:
        open_block = self._blocks.open_block
        if open_block is None or open_block[0] != kind:
            block_id = f"{kind}-{self._count}"
            self._count += 1
        else:
            block_id = open_block[1]
        out += self._blocks.delta(kind, block_id, text)

    def _tool_delta(self, index: Any, call_id: Any, name: Any, arguments: Any, out: list[StreamEvent]) -> None:
        call_id = call_id if isinstance(call_id, str) and call_id else None
        slot = self._slot_for_index.get(index)
        pending = self._tools.get(slot) if slot is not None else None
        # Some compatible servers reuse index 0 for every parallel call; a different id means a new call.
        reused = (pending is not None and call_id is not None and slot in self._id_from_provider
                  and call_id != pending.call_id)
        out += self._blocks.close()
        if pending is None or slot is None or pending.ended or reused:
            slot = self._slots
            self._slots += 1
            self._slot_for_index[index] = slot
            self._tools.start(slot, call_id or f"call_{slot}")
            if call_id is not None:
                self._id_from_provider.add(slot)
            pending = self._tools.get(slot)
            assert pending is not None
        elif call_id is not None and not pending.started and slot not in self._id_from_provider:
            pending.call_id = call_id
            self._id_from_provider.add(slot)
        if isinstance(name, str) and name:
            out += self._tools.name(slot, name)
        if isinstance(arguments, str) and arguments:
            out += self._tools.append(slot, arguments)

    def feed(self, chunk: Any) -> list[StreamEvent]:
        out: list[StreamEvent] = []
        usage = field_of(chunk, "usage")
        if usage is not None:
            self.usage = usage_from_chunk(usage)
        choices = field_of(chunk, "choices")
        if choices is None:
            choices = []
        if not isinstance(choices, list):
            raise InvalidProviderOutputError("The provider sent a stream chunk whose choices are not a list")
        for choice in choices:
            index = field_of(choice, "index")
            if index not in (None, 0):
                continue  # n=1 is always requested; other choices would be a server quirk
            delta = field_of(choice, "delta")
            if delta is not None and self.finish_reason is None:
                self._feed_delta(delta, out)
            reason = field_of(choice, "finish_reason")
            if isinstance(reason, str) and reason and self.finish_reason is None:
                self.finish_reason = reason
                out += self._blocks.close()
                out += self._tools.finish_all()
        return out

    def _feed_delta(self, delta: Any, out: list[StreamEvent]) -> None:
        reasoning = field_of(delta, "reasoning_content")
        if not (isinstance(reasoning, str) and reasoning):
            # Servers that send both fields send the same text twice; only one is used.
            reasoning = field_of(delta, "reasoning")
        if isinstance(reasoning, str) and reasoning:
            self._delta("reasoning", reasoning, out)
        for key in ("content", "refusal"):
            text = field_of(delta, key)
            if isinstance(text, str) and text:
                self._delta("text", text, out)
        tool_calls = field_of(delta, "tool_calls")
        if isinstance(tool_calls, list):
            for position, call in enumerate(tool_calls):
                index = field_of(call, "index")
                function = field_of(call, "function")
                self._tool_delta(
                    index if index is not None else position,
                    field_of(call, "id"),
                    field_of(function, "name"),
                    field_of(function, "arguments"),
                    out,
                )
        legacy = field_of(delta, "function_call")
        if legacy is not None:
            self._tool_delta("function_call", None, field_of(legacy, "name"), field_of(legacy, "arguments"), out)

    def end(self) -> list[StreamEvent]:
        """Events after the last chunk. A stream that never finished its choice was cut off."""
        if self.finish_reason is None:
            raise TransportError("The provider stream ended before the response was finished")
        reason = _FINISH_REASONS.get(self.finish_reason, "other")
        if reason == "stop" and self._tools.any_started:
            # Some compatible servers (older Ollama, llama.cpp) report "stop" alongside tool calls.
            reason = "tool-calls"
        return [Finish(reason, self.usage or Usage())]


# ---------------------------------------------------------------------------------------------
# The provider.


def sdk_client(cls: Any, base_url: str, api_key: str | None, headers: Mapping[str, str] | None,
               timeout: float | httpx2.Timeout | None, http_client: httpx2.AsyncClient | None) -> Any:
    """An OpenAI SDK client that sends only what the provider entry names: the SDK also reads OPENAI_ORG_ID,
    OPENAI_PROJECT_ID, OPENAI_ADMIN_KEY and OPENAI_CUSTOM_HEADERS (whose Authorization even replaces the key) whatever
    server it talks to. (A test against a loopback server pins this for the SDK version in the lock file.)"""
    user_headers = dict(headers or {})
    client = cls(
        base_url=base_url,
        api_key=api_key or KEYLESS_PLACEHOLDER,
        default_headers=user_headers or None,
        timeout=timeout,
        max_retries=0,  # the runtime owns retries: each retry is its own Step
        http_client=http_client,
    )
    client.organization = None
    client.project = None
    client.admin_api_key = None
    pin_sdk_headers(client, user_headers)
    return client


def keyless(api_key: str | None, headers: Mapping[str, str] | None) -> bool:
    return not api_key and not any(k.lower() == "authorization" for k in (headers or {}))


class OpenAIChatProvider(SDKAdapter):
    """Chat Completions over one SDK client (per base URL, key and headers)."""

    path = "/chat/completions"
    cast_to = ChatCompletion
    stream_cls = openai.AsyncStream[object]  # items as the JSON they arrived in: see SDKAdapter
    sdk = OPENAI_SDK
    omit = openai.Omit

    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        headers: Mapping[str, str] | None = None,
        timeout: float | httpx2.Timeout | None = DEFAULT_TIMEOUT,
        http_client: httpx2.AsyncClient | None = None,
    ) -> None:
        base_url = base_url.rstrip("/")
        super().__init__(base_url, sdk_client(openai.AsyncOpenAI, base_url, api_key, headers, timeout, http_client),
                         keyless_header="Authorization" if keyless(api_key, headers) else None,
                         owns_http=http_client is None)
        self._quirks = quirks_for(self.base_url)
        self._history = WireHistory(_add_message)

    def build_body(self, request: LLMRequest) -> dict[str, Any]:
        return build_body(request, quirks=self._quirks)

    def encode_request(self, request: LLMRequest) -> bytes:
        return self._history.encode(request, lambda history: build_body(request, quirks=self._quirks,
                                                                         history=history))

    def decoder(self) -> ChatStreamDecoder:
        return ChatStreamDecoder()


__all__ = [
    "COMPATIBLE",
    "ChatQuirks",
    "ChatStreamDecoder",
    "DEFAULT_TIMEOUT",
    "HOST_QUIRKS",
    "KEYLESS_PLACEHOLDER",
    "OPENAI_SDK",
    "OpenAIChatProvider",
    "build_body",
    "keyless",
    "lower_messages",
    "quirks_for",
    "sdk_client",
    "usage_from_chunk",
    "wrap_system_update",
]
