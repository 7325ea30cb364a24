"""OpenAI Responses API adapter: lowers an `LLMRequest` to input items once, as plain JSON (our history, never
`previous_response_id`; without `store`, reasoning replayed from its encrypted content and calls by their call ID,
never by item IDs the service did not keep), streams one call through the official SDK and turns output items into
provider-neutral events."""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import partial
from typing import Any

import httpx2
import openai
from openai.types.responses import Response

from .errors import TransportError, classify_failure
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
from .openai_chat import OPENAI_SDK, keyless, sdk_client
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
    plain_data,
    text_file,
    unshowable,
    with_compat_fields,
)

METADATA_KEY = "openai"
# Output item types the provider runs itself: their calls and results arrive in the stream.
HOSTED_ITEMS = frozenset({
    "web_search_call", "file_search_call", "code_interpreter_call", "image_generation_call", "computer_call",
    "mcp_call", "local_shell_call",
})


# ---------------------------------------------------------------------------------------------
# Lowering.


def _input_text(text: str) -> dict[str, Any]:
    return {"type": "input_text", "text": text}


def _lower_file_unchecked(part: FilePart) -> dict[str, Any]:
    mime = part.mime.lower()
    if mime.startswith("image/"):
        return {"type": "input_image", "image_url": part.uri if is_remote(part) else data_url(part)}
    if is_text_mime(mime):
        return _input_text(text_file(part))
    if mime == "application/pdf":
        if is_remote(part):
            return {"type": "input_file", "file_url": part.uri}
        return {"type": "input_file", "filename": file_label(part), "file_data": data_url(part)}
    return _input_text(unshowable(part))


