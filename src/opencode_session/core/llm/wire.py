"""What every protocol adapter shares on the wire: the request body built once as plain JSON and sent through the
SDK client's low-level `post`, then in the request that first `post` built (the SDK's per-request walk of the body's
type annotations never runs), the SDK's stream of items read into provider-neutral events with failures mapped in
one place, and attachment and update helpers."""

from __future__ import annotations

import base64
import json
import operator
import secrets
import ssl
import urllib.parse
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import compress, count
from typing import Any, ClassVar, Protocol, cast
from xml.sax.saxutils import escape as xml_escape

import anyio
import httpx2

from ...compat import can_resend, sdk_http_client, sdk_status_error, sdk_stream
from .errors import InvalidProviderOutputError, ProviderError
from .model import (
    FilePart,
    LLMMessage,
    LLMRequest,
    ReasoningDelta,
    ReasoningEnd,
    ReasoningStart,
    StreamEvent,
    TextDelta,
    TextEnd,
    TextStart,
)
from .sdk_failures import SDKErrors, map_exception

# Reasoning models may think for minutes before the first byte, so the read timeout is generous;
# a dead host should still fail fast on connect.
DEFAULT_TIMEOUT = httpx2.Timeout(600.0, connect=15.0)
JSON_HEADERS = {"Content-Type": "application/json"}
# what the HTTP client sets anew for each request (the body's length, the cookie jar's cookies)
_PER_REQUEST_HEADERS = (b"content-length", b"cookie")


