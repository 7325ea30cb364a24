"""Anthropic Messages API adapter: lowers an `LLMRequest` once, as plain JSON (a prompt-cache breakpoint after the
stable system prefix, thinking replayed with its signature), streams one call through the official SDK and turns
content blocks into provider-neutral events."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import anthropic
import httpx2
from anthropic.types import Message

from ...compat import pin_sdk_headers, sdk_custom_headers
from .errors import TransportError
from .model import (
    AssistantMessage,
    FilePart,
    Finish,
    FinishReason,
    LLMMessage,
    LLMRequest,
    ReasoningPart,
    StreamEvent,
    SystemUpdate,
    TextPart,
    ToolCallPart,
    ToolResult,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from .openai_chat import KEYLESS_PLACEHOLDER, keyless
from .sdk_failures import SDKErrors
from .toolcalls import ToolCallAccumulator
from .wire import (
    DEFAULT_TIMEOUT,
    Blocks,
    SDKAdapter,
    WireHistory,
    base64_of,
    field_of,
    int_of,
    is_remote,
    is_text_mime,
    lower_file,
    lower_history,
    plain_data,
    text_file,
    unshowable,
    with_compat_fields,
    wrap_system_update,
)

ANTHROPIC_SDK = SDKErrors.of(anthropic, "AnthropicError")
METADATA_KEY = "anthropic"
# The Messages API requires max_tokens; this is sent when neither the model nor the agent names a limit.
DEFAULT_MAX_TOKENS = 4096
CACHE_BREAKPOINT = {"type": "ephemeral"}

_STOP_REASONS: dict[str, FinishReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool-calls",
    "refusal": "content-filter",
}


# ---------------------------------------------------------------------------------------------
# Lowering.


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _lower_file_unchecked(part: FilePart) -> dict[str, Any]:
    mime = part.mime.lower()
    if mime.startswith("image/") or mime == "application/pdf":
        source = ({"type": "url", "url": part.uri} if is_remote(part)
                  else {"type": "base64", "media_type": part.mime, "data": base64_of(part)})
        return {"type": "image" if mime.startswith("image/") else "document", "source": source}
    if is_text_mime(mime):
        return _text(text_file(part))
    return _text(unshowable(part))


def _native(metadata: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    own = (metadata or {}).get(METADATA_KEY)
    return own if isinstance(own, Mapping) else None


def _assistant_blocks(message: AssistantMessage) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, TextPart):
            if part.text:
                blocks.append(_text(part.text))
        elif isinstance(part, ReasoningPart):
            native = _native(part.metadata)
            if native is not None and native.get("redactedData"):
                blocks.append({"type": "redacted_thinking", "data": native["redactedData"]})
            elif native is not None and native.get("signature"):
                blocks.append({"type": "thinking", "thinking": part.text, "signature": native["signature"]})
            elif part.text:
                blocks.append(_text(part.text))
        elif isinstance(part, ToolCallPart):
            native = _native(part.metadata)
            if part.provider_executed:
                # a hosted call replays (call and result inline) only to the model that ran it
                if native is not None and native.get("resultType"):
                    blocks.append({"type": "server_tool_use", "id": part.call_id, "name": part.name,
                                   "input": part.input})
                    blocks.append({"type": native["resultType"], "tool_use_id": part.call_id,
                                   "content": part.result})
                continue
            blocks.append({"type": "tool_use", "id": part.call_id, "name": part.name, "input": part.input})
    return blocks


def _user(out: list[dict[str, Any]], blocks: list[dict[str, Any]]) -> None:
    if out and out[-1]["role"] == "user":
        out[-1]["content"].extend(blocks)
    else:
        out.append({"role": "user", "content": blocks})


def _add_message(out: list[dict[str, Any]], message: LLMMessage) -> None:
    """One history message onto the turns so far: consecutive user content (tool results, updates, prompts) shares
    one user turn, tool results first."""
    if isinstance(message, SystemUpdate):
        _user(out, [_text(wrap_system_update(message.text))])
    elif isinstance(message, UserMessage):
        if message.tool_files:
            return  # the tool results before it carry their images themselves
        _user(out, [_text(p.text) if isinstance(p, TextPart) else lower_file(p, _lower_file_unchecked, _text)
                    for p in message.parts if not isinstance(p, TextPart) or p.text])
    elif isinstance(message, AssistantMessage):
        blocks = _assistant_blocks(message)
        if blocks:
            out.append({"role": "assistant", "content": blocks})
    elif isinstance(message, ToolResultMessage):
        content: str | list[dict[str, Any]] = message.text
        if message.files:  # a tool result's content may hold images
            content = [_text(message.text), *(lower_file(f, _lower_file_unchecked, _text) for f in message.files)]
        result: dict[str, Any] = {"type": "tool_result", "tool_use_id": message.call_id, "content": content}
        if message.is_error:
            result["is_error"] = True
        _user(out, [result])
    else:  # pragma: no cover - guarded by the type union
        raise TypeError(f"unknown message type {type(message).__name__}")


def _as_sent(turn: dict[str, Any]) -> dict[str, Any]:
    """A turn as sent: the API refuses one without content."""
    return turn if turn["content"] else {**turn, "content": [_text("")]}


def lower_messages(request: LLMRequest) -> list[dict[str, Any]]:
    """The Messages `messages` array for a request's history (pure: attachments arrive loaded)."""
    return lower_history(request.messages, _add_message, _as_sent)