def _native(metadata: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    own = (metadata or {}).get(METADATA_KEY)
    return own if isinstance(own, Mapping) else None


def _lower_assistant(message: AssistantMessage, out: list[dict[str, Any]], stored: bool) -> None:
    """With `stored` the service kept the earlier output items, and they are named by their IDs; without it, it
    refuses any ID it does not hold, so reasoning travels as its encrypted content and a call by its call ID."""
    for part in message.parts:
        if isinstance(part, TextPart):
            if part.text:
                out.append({"role": "assistant", "content": part.text})
        elif isinstance(part, ReasoningPart):
            native = _native(part.metadata)
            encrypted = native.get("encryptedContent") if native is not None else None
            if native is not None and native.get("itemId") and (stored or encrypted):
                item: dict[str, Any] = {"type": "reasoning"}
                if stored:
                    item["id"] = native["itemId"]
                item["summary"] = [{"type": "summary_text", "text": part.text}] if part.text else []
                if encrypted:
                    item["encrypted_content"] = encrypted
                out.append(item)
            elif part.text:
                out.append({"role": "assistant", "content": part.text})
        elif isinstance(part, ToolCallPart):
            if part.provider_executed:
                continue  # a hosted call's outcome is already in the text that followed it
            call: dict[str, Any] = {"type": "function_call", "call_id": part.call_id, "name": part.name,
                                    "arguments": json.dumps(part.input, ensure_ascii=False)}
            native = _native(part.metadata)
            if stored and native is not None and native.get("itemId"):
                call["id"] = native["itemId"]
            out.append(call)


def _add_message(out: list[dict[str, Any]], message: LLMMessage, stored: bool) -> None:
    """One history message onto the input items so far (it only ever adds items)."""
    if isinstance(message, SystemUpdate):
        # The Responses API takes developer messages anywhere: the native chronological instruction role.
        out.append({"role": "developer", "content": message.text})
    elif isinstance(message, UserMessage):
        if message.tool_files:
            return  # the function call outputs before it carry their images themselves
        out.append({"role": "user", "content": [
            _input_text(p.text) if isinstance(p, TextPart) else lower_file(p, _lower_file_unchecked, _input_text)
            for p in message.parts]})
    elif isinstance(message, AssistantMessage):
        _lower_assistant(message, out, stored)
    elif isinstance(message, ToolResultMessage):
        output: str | list[dict[str, Any]] = message.text
        if message.files:  # a function call's output may be a list of input content, images among it
            output = [_input_text(message.text),
                      *(lower_file(f, _lower_file_unchecked, _input_text) for f in message.files)]
        out.append({"type": "function_call_output", "call_id": message.call_id, "output": output})
    else:  # pragma: no cover - guarded by the type union
        raise TypeError(f"unknown message type {type(message).__name__}")


def _stored(request: LLMRequest) -> bool:
    """Whether the request asks the service to keep its output items (the `store` option; off by default)."""
    return request.options.get("store") is True


def lower_input(request: LLMRequest) -> list[dict[str, Any]]:
    """The Responses `input` items for a request's history (pure: attachments arrive loaded)."""
    return lower_history(request.messages, partial(_add_message, stored=_stored(request)))


def build_body(request: LLMRequest, *, history: list[Any] | None = None) -> dict[str, Any]:
    """The streaming Responses request body (`history` stands for the lowered `request.messages` when given).
    History is ours: nothing is stored at the provider unless the `store` option asks for it."""
    body: dict[str, Any] = {"model": request.model.wire_model,
                            "input": lower_input(request) if history is None else history, "stream": True,
                            "store": _stored(request)}
    system = [s for s in request.system if s]
    if system:
        body["instructions"] = "\n\n".join(system)
    if request.tools:
        body["tools"] = [{"type": "function", "name": t.name, "description": t.description,
                          "parameters": t.parameters, "strict": False} for t in request.tools]
        if request.tool_choice == "none":
            body["tool_choice"] = "none"
    c = request.controls
    for key, value in (("temperature", c.temperature), ("top_p", c.top_p), ("max_output_tokens", c.max_output_tokens)):
        if value is not None:
            body[key] = value
    if request.prompt_cache_key is not None:
        body["prompt_cache_key"] = request.prompt_cache_key
    options = request.options
    effort = options.get("reasoningEffort")
    if request.model.capabilities.reasoning or effort is not None:
        reasoning: dict[str, Any] = {"summary": options.get("reasoningSummary", "auto")}
        if effort is not None:
            reasoning["effort"] = effort
        body["reasoning"] = reasoning
        # without stored responses, reasoning can only be replayed from its encrypted content
        body["include"] = ["reasoning.encrypted_content"]
    if "textVerbosity" in options:
        body["text"] = {"verbosity": options["textVerbosity"]}
    for option, wire_field in (("parallelToolCalls", "parallel_tool_calls"), ("serviceTier", "service_tier"),
                               ("user", "user"), ("promptCacheKey", "prompt_cache_key")):
        if option in options:
            body[wire_field] = options[option]
    return with_compat_fields(body, request.model.body)


# ---------------------------------------------------------------------------------------------
# Streaming.


def usage_of(raw: Any) -> Usage:
    total_in = int_of(field_of(raw, "input_tokens"))
    total_out = int_of(field_of(raw, "output_tokens"))
    cached = int_of(field_of(field_of(raw, "input_tokens_details"), "cached_tokens"))
    reasoning = int_of(field_of(field_of(raw, "output_tokens_details"), "reasoning_tokens"))
    return Usage(input=total_in - cached, output=total_out - reasoning, reasoning=reasoning, cache_read=cached)


class ResponsesStreamDecoder:
    """Stateful translation of Responses stream events into provider-neutral events for one call."""

    def __init__(self) -> None:
        self._blocks = Blocks()
        self._tools = ToolCallAccumulator()
        self._summary_index: dict[str, int] = {}
        self._function_calls = 0
        self._finish: Finish | None = None

    def feed(self, event: Any) -> list[StreamEvent]:
        kind = field_of(event, "type")
        item_id = field_of(event, "item_id")
        out: list[StreamEvent] = []
        if kind == "response.output_item.added":
            out += self._item_added(field_of(event, "item"))
        elif kind in ("response.output_text.delta", "response.refusal.delta"):
            out += self._blocks.delta("text", item_id, field_of(event, "delta") or "")
        elif kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            index = int_of(field_of(event, "summary_index"))
            if index > self._summary_index.setdefault(item_id, index):
                self._summary_index[item_id] = index
                out += self._blocks.delta("reasoning", item_id, "\n\n")
            out += self._blocks.delta("reasoning", item_id, field_of(event, "delta") or "")
        elif kind == "response.function_call_arguments.delta":
            out += self._tools.append(item_id, field_of(event, "delta") or "")
        elif kind == "response.output_item.done":
            out += self._item_done(field_of(event, "item"))
        elif kind in ("response.completed", "response.incomplete"):
            out += self._blocks.close()
            out += self._tools.finish_all()
            self._finish = self._finished(field_of(event, "response"))
        elif kind == "response.failed":
            error = field_of(field_of(event, "response"), "error")
            raise classify_failure(None, field_of(error, "message") or "The provider failed the response",
                                   code=field_of(error, "code"))
        elif kind == "error":
            raise classify_failure(None, field_of(event, "message") or "The provider reported an error",
                                   code=field_of(event, "code"))
        return out

    def _item_added(self, item: Any) -> list[StreamEvent]:
        kind, item_id = field_of(item, "type"), field_of(item, "id")
        if kind == "reasoning":
            return self._blocks.start("reasoning", item_id)
        if kind == "function_call":
            self._function_calls += 1
            return self._blocks.close() + self._tools.start(
                item_id, field_of(item, "call_id") or item_id, field_of(item, "name"),
                metadata={METADATA_KEY: {"itemId": item_id}})
        if kind in HOSTED_ITEMS:
            return self._blocks.close() + self._tools.start(item_id, item_id, kind, provider_executed=True,
                                                            metadata={METADATA_KEY: {"itemId": item_id}})
        return []

    def _item_done(self, item: Any) -> list[StreamEvent]:
        kind, item_id = field_of(item, "type"), field_of(item, "id")
        if kind == "message":
            return self._blocks.end(item_id)
        if kind == "reasoning":
            metadata: dict[str, Any] = {"itemId": item_id}
            encrypted = field_of(item, "encrypted_content")
            if encrypted:
                metadata["encryptedContent"] = encrypted
            # a reasoning item without summary text is still kept: its encrypted content continues it natively
            return self._blocks.start("reasoning", item_id) + self._blocks.end(item_id, {METADATA_KEY: metadata})
        if kind == "function_call":
            return self._tools.finish(item_id, field_of(item, "arguments"))
        if kind in HOSTED_ITEMS:
            plain = plain_data(item)
            action = field_of(item, "action")
            arguments = json.dumps(plain_data(action) if action is not None else {}, ensure_ascii=False)
            status = field_of(item, "status")
            return self._tools.finish(item_id, arguments) + [ToolResult(
                call_id=item_id, name=kind, result=plain, text=str(status or ""), is_error=status == "failed",
                metadata={METADATA_KEY: {"itemId": item_id}})]
        return []

    def _finished(self, response: Any) -> Finish:
        usage = usage_of(field_of(response, "usage"))
        reason: FinishReason = "stop"
        if field_of(response, "status") == "incomplete":
            why = field_of(field_of(response, "incomplete_details"), "reason")
            reason = "content-filter" if why == "content_filter" else "length" if why == "max_output_tokens" \
                else "other"
        elif self._function_calls:
            reason = "tool-calls"
        return Finish(reason, usage)

    def end(self) -> list[StreamEvent]:
        if self._finish is None:
            raise TransportError("The provider stream ended before the response was finished")
        return [self._finish]


# ---------------------------------------------------------------------------------------------
# The provider.


class OpenAIResponsesProvider(SDKAdapter):
    """The Responses API over one SDK client (per base URL, key and headers)."""

    path = "/responses"
    cast_to = Response
    stream_cls = openai.AsyncStream[object]  # items as the JSON they arrived in: see SDKAdapter
    sdk = OPENAI_SDK
    omit = openai.Omit

    def __init__(self, base_url: str, api_key: str | None, headers: Mapping[str, str] | None = None,
                 timeout: float | httpx2.Timeout | None = DEFAULT_TIMEOUT,
                 http_client: httpx2.AsyncClient | None = None) -> None:
        base_url = base_url.rstrip("/")
        super().__init__(base_url, sdk_client(openai.AsyncOpenAI, base_url, api_key, headers, timeout, http_client),
                         keyless_header="Authorization" if keyless(api_key, headers) else None,
                         owns_http=http_client is None)
        # items lower apart with and without `store`: each keeps its own encodings
        self._history = WireHistory(partial(_add_message, stored=False))
        self._stored_history = WireHistory(partial(_add_message, stored=True))

    def build_body(self, request: LLMRequest) -> dict[str, Any]:
        return build_body(request)

    def encode_request(self, request: LLMRequest) -> bytes:
        history = self._stored_history if _stored(request) else self._history
        return history.encode(request, lambda items: build_body(request, history=items))

    def decoder(self) -> ResponsesStreamDecoder:
        return ResponsesStreamDecoder()


__all__ = ["OpenAIResponsesProvider", "ResponsesStreamDecoder", "build_body", "lower_input", "usage_of"]