def _compact(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def encode_body(body: Mapping[str, Any]) -> bytes:
    """The request body as sent: compact UTF-8 JSON, built from plain data once."""
    return _compact(body)


# --- history lowered once per message ----------------------------------------------------------------

# lowers one history message onto the protocol's wire items so far (appending, or changing the last)
AddMessage = Callable[[list[dict[str, Any]], LLMMessage], None]
# one wire item as it is sent (the items stay as they are)
AsSent = Callable[[dict[str, Any]], dict[str, Any]]
# stands for the history items in a body while it is encoded; random per process, so no request text can forge it
_HISTORY_MARK = "\x00ocs-history-" + secrets.token_hex(16)
_MARK_BYTES = _compact(_HISTORY_MARK)


def _as_is(item: dict[str, Any]) -> dict[str, Any]:
    return item


def lower_history(messages: Sequence[LLMMessage], add_message: AddMessage,
                  as_sent: AsSent = _as_is) -> list[dict[str, Any]]:
    """A protocol's wire items for `messages`, lowered from nothing: the cold path every cached one must equal."""
    items: list[dict[str, Any]] = []
    for message in messages:
        add_message(items, message)
    return [as_sent(item) for item in items]


@dataclass
class _Lowered:
    messages: list[LLMMessage]
    starts: list[int]  # starts[i]: how many items there were before messages[i] was lowered
    encoded: bytearray  # every item as sent, encoded, comma-separated
    ends: list[int]  # ends[i]: where item i ends in `encoded`

    def item(self, i: int) -> dict[str, Any]:
        """Item `i` as sent (decoded again: only the encoding is kept)."""
        return dict(json.loads(self.encoded[self.ends[i - 1] + 1 if i else 0:self.ends[i]]))


class WireHistory:
    """Per conversation (a request's `prompt_cache_key`), the previous request's history as encoded wire items, so
    a Step lowers and encodes only the messages that differ from the previous Step's (unchanged history messages are
    the same objects) and splices the rest in, byte for byte as `encode_body`.

    The protocol's `add_message(items, message)` (one message lowered onto the items so far) must only append items
    or change the last one, never both, and never earlier ones, and what it decides from the last item must not
    depend on what `as_sent(item)` (an item as sent, without changing it) changes. Use it from one thread."""

    def __init__(self, add_message: AddMessage, as_sent: AsSent = _as_is, max_conversations: int = 32) -> None:
        self.add_message = add_message
        self.as_sent = as_sent
        self.max_conversations = max_conversations
        self._lowered: OrderedDict[str, _Lowered] = OrderedDict()

    def encode(self, request: LLMRequest, build: Callable[[list[Any]], dict[str, Any]]) -> bytes:
        """`encode_body(build(items))`, `items` being `request.messages` lowered; `build` places the list it is
        given where the history goes and may put items of its own before it (a system message), not after."""
        key = request.prompt_cache_key
        if key is not None:
            head, mark, tail = encode_body(build([_HISTORY_MARK])).partition(_MARK_BYTES)
            if mark and _MARK_BYTES not in tail:
                encoded = self._encode_cached(key, request.messages)
                if encoded:
                    return b"".join((head, encoded, tail))
                return head[:-1] + tail if head.endswith(b",") else head + tail
        return encode_body(build(lower_history(request.messages, self.add_message, self.as_sent)))

    def _encode_cached(self, key: str, messages: list[LLMMessage]) -> bytearray:
        """The history items of conversation `key` encoded: the previous Step's encoding reused up to the first
        changed message, only the items from there lowered and encoded again."""
        lowered = self._lowered.pop(key, None) or _Lowered([], [], bytearray(), [])
        seen, starts, ends = lowered.messages, lowered.starts, lowered.ends
        # unchanged messages are the same objects (equal ones might still encode apart: 1 == 1.0)
        if all(map(operator.is_, messages, seen)):
            same = min(len(messages), len(seen))
        else:
            same = next(compress(count(), map(operator.is_not, messages, seen)))

        def end(i: int) -> int:  # how many items there were once messages[i] was lowered
            return starts[i + 1] if i + 1 < len(seen) else len(ends)

        # restart at the last unchanged message that began an item: every item before that one is final, since a
        # message added changes only the last item and that message did not change it
        restart = max(same - 1, 0)
        while restart > 0 and end(restart) == starts[restart]:
            restart -= 1
        final = starts[restart] if restart < len(seen) else 0
        context = [lowered.item(final - 1)] if final else []  # what adding that message looks at, and leaves alone
        work = list(context)
        del starts[restart:]
        for offset, message in enumerate(messages[restart:]):
            starts.append(final + len(work) - len(context))
            self.add_message(work, message)
            if offset == 0 and context and len(work) == len(context):
                return self._encode_cached(key, messages)  # it began none this time after all: lower all from nothing
        # the rest is changed in place (the state was taken out above): only what is new is encoded and copied
        del ends[final:]
        del lowered.encoded[ends[-1] if final else 0:]
        for item in work[len(context):]:
            if ends:
                lowered.encoded += b","
            lowered.encoded += _compact(self.as_sent(item))
            ends.append(len(lowered.encoded))
        lowered.messages = list(messages)
        self._lowered[key] = lowered
        while len(self._lowered) > self.max_conversations:
            self._lowered.popitem(last=False)
        return lowered.encoded


def with_compat_fields(body: dict[str, Any], compat: Mapping[str, Any]) -> dict[str, Any]:
    """Compatibility body fields pass through untouched; the adapter's own fields win over them."""
    return {**compat, **body} if compat else body


def wrap_system_update(text: str) -> str:
    """An Instruction Update for a protocol without a chronological instruction role: tagged user text."""
    return "<system-update>\n" + xml_escape(text) + "\n</system-update>"  # escapes &, < and >


# --- attachments ------------------------------------------------------------------------------------


def bytes_of(part: FilePart) -> bytes:
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


def is_remote(part: FilePart) -> bool:
    return part.data is None and urllib.parse.urlsplit(part.uri).scheme in ("http", "https")


def file_label(part: FilePart) -> str:
    return part.name or urllib.parse.unquote(urllib.parse.urlsplit(part.uri).path.rsplit("/", 1)[-1]) or "file"


def base64_of(part: FilePart) -> str:
    return base64.b64encode(bytes_of(part)).decode("ascii")


def data_url(part: FilePart) -> str:
    """A `data:` URL for the attachment (the URI itself when it already is one and nothing was loaded)."""
    if part.data is None and part.uri.startswith("data:"):
        return part.uri
    return f"data:{part.mime};base64," + base64_of(part)


def text_file(part: FilePart) -> str:
    """A text attachment inlined for the model (a remote one is named, not fetched)."""
    label = file_label(part)
    if is_remote(part):
        return f"[Attached file {label} ({part.mime}) at {part.uri}]"
    return f"[Attached file {label} ({part.mime})]\n" + bytes_of(part).decode("utf-8", errors="replace")


def is_text_mime(mime: str) -> bool:
    mime = mime.lower()
    return mime.startswith("text/") or mime == "application/json"


def lower_file(part: FilePart, lower: Callable[[FilePart], dict[str, Any]],
               text_block: Callable[[str], dict[str, Any]]) -> dict[str, Any]:
    """One attachment in the protocol's shape; one that cannot be read becomes a note to the model instead of
    failing the whole Step."""
    try:
        return lower(part)
    except ValueError as exc:
        return text_block(f"[Attached file {file_label(part)} could not be read: {exc}]")


def unshowable(part: FilePart) -> str:
    return f"[Attached file {file_label(part)} ({part.mime}) cannot be shown to this model]"


# --- sending and reading -------------------------------------------------------------------------------


class StreamDecoder(Protocol):
    """Stateful translation of one protocol's typed stream items into provider-neutral events."""

    def feed(self, item: Any) -> Iterable[StreamEvent]: ...

    def end(self) -> Iterable[StreamEvent]: ...


async def post_stream(client: Any, path: str, body: bytes, *, cast_to: Any, stream_cls: Any,
                      sdk: SDKErrors, base_url: str, headers: Mapping[str, Any] | None = None) -> Any:
    """Send a prebuilt body through the SDK's own request path (its auth, headers, error classes and typed stream),
    as `content`, so the SDK never walks it."""
    options: dict[str, Any] = {"headers": {**JSON_HEADERS, **(headers or {})}}
    try:
        return await client.post(path, content=body, cast_to=cast_to, options=options, stream=True,
                                 stream_cls=stream_cls)
    except sdk.failures as exc:
        raise map_exception(exc, sdk, base_url=base_url) from exc


async def read_stream(stream: Any, decoder: StreamDecoder, sdk: SDKErrors) -> AsyncIterator[StreamEvent]:
    """The decoder's events for every item of an SDK stream; closes the stream whatever ends the reading."""
    iterator = stream.__aiter__()
    try:
        while True:
            try:
                item = await iterator.__anext__()
            except StopAsyncIteration:
                break
            except sdk.failures as exc:
                raise map_exception(exc, sdk, started=True) from exc
            try:
                events = decoder.feed(item)
            except ProviderError:
                raise
            except (AttributeError, TypeError, ValueError, KeyError) as exc:
                raise InvalidProviderOutputError(f"The provider sent an unreadable stream item: {exc}") from exc
            for event in events:
                yield event
        for event in decoder.end():
            yield event
    finally:
        try:
            await stream.close()
        except Exception:
            # Closing a broken connection can fail again; the original outcome already stands.
            pass


class SDKAdapter:
    """What every adapter does the same way: build the body once, send it through its SDK client's `post` (with the
    Authorization header left out for a keyless local server) and later bodies in the request that `post` built,
    and read the SDK's stream through its decoder. Each `stream` call is exactly one HTTP request; a shared HTTP
    client is closed by whoever passed it.

    The stream is the SDK's own (`AsyncStream[object]`: its SSE decoding, `[DONE]`, in-stream error events raised
    as its error classes, connection reuse), but each item stays the JSON it arrived in: building the SDK's typed
    model of every chunk cost about 0.2 ms per chunk on the event loop (107 ms of CPU for a 500-chunk answer, 19 ms
    without), and the decoders read fields the same way from either (`field_of`)."""

    path: ClassVar[str]
    cast_to: ClassVar[Any]
    stream_cls: ClassVar[Any]
    sdk: ClassVar[SDKErrors]
    omit: ClassVar[Any]  # the SDK's marker that removes a default header

    def __init__(self, base_url: str, client: Any, *, keyless_header: str | None, owns_http: bool) -> None:
        self.base_url = base_url.rstrip("/")
        self._client = client
        self._keyless_header = keyless_header  # the credential header to leave out, for a server without a key
        self._owns_http = owns_http
        self._first: httpx2.Request | None = None  # the SDK's first request: later ones send their body in it

    def __repr__(self) -> str:
        return f"{type(self).__name__}(base_url={self.base_url!r})"

    async def aclose(self) -> None:
        if self._owns_http:
            await self._client.close()

    def build_body(self, request: LLMRequest) -> dict[str, Any]:
        raise NotImplementedError

    def encode_request(self, request: LLMRequest) -> bytes:
        """The body as sent: `build_body` encoded (adapters with a `WireHistory` reuse the previous Step's)."""
        return encode_body(self.build_body(request))

    def decoder(self) -> StreamDecoder:
        raise NotImplementedError

    async def stream(self, request: LLMRequest, body: bytes | None = None) -> AsyncIterator[StreamEvent]:
        """One call with `request`, sent as `body` when the caller encoded it already (`encode_request`)."""
        if body is None:
            body = self.encode_request(request)
        if self._first is not None:
            items = await self._send_again(self._first, body)
        else:
            headers = {self._keyless_header: self.omit()} if self._keyless_header else None
            items = await post_stream(self._client, self.path, body, cast_to=self.cast_to,
                                      stream_cls=self.stream_cls, sdk=self.sdk, base_url=self.base_url,
                                      headers=headers)
            # an auth flow signs every request, and an SDK release compat was not tested with keeps its private
            # names to itself: those requests keep to the SDK's path
            if self._client.custom_auth is None and can_resend(self._client):
                self._first = items.response.request
        async for event in read_stream(items, self.decoder(), self.sdk):
            yield event

    async def _send_again(self, first: httpx2.Request, body: bytes) -> Any:
        """`body` sent as the SDK sent its first request (URL, headers with the key, timeouts), on the same HTTP
        client, skipping the SDK's per-request work (~0.5 ms a Step: options models, header merging, auth hooks
        that a static key does not need). Failures are raised as the SDK's `post` raises them, then mapped."""
        http = sdk_http_client(self._client)
        headers = [(k, v) for k, v in first.headers.raw if k.lower() not in _PER_REQUEST_HEADERS]
        sent = http.build_request(first.method, first.url, headers=headers, content=body,
                                  extensions=dict(first.extensions))
        try:
            try:
                response = await http.send(sent, stream=True)
            except httpx2.TimeoutException as exc:
                raise cast(Any, self.sdk.timeout)(request=sent) from exc
            except (httpx2.RequestError, ssl.SSLError, anyio.EndOfStream) as exc:
                raise cast(Any, self.sdk.connection)(request=sent) from exc
            if not response.is_success:
                await response.aread()
                raise sdk_status_error(self._client, response) from None
        except self.sdk.failures as exc:
            raise map_exception(exc, self.sdk, base_url=self.base_url) from exc
        return sdk_stream(self.stream_cls, self._client, response)


class Blocks:
    """Text and reasoning blocks of one stream: at most one is open at a time (opening another closes it), and a
    delta for a block that is not open opens it."""

    def __init__(self) -> None:
        self.open_block: tuple[str, str] | None = None  # (kind, id)

    def close(self, metadata: dict[str, Any] | None = None) -> list[StreamEvent]:
        if self.open_block is None:
            return []
        kind, block_id = self.open_block
        self.open_block = None
        return [TextEnd(block_id) if kind == "text" else ReasoningEnd(block_id, metadata)]

    def start(self, kind: str, block_id: str) -> list[StreamEvent]:
        if self.open_block == (kind, block_id):
            return []
        out = self.close()
        self.open_block = (kind, block_id)
        out.append(TextStart(block_id) if kind == "text" else ReasoningStart(block_id))
        return out

    def delta(self, kind: str, block_id: str, text: str) -> list[StreamEvent]:
        if not text:
            return []
        out = self.start(kind, block_id)
        out.append(TextDelta(block_id, text) if kind == "text" else ReasoningDelta(block_id, text))
        return out

    def end(self, block_id: str, metadata: dict[str, Any] | None = None) -> list[StreamEvent]:
        """Close `block_id` if it is the open block."""
        if self.open_block is None or self.open_block[1] != block_id:
            return []
        return self.close(metadata)


def field_of(obj: Any, name: str) -> Any:
    """A field of a stream item whether the SDK parsed it into a model, left it a dict, or omitted it; vendor
    extensions (`reasoning_content`, say) exist only as model extras."""
    if obj is None:
        return None
    if isinstance(obj, Mapping):
        return obj.get(name)
    return getattr(obj, name, None)


def plain_data(obj: Any) -> Any:
    """A stream item (or a list of them) as plain JSON data, for storing it as the provider sent it."""
    if isinstance(obj, list):
        return [plain_data(o) for o in obj]
    dump = getattr(obj, "model_dump", None)
    return dump(mode="json", exclude_none=True) if dump is not None else obj


def int_of(value: Any) -> int:
    if isinstance(value, bool):
        return 0
    if isinstance(value, (int, float)):
        return int(value)
    return 0


__all__ = [
    "AddMessage",
    "AsSent",
    "Blocks",
    "DEFAULT_TIMEOUT",
    "SDKAdapter",
    "StreamDecoder",
    "WireHistory",
    "base64_of",
    "bytes_of",
    "data_url",
    "encode_body",
    "field_of",
    "file_label",
    "int_of",
    "is_remote",
    "is_text_mime",
    "lower_file",
    "lower_history",
    "plain_data",
    "post_stream",
    "read_stream",
    "text_file",
    "unshowable",
    "with_compat_fields",
    "wrap_system_update",
]
