"""OpenAI Chat Completions adapter (OpenAI and every OpenAI-compatible server): lowers an `LLMRequest`
to the wire, streams one call through the official SDK, and turns chunks and SDK failures into
provider-neutral stream events and typed `ProviderError`s."""

from __future__ import annotations

import base64
import json
import urllib.parse
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any
from xml.sax.saxutils import escape as xml_escape

import httpx2
import openai

from .errors import (
    AuthenticationError,
    ContentPolicyError,
    ContextOverflowError,
    InvalidProviderOutputError,
    InvalidProviderRequestError,
    ProviderError,
    ProviderInternalError,
    QuotaExceededError,
    RateLimitError,
    TransportError,
    parse_retry_after_ms,
)
from .model import (
    AssistantMessage,
    FilePart,
    Finish,
    FinishReason,
    LLMRequest,
    ReasoningDelta,
    ReasoningEnd,
    ReasoningPart,
    ReasoningStart,
    StreamEvent,
    SystemUpdate,
    TextDelta,
    TextEnd,
    TextPart,
    TextStart,
    ToolCall,
    ToolCallPart,
    ToolInputDelta,
    ToolInputEnd,
    ToolInputStart,
    ToolResultMessage,
    Usage,
    UserMessage,
)

OPENAI_BASE_URL = "https://api.openai.com/v1"
# Reasoning models may think for minutes before the first byte, so the read timeout is generous;
# a dead host should still fail fast on connect.
DEFAULT_TIMEOUT = httpx2.Timeout(600.0, connect=15.0)
# The SDK refuses to build a client without some key; keyless servers (Ollama, llama.cpp) get this
# placeholder and the Authorization header is then removed from every request.
_KEYLESS_PLACEHOLDER = "keyless"

_FINISH_REASONS: dict[str, FinishReason] = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool-calls",
    "function_call": "tool-calls",
    "content_filter": "content-filter",
}

# Phrases servers use for "the prompt does not fit the context window" (OpenAI, vLLM, llama.cpp,
# OpenRouter, Azure). Kept specific: a false match costs a pointless compaction.
_OVERFLOW_MARKERS = (
    "context_length_exceeded",
    "context length",
    "context window",
    "context_window",
    "context size",
    "maximum context",
    "prompt is too long",
    "input is too long",
    "too many tokens",
    "exceeds the context",
    "reduce the length",
)
_QUOTA_MARKERS = ("insufficient_quota", "billing_hard_limit", "quota_exceeded")
_CONTENT_POLICY_MARKERS = ("content_filter", "content_policy", "content policy", "responsibleaipolicyviolation")


# ---------------------------------------------------------------------------------------------
# Lowering: provider-neutral request -> Chat Completions body.


def wrap_system_update(text: str) -> str:
    """Chat Completions has no chronological system role, so updates travel as tagged user text."""
    return "<system-update>\n" + xml_escape(text) + "\n</system-update>"  # escapes &, < and >


def _is_openai_host(base_url: str) -> bool:
    host = urllib.parse.urlsplit(base_url).hostname or ""
    return host.lower() == "api.openai.com"


def _bytes_of(part: FilePart) -> bytes:
    """The attachment's bytes: loaded by the runtime, or inline in a `data:` URI. Local files are never read here:
    the runtime loads them under the Location authority, so one it did not load is not readable."""
    if part.data is not None:
        return part.data
    if part.uri.startswith("data:"):
        header, _, payload = part.uri[5:].partition(",")
        if header.endswith(";base64"):
            return base64.b64decode(payload)
        return urllib.parse.unquote_to_bytes(payload)
    raise ValueError("the file was not loaded")


def _is_remote(part: FilePart) -> bool:
    return part.data is None and urllib.parse.urlsplit(part.uri).scheme in ("http", "https")


def _file_label(part: FilePart) -> str:
    return part.name or urllib.parse.unquote(urllib.parse.urlsplit(part.uri).path.rsplit("/", 1)[-1]) or "file"