def _thinking(option: Any) -> dict[str, Any] | None:
    """The AI SDK's `thinking: {type, budgetTokens}` option in the wire's spelling."""
    if not isinstance(option, Mapping):
        return None
    wire = {k: v for k, v in option.items() if k != "budgetTokens"}
    if "budgetTokens" in option:
        wire["budget_tokens"] = option["budgetTokens"]
    return wire


def build_body(request: LLMRequest, *, history: list[Any] | None = None) -> dict[str, Any]:
    """The streaming Messages request body; `history` stands for the lowered `request.messages` when given."""
    c = request.controls
    body: dict[str, Any] = {
        "model": request.model.wire_model,
        "max_tokens": c.max_output_tokens or request.model.output_limit or DEFAULT_MAX_TOKENS,
        "messages": lower_messages(request) if history is None else history,
        "stream": True,
    }
    system = [_text(s) for s in request.system if s]
    if system:
        # the agent's text and the Instruction Baseline are the stable prefix: cache up to their end
        system[-1]["cache_control"] = CACHE_BREAKPOINT
        body["system"] = system
    if request.tools:
        body["tools"] = [{"name": t.name, "description": t.description, "input_schema": t.parameters}
                         for t in request.tools]
        if request.tool_choice == "none":
            body["tool_choice"] = {"type": "none"}
    thinking = _thinking(request.options.get("thinking"))
    if thinking is not None:
        body["thinking"] = thinking
    # extended thinking refuses sampling controls: an agent's temperature must not fail a thinking variant
    sampling = thinking is None or thinking.get("type") == "disabled"
    for key, value in (("temperature", c.temperature if sampling else None), ("top_p", c.top_p if sampling else None),
                       ("top_k", c.top_k if sampling else None), ("stop_sequences", list(c.stop) if c.stop else None)):
        if value is not None:
            body[key] = value
    return with_compat_fields(body, request.model.body)


# ---------------------------------------------------------------------------------------------
# Streaming.


class MessagesStreamDecoder:
    """Stateful translation of Messages stream events into provider-neutral events for one call."""

    def __init__(self) -> None:
        self._blocks = Blocks()
        self._tools = ToolCallAccumulator()
        self._kinds: dict[int, str] = {}
        self._signatures: dict[int, str] = {}
        self._hosted_names: dict[str, str] = {}
        self._input = self._output = self._cache_read = self._cache_write = 0
        self._stop: str | None = None
        self._stopped = False

    def _usage(self, usage: Any) -> None:
        if usage is None:
            return
        # message_delta repeats the counts so far; a field it leaves out keeps its earlier value
        for attr, name in (("_input", "input_tokens"), ("_output", "output_tokens"),
                           ("_cache_read", "cache_read_input_tokens"), ("_cache_write", "cache_creation_input_tokens")):
            value = field_of(usage, name)
            if value is not None:
                setattr(self, attr, int_of(value))

    def feed(self, event: Any) -> list[StreamEvent]:
        kind = field_of(event, "type")
        index = int_of(field_of(event, "index"))
        if kind == "message_start":
            self._usage(field_of(field_of(event, "message"), "usage"))
        elif kind == "content_block_start":
            return self._block_start(index, field_of(event, "content_block"))
        elif kind == "content_block_delta":
            return self._block_delta(index, field_of(event, "delta"))
        elif kind == "content_block_stop":
            return self._block_stop(index)
        elif kind == "message_delta":
            self._usage(field_of(event, "usage"))
            reason = field_of(field_of(event, "delta"), "stop_reason")
            if reason:
                self._stop = reason
        elif kind == "message_stop":
            self._stopped = True
            return self._blocks.close() + self._tools.finish_all()
        return []

    def _block_start(self, index: int, block: Any) -> list[StreamEvent]:
        kind = field_of(block, "type")
        self._kinds[index] = kind
        block_id = f"{kind}-{index}"
        if kind == "text":
            return self._blocks.start("text", block_id) + self._blocks.delta("text", block_id,
                                                                              field_of(block, "text") or "")
        if kind == "thinking":
            return self._blocks.start("reasoning", block_id) + self._blocks.delta(
                "reasoning", block_id, field_of(block, "thinking") or "")
        if kind == "redacted_thinking":
            return self._blocks.start("reasoning", block_id) + self._blocks.end(
                block_id, {METADATA_KEY: {"redactedData": field_of(block, "data")}})
        if kind in ("tool_use", "server_tool_use"):
            hosted = kind == "server_tool_use"
            call_id, name = field_of(block, "id"), field_of(block, "name")
            if hosted:
                self._hosted_names[call_id] = name
            return self._blocks.close() + self._tools.start(index, call_id, name, provider_executed=hosted)
        if isinstance(kind, str) and kind.endswith("_tool_result"):
            call_id = field_of(block, "tool_use_id")
            plain = plain_data(field_of(block, "content"))
            error = isinstance(plain, Mapping) and str(plain.get("type", "")).endswith("_error")
            return [ToolResult(call_id=call_id, name=self._hosted_names.get(call_id, kind), result=plain,
                               text=json.dumps(plain, ensure_ascii=False), is_error=error,
                               metadata={METADATA_KEY: {"resultType": kind}})]
        return []

    def _block_delta(self, index: int, delta: Any) -> list[StreamEvent]:
        kind = field_of(delta, "type")
        block_id = f"{self._kinds.get(index)}-{index}"
        if kind == "text_delta":
            return self._blocks.delta("text", block_id, field_of(delta, "text") or "")
        if kind == "thinking_delta":
            return self._blocks.delta("reasoning", block_id, field_of(delta, "thinking") or "")
        if kind == "signature_delta":
            self._signatures[index] = self._signatures.get(index, "") + (field_of(delta, "signature") or "")
        elif kind == "input_json_delta":
            return self._tools.append(index, field_of(delta, "partial_json") or "")
        return []

    def _block_stop(self, index: int) -> list[StreamEvent]:
        kind = self._kinds.get(index)
        block_id = f"{kind}-{index}"
        if kind == "text":
            return self._blocks.end(block_id)
        if kind == "thinking":
            signature = self._signatures.get(index)
            return self._blocks.end(block_id, {METADATA_KEY: {"signature": signature}} if signature else None)
        if kind in ("tool_use", "server_tool_use"):
            return self._tools.finish(index)
        return []

    def end(self) -> list[StreamEvent]:
        if not self._stopped or self._stop is None:
            raise TransportError("The provider stream ended before the response was finished")
        reason = _STOP_REASONS.get(self._stop, "other")
        usage = Usage(input=self._input, output=self._output, cache_read=self._cache_read,
                      cache_write=self._cache_write)
        return [Finish(reason, usage)]