def _lower_file(part: FilePart) -> dict[str, Any]:
    try:
        return _lower_file_unchecked(part)
    except ValueError as exc:
        # An unloaded or corrupt attachment must not fail the whole Step; the model is told instead.
        return {"type": "text", "text": f"[Attached file {_file_label(part)} could not be read: {exc}]"}


def _lower_file_unchecked(part: FilePart) -> dict[str, Any]:
    mime = part.mime.lower()
    label = _file_label(part)
    remote = _is_remote(part)
    if mime.startswith("image/"):
        if remote or (part.data is None and part.uri.startswith("data:")):
            url = part.uri
        else:
            url = f"data:{part.mime};base64," + base64.b64encode(_bytes_of(part)).decode("ascii")
        return {"type": "image_url", "image_url": {"url": url}}
    if mime.startswith("text/") or mime == "application/json":
        if remote:
            return {"type": "text", "text": f"[Attached file {label} ({part.mime}) at {part.uri}]"}
        content = _bytes_of(part).decode("utf-8", errors="replace")
        return {"type": "text", "text": f"[Attached file {label} ({part.mime})]\n{content}"}
    if mime == "application/pdf" and not remote:
        data = part.uri if part.data is None and part.uri.startswith("data:") else (
            "data:application/pdf;base64," + base64.b64encode(_bytes_of(part)).decode("ascii")
        )
        return {"type": "file", "file": {"filename": label, "file_data": data}}
    # Chat Completions has no generic attachment type; tell the model the file exists rather than drop it.
    return {"type": "text", "text": f"[Attached file {label} ({part.mime}) cannot be shown to this model]"}


def _lower_user(message: UserMessage) -> dict[str, Any]:
    parts = [
        {"type": "text", "text": p.text} if isinstance(p, TextPart) else _lower_file(p) for p in message.parts
    ]
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
        previous["content"] = [*content, {"type": "text", "text": text}]


def lower_messages(request: LLMRequest) -> list[dict[str, Any]]:
    """The Chat Completions `messages` array for a request (pure: attachments arrive loaded)."""
    out: list[dict[str, Any]] = []
    system = [s for s in request.system if s]
    if system:
        # One system message: several chat templates (llama.cpp, vLLM) reject a second one.
        out.append({"role": "system", "content": "\n\n".join(system)})
    for message in request.messages:
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
    return out