# ---------------------------------------------------------------------------------------------
# The provider.


class _MessagesClient(anthropic.AsyncAnthropic):
    """The SDK's client, sending the key the way the Messages API authenticates: in `x-api-key`, next to the
    `anthropic-version` the SDK sends. This SDK version sends it as a bearer token, which the API refuses with 401.
    No key (a keyless server), or a provider entry whose headers carry its own `x-api-key`, adds none."""

    @property
    def auth_headers(self) -> dict[str, str]:
        key = self.api_key
        if not key or key == KEYLESS_PLACEHOLDER or any(k.lower() == "x-api-key" for k in sdk_custom_headers(self)):
            return {}
        return {"X-Api-Key": key}


class AnthropicMessagesProvider(SDKAdapter):
    """The Messages API over one SDK client (per base URL, key and headers)."""

    path = "/messages"
    cast_to = Message
    stream_cls = anthropic.AsyncStream[object]  # items as the JSON they arrived in: see SDKAdapter
    sdk = ANTHROPIC_SDK
    omit = anthropic.Omit

    def __init__(self, base_url: str, api_key: str | None, headers: Mapping[str, str] | None = None,
                 timeout: float | httpx2.Timeout | None = DEFAULT_TIMEOUT,
                 http_client: httpx2.AsyncClient | None = None) -> None:
        user_headers = dict(headers or {})
        client = _MessagesClient(
            api_key=api_key or KEYLESS_PLACEHOLDER,  # an explicit key: the SDK then reads no credential variables
            base_url=base_url.rstrip("/"),
            default_headers=user_headers or None,
            timeout=timeout,
            max_retries=0,  # the runtime owns retries: each retry is its own Step
            http_client=http_client,
        )
        # The SDK merges ANTHROPIC_CUSTOM_HEADERS (and profile headers) whatever server it talks to: only what the
        # provider entry names may reach that server.
        pin_sdk_headers(client, user_headers, drop_credential_headers=True)
        # without any credential the SDK refuses to send a request unless its Authorization header is left out
        super().__init__(base_url, client, keyless_header="Authorization" if keyless(api_key, headers) else None,
                         owns_http=http_client is None)
        self._history = WireHistory(_add_message, _as_sent)

    def build_body(self, request: LLMRequest) -> dict[str, Any]:
        return build_body(request)

    def encode_request(self, request: LLMRequest) -> bytes:
        return self._history.encode(request, lambda history: build_body(request, history=history))

    def decoder(self) -> MessagesStreamDecoder:
        return MessagesStreamDecoder()


__all__ = ["AnthropicMessagesProvider", "MessagesStreamDecoder", "build_body",
           "lower_messages"]