def build_body(request: LLMRequest, *, openai_host: bool) -> dict[str, Any]:
    """Keyword arguments for `chat.completions.create` (streaming, with usage reporting)."""
    body: dict[str, Any] = {
        "model": request.model.wire_model,
        "messages": lower_messages(request),
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
    if request.max_output_tokens is not None:
        # OpenAI's reasoning models reject `max_tokens`; compatible servers mostly know only `max_tokens`.
        key = "max_completion_tokens" if openai_host else "max_tokens"
        body[key] = request.max_output_tokens
    if request.prompt_cache_key is not None and openai_host:
        body["prompt_cache_key"] = request.prompt_cache_key
    return body


# ---------------------------------------------------------------------------------------------
# Failures: SDK / transport exceptions -> typed provider errors.


def _body_fields(body: object) -> tuple[str | None, str | None, str | None, int | None]:
    """(message, code, type, numeric code) from an error body, tolerating the shapes servers send."""
    if isinstance(body, Mapping):
        inner = body.get("error")
        if isinstance(inner, Mapping):
            body = inner
    if not isinstance(body, Mapping):
        return (body if isinstance(body, str) and body else None), None, None, None
    message = body.get("message")
    code = body.get("code")
    kind = body.get("type")
    numeric = code if isinstance(code, int) and not isinstance(code, bool) else None
    return (
        message if isinstance(message, str) and message else None,
        str(code) if code is not None else None,
        str(kind) if kind is not None else None,
        numeric,
    )


def classify_failure(
    status: int | None,
    message: str,
    *,
    code: str | None = None,
    kind: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> ProviderError:
    """Pick the typed failure for a provider error response (or an in-stream error event)."""
    retry_after = parse_retry_after_ms(headers)
    text = " ".join(x for x in (message, code or "", kind or "") if x).lower()
    tags = {(code or "").lower(), (kind or "").lower()}
    args: dict[str, Any] = {"status": status, "retry_after_ms": retry_after}

    if status == 413 or (
        (status is None or 400 <= status < 500) and status != 429 and any(m in text for m in _OVERFLOW_MARKERS)
    ):
        return ContextOverflowError(message, **args)
    if status == 402 or any(m in tags for m in _QUOTA_MARKERS):
        return QuotaExceededError(message, **args)
    if any(m in tag for tag in tags for m in _CONTENT_POLICY_MARKERS):
        return ContentPolicyError(message, **args)
    if status in (401, 403) or "invalid_api_key" in tags or "authentication_error" in tags:
        return AuthenticationError(message, **args)
    if status == 429 or "rate_limit_exceeded" in tags or "rate_limit_error" in tags:
        return RateLimitError(message, **args)
    if status == 408:
        return TransportError(message, **args)
    if status is not None and status >= 500:
        return ProviderInternalError(message, **args)
    if any(m in text for m in _CONTENT_POLICY_MARKERS):
        return ContentPolicyError(message, **args)
    if status == 409:
        # OpenAI answers 409 for transient lock contention; its own SDK retries it.
        return ProviderInternalError(message, **args)
    if status is not None and 400 <= status < 500:
        return InvalidProviderRequestError(message, **args)
    # An error event inside an otherwise healthy stream without a usable status: the server failed.
    return ProviderInternalError(message, **args)


def _describe_cause(exc: BaseException) -> str:
    cause = exc.__cause__ or exc.__context__
    if cause is None:
        return ""
    detail = str(cause)
    return f"{type(cause).__name__}: {detail}" if detail else type(cause).__name__


def map_exception(exc: BaseException, *, started: bool = False, base_url: str | None = None) -> ProviderError:
    """Translate anything the SDK or transport raises into a `ProviderError`. `started` says the
    response stream was being read (so a broken connection dropped mid-stream and a parse failure
    is bad provider output rather than a bad request); `base_url` names the provider in connection failures."""
    if isinstance(exc, ProviderError):
        return exc
    at = f" at {base_url}" if base_url else ""
    if isinstance(exc, openai.APITimeoutError):
        return TransportError(f"The provider request{at} timed out" + (" mid-stream" if started else ""))
    if isinstance(exc, openai.APIConnectionError):
        cause = _describe_cause(exc)
        what = "The provider connection dropped mid-stream" if started else f"Could not reach the provider{at}"
        return TransportError(what + (f" ({cause})" if cause else ""))
    if isinstance(exc, openai.APIStatusError):
        message, code, kind, _ = _body_fields(exc.body)
        return classify_failure(
            exc.status_code,
            message or exc.message,
            code=code or exc.code,
            kind=kind or exc.type,
            headers=exc.response.headers,
        )
    if isinstance(exc, openai.APIResponseValidationError):
        return InvalidProviderOutputError(f"The provider sent a response of the wrong shape: {exc.message}")
    if isinstance(exc, openai.APIError):
        message, code, kind, numeric = _body_fields(exc.body)
        status = numeric if numeric is not None and 400 <= numeric < 600 else None
        return classify_failure(status, message or exc.message, code=code, kind=kind)
    if isinstance(exc, httpx2.TimeoutException):
        return TransportError("The provider request timed out")
    if isinstance(exc, httpx2.HTTPError):
        return TransportError(f"The provider connection failed ({type(exc).__name__}: {exc})")
    if isinstance(exc, OSError):
        return TransportError(f"The provider connection failed ({type(exc).__name__}: {exc})")
    if isinstance(exc, ValueError) and started:
        # json.JSONDecodeError and pydantic.ValidationError both land here: a malformed chunk.
        return InvalidProviderOutputError(f"The provider sent a malformed stream chunk: {exc}")
    if isinstance(exc, (openai.OpenAIError, ValueError)):
        return InvalidProviderRequestError(f"The provider request could not be made: {exc}")
    return InvalidProviderOutputError(
        f"Unexpected failure while reading the provider stream: {type(exc).__name__}: {exc}"
    )


# ---------------------------------------------------------------------------------------------
# Streaming: chunks -> provider-neutral events.


def _field(obj: Any, name: str) -> Any:
    """Read a chunk field whether the SDK parsed it into a model, left it a dict, or omitted it;
    vendor extensions such as `reasoning_content` only exist as model extras."""
    if obj is None:
        return None
    if isinstance(obj, Mapping):
        return obj.get(name)
    return getattr(obj, name, None)


def _int(value: Any) -> int:
    if isinstance(value, bool):
        return 0
    if isinstance(value, (int, float)):
        return int(value)
    return 0


def usage_from_chunk(raw: Any) -> Usage:
    prompt = _int(_field(raw, "prompt_tokens"))
    completion = _int(_field(raw, "completion_tokens"))
    prompt_details = _field(raw, "prompt_tokens_details")
    completion_details = _field(raw, "completion_tokens_details")
    cache_read = _int(_field(prompt_details, "cached_tokens"))
    cache_write = _int(_field(prompt_details, "cache_write_tokens"))
    reasoning = _int(_field(completion_details, "reasoning_tokens"))
    return Usage(
        input=max(0, prompt - cache_read - cache_write),
        output=max(0, completion - reasoning),
        reasoning=reasoning,
        cache_read=cache_read,
        cache_write=cache_write,
    )


@dataclass
class _PendingToolCall:
    call_id: str
    name: str | None
    id_from_provider: bool
    arguments: str = ""
    started: bool = False
    ended: bool = False


class ChatStreamDecoder:
    """Stateful translation of Chat Completions chunks into stream events for one call. Only one
    text or reasoning block is open at a time; tool calls are completed when the choice finishes."""

    def __init__(self) -> None:
        self._open: tuple[str, str] | None = None  # (kind, id) of the open text/reasoning block
        self._blocks = 0
        self._calls: dict[Any, _PendingToolCall] = {}
        self._slot_for_index: dict[Any, Any] = {}
        self._slots = 0
        self.finish_reason: str | None = None
        self.usage: Usage | None = None
        self.saw_tool_call = False
        self.saw_output = False

    # -- blocks ------------------------------------------------------------------------------

    def _close_block(self, out: list[StreamEvent]) -> None:
        if self._open is None:
            return
        kind, block_id = self._open
        out.append(TextEnd(block_id) if kind == "text" else ReasoningEnd(block_id, None))
        self._open = None

    def _delta(self, kind: str, text: str, out: list[StreamEvent]) -> None:
        if self._open is None or self._open[0] != kind:
            self._close_block(out)
            block_id = f"{kind}-{self._blocks}"
            self._blocks += 1
            self._open = (kind, block_id)
            out.append(TextStart(block_id) if kind == "text" else ReasoningStart(block_id))
        block_id = self._open[1]
        out.append(TextDelta(block_id, text) if kind == "text" else ReasoningDelta(block_id, text))
        self.saw_output = True

    # -- tool calls --------------------------------------------------------------------------

    def _tool_delta(self, index: Any, call_id: Any, name: Any, arguments: Any, out: list[StreamEvent]) -> None:
        call_id = call_id if isinstance(call_id, str) and call_id else None
        slot = self._slot_for_index.get(index)
        pending = self._calls.get(slot) if slot is not None else None
        # Some compatible servers reuse index 0 for every parallel call; a different id means a new call.
        reused = (
            pending is not None
            and call_id is not None
            and pending.id_from_provider
            and call_id != pending.call_id
        )
        if pending is None or pending.ended or reused:
            slot = self._slots
            self._slots += 1
            self._slot_for_index[index] = slot
            pending = _PendingToolCall(
                call_id=call_id or f"call_{slot}", name=None, id_from_provider=call_id is not None
            )
            self._calls[slot] = pending
        elif call_id is not None and not pending.started and not pending.id_from_provider:
            pending.call_id = call_id
            pending.id_from_provider = True
        if isinstance(name, str) and name and pending.name is None:
            pending.name = name
        if not pending.started and pending.name is not None:
            self._close_block(out)
            pending.started = True
            self.saw_tool_call = True
            self.saw_output = True
            out.append(ToolInputStart(pending.call_id, pending.name))
            if pending.arguments:
                out.append(ToolInputDelta(pending.call_id, pending.arguments))
        if isinstance(arguments, str) and arguments:
            pending.arguments += arguments
            if pending.started:
                out.append(ToolInputDelta(pending.call_id, arguments))

    def _complete_calls(self, out: list[StreamEvent]) -> None:
        for pending in self._calls.values():
            if pending.ended:
                continue
            pending.ended = True
            if not pending.started:
                raise InvalidProviderOutputError(f"The provider streamed tool call {pending.call_id} without a name")
            out.append(ToolInputEnd(pending.call_id))
            out.append(_tool_call(pending))

    # -- chunks ------------------------------------------------------------------------------

    def feed(self, chunk: Any) -> list[StreamEvent]:
        out: list[StreamEvent] = []
        usage = _field(chunk, "usage")
        if usage is not None:
            self.usage = usage_from_chunk(usage)
        choices = _field(chunk, "choices")
        if choices is None:
            choices = []
        if not isinstance(choices, list):
            raise InvalidProviderOutputError("The provider sent a stream chunk whose choices are not a list")
        for choice in choices:
            index = _field(choice, "index")
            if index not in (None, 0):
                continue  # n=1 is always requested; other choices would be a server quirk
            delta = _field(choice, "delta")
            if delta is not None and self.finish_reason is None:
                self._feed_delta(delta, out)
            reason = _field(choice, "finish_reason")
            if isinstance(reason, str) and reason and self.finish_reason is None:
                self.finish_reason = reason
                self._close_block(out)
                self._complete_calls(out)
        return out

    def _feed_delta(self, delta: Any, out: list[StreamEvent]) -> None:
        reasoning = _field(delta, "reasoning_content")
        if not (isinstance(reasoning, str) and reasoning):
            # Servers that send both fields send the same text twice; only one is used.
            reasoning = _field(delta, "reasoning")
        if isinstance(reasoning, str) and reasoning:
            self._delta("reasoning", reasoning, out)
        for key in ("content", "refusal"):
            text = _field(delta, key)
            if isinstance(text, str) and text:
                self._delta("text", text, out)
        tool_calls = _field(delta, "tool_calls")
        if isinstance(tool_calls, list):
            for position, call in enumerate(tool_calls):
                index = _field(call, "index")
                function = _field(call, "function")
                self._tool_delta(
                    index if index is not None else position,
                    _field(call, "id"),
                    _field(function, "name"),
                    _field(function, "arguments"),
                    out,
                )
        legacy = _field(delta, "function_call")
        if legacy is not None:
            self._tool_delta("function_call", None, _field(legacy, "name"), _field(legacy, "arguments"), out)

    def end(self) -> list[StreamEvent]:
        """Events after the last chunk. A stream that never finished its choice was cut off."""
        if self.finish_reason is None:
            raise TransportError("The provider stream ended before the response was finished")
        reason = _FINISH_REASONS.get(self.finish_reason, "other")
        if reason == "stop" and self.saw_tool_call:
            # Some compatible servers (older Ollama, llama.cpp) report "stop" alongside tool calls.
            reason = "tool-calls"
        return [Finish(reason, self.usage or Usage())]


def _tool_call(pending: _PendingToolCall) -> ToolCall:
    assert pending.name is not None
    raw = pending.arguments
    if not raw.strip():
        return ToolCall(pending.call_id, pending.name, {}, raw_input=raw)
    try:
        parsed = json.loads(raw)
    except ValueError as exc:
        return ToolCall(
            pending.call_id, pending.name, {}, input_error=f"Tool arguments are not valid JSON: {exc}", raw_input=raw
        )
    if not isinstance(parsed, dict):
        return ToolCall(
            pending.call_id,
            pending.name,
            {},
            input_error=f"Tool arguments must be a JSON object, got {type(parsed).__name__}",
            raw_input=raw,
        )
    return ToolCall(pending.call_id, pending.name, parsed, raw_input=raw)


# ---------------------------------------------------------------------------------------------
# The provider.

# What the SDK and its transport raise for provider trouble; anything else is a bug and propagates.
_SDK_FAILURES = (openai.OpenAIError, httpx2.HTTPError, ValueError, OSError)


class OpenAIChatProvider:
    """One SDK client per (base URL, key, headers); each `stream` call is exactly one HTTP request."""

    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        headers: Mapping[str, str] | None = None,
        timeout: float | httpx2.Timeout | None = DEFAULT_TIMEOUT,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._openai_host = _is_openai_host(self.base_url)
        user_headers = dict(headers or {})
        self._keyless = not api_key and not any(k.lower() == "authorization" for k in user_headers)
        self._client = openai.AsyncOpenAI(
            base_url=self.base_url,
            api_key=api_key or _KEYLESS_PLACEHOLDER,
            default_headers=user_headers or None,
            timeout=timeout,
            max_retries=0,  # the runtime owns retries: each retry is its own Step
        )
        # The SDK also reads OPENAI_ORG_ID, OPENAI_PROJECT_ID, OPENAI_ADMIN_KEY and OPENAI_CUSTOM_HEADERS (whose
        # Authorization even replaces the key) whatever server it talks to: only what the provider entry names may
        # reach that server. (A test against a loopback server pins this for the SDK version in the lock file.)
        self._client.organization = None
        self._client.project = None
        self._client.admin_api_key = None
        self._client._custom_headers = user_headers

    def __repr__(self) -> str:
        return f"OpenAIChatProvider(base_url={self.base_url!r})"

    async def aclose(self) -> None:
        await self._client.close()

    def build_body(self, request: LLMRequest) -> dict[str, Any]:
        return build_body(request, openai_host=self._openai_host)

    async def stream(self, request: LLMRequest) -> AsyncIterator[StreamEvent]:
        body = self.build_body(request)
        extra: dict[str, Any] = {}
        if self._keyless:
            extra["extra_headers"] = {"Authorization": openai.Omit()}
        try:
            chunks = await self._client.chat.completions.create(**body, **extra)
        except _SDK_FAILURES as exc:
            raise map_exception(exc, base_url=self.base_url) from exc

        decoder = ChatStreamDecoder()
        iterator = chunks.__aiter__()
        try:
            while True:
                try:
                    chunk = await iterator.__anext__()
                except StopAsyncIteration:
                    break
                except _SDK_FAILURES as exc:
                    raise map_exception(exc, started=True) from exc
                try:
                    events = decoder.feed(chunk)
                except ProviderError:
                    raise
                except (AttributeError, TypeError, ValueError) as exc:
                    raise InvalidProviderOutputError(f"The provider sent an unreadable stream chunk: {exc}") from exc
                for event in events:
                    yield event
            for event in decoder.end():
                yield event
        finally:
            try:
                await chunks.close()
            except Exception:
                # Closing a broken connection can fail again; the original outcome already stands.
                pass


__all__ = [
    "ChatStreamDecoder",
    "DEFAULT_TIMEOUT",
    "OPENAI_BASE_URL",
    "OpenAIChatProvider",
    "build_body",
    "classify_failure",
    "lower_messages",
    "map_exception",
    "usage_from_chunk",
    "wrap_system_update",
]
