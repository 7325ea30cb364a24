"""The client runtime the generated methods call: request encoding, response decoding, error mapping, Page.

Cancellation is ordinary Python task cancellation: cancel the awaiting task (or leave an anyio/asyncio
timeout scope) and the in-flight request is abandoned and its connection released.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Generic, Self, TypeVar
from urllib.parse import quote

import httpx2
from pydantic import TypeAdapter, ValidationError

from opencode_session.protocol.api import endpoint
from opencode_session.protocol.endpoint import BYTES_CONTENT_TYPE, SSE_CONTENT_TYPE, Endpoint, encode_query
from opencode_session.schema.base import wire
from opencode_session.schema.errors import TaggedError

from .errors import ClientError
from .sse import EventStream
from .transport import http_transport
from .websocket import WebSocketChannel, WebSocketConnector, WebSocketRefused, WebSocketSession, network_websocket

T = TypeVar("T")


@dataclass(frozen=True)
class CallOptions:
    """Per-call transport options; never part of an operation's domain input.

    `headers` override the client's headers for this call; `timeout` (seconds) overrides its timeout. Waiting and
    streaming operations (`session.wait`, every event stream) have no read timeout unless this sets one.
    """

    headers: Mapping[str, str] | None = None
    timeout: float | None = None


@dataclass
class Page(Generic[T]):
    """A bounded, ordered slice of a list with opaque cursors to the neighbouring slices of the same query: both
    are set whenever the slice has items (at an edge they lead to an empty slice), neither when it is empty."""

    items: list[T]
    previous: str | None = None
    next: str | None = None


@dataclass
class _Codec:
    """What the runtime needs per operation, built on first use and kept."""

    endpoint: Endpoint
    response: TypeAdapter[Any] | None = None
    item: TypeAdapter[Any] | None = None
    body_required: frozenset[str] = field(default_factory=frozenset)


_codecs: dict[str, _Codec] = {}


def _codec(operation_id: str) -> _Codec:
    codec = _codecs.get(operation_id)
    if codec is None:
        ep = endpoint(operation_id)
        codec = _Codec(
            endpoint=ep,
            response=TypeAdapter(ep.response_model) if ep.response_model is not None else None,
            item=TypeAdapter(ep.stream.item) if ep.stream is not None else None,
            body_required=frozenset(
                (info.alias or name)
                for name, info in (ep.body.model_fields.items() if ep.body else ())
                if info.is_required()
            ),
        )
        _codecs[operation_id] = codec
    return codec


def _json(response: httpx2.Response) -> Any:
    try:
        return json.loads(response.content)
    except ValueError as exc:
        raise ClientError(
            "MalformedResponse", "the response body is not JSON", status=response.status_code, cause=exc
        ) from exc


def _failure(ep: Endpoint, response: httpx2.Response) -> Exception:
    """The exception for a non-success response: the declared TaggedError it carries, or a ClientError."""
    return _failure_of(ep, response.status_code, response.content)


def _failure_of(ep: Endpoint, status: int, content: bytes) -> Exception:
    declared = {e.__name__: e for e in ep.errors_for(status)}
    if not declared:
        return ClientError("UnexpectedStatus", status=status)
    try:
        body = json.loads(content)
    except ValueError as exc:
        return ClientError("UnexpectedStatus", "the error body is not JSON", status=status, cause=exc)
    tag = body.get("_tag") if isinstance(body, dict) else None
    error = declared.get(tag) if isinstance(tag, str) else None
    if error is None:
        return ClientError("UnexpectedStatus", f"no declared error for this status is tagged {tag!r}", status=status)
    try:
        error.body_model.model_validate(body, extra="ignore")
    except ValidationError as exc:
        return ClientError("MalformedResponse", f"the {tag} body is invalid", status=status, cause=exc)
    return TaggedError.from_body(body)


class BaseClient:
    """Connection settings and the request machinery; constructing one is synchronous and sends nothing.

    `headers` go on every request (per-call `CallOptions.headers` win), `auth` is HTTP basic
    `(username, password)`, `transport` replaces the network (e.g. `httpx2.ASGITransport(app)`; by default
    connections are not capped, since every open event stream holds one), and `timeout` is in seconds (for reads,
    only of operations that answer at once). Use `async with` or `await aclose()` to release connections.
    """

    def __init__(
        self,
        base_url: str,
        *,
        headers: Mapping[str, str] | None = None,
        auth: tuple[str, str] | None = None,
        transport: httpx2.AsyncBaseTransport | None = None,
        timeout: float = 30,
        websocket: WebSocketConnector | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._websocket_connector = websocket or network_websocket
        self._headers = dict(headers or {})
        self._auth = auth
        self._transport = transport
        self._timeout = timeout
        self._http: httpx2.AsyncClient | None = None
        self._closed = False

    # --- connection ------------------------------------------------------------------------------

    def _client(self) -> httpx2.AsyncClient:
        if self._closed:
            raise ClientError("Transport", "the client is closed")
        if self._http is None:
            self._http = httpx2.AsyncClient(
                headers=self._headers,
                auth=httpx2.BasicAuth(*self._auth) if self._auth else None,
                transport=self._transport or http_transport(),
                timeout=self._timeout,
            )
        return self._http

    async def aclose(self) -> None:
        self._closed = True
        http, self._http = self._http, None
        if http is not None:
            await http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    # --- encoding --------------------------------------------------------------------------------

    def _request(
        self,
        codec: _Codec,
        path: Mapping[str, Any] | None,
        query: Mapping[str, Any] | None,
        body: Mapping[str, Any] | None,
        options: CallOptions | None,
        accept: str,
    ) -> httpx2.Request:
        ep = codec.endpoint
        encoded: dict[str, str] = {}
        for name, value in (path or {}).items():
            if value is None:
                raise ValueError(f"{ep.operation_id}: path parameter {name} is required")
            encoded[name] = _wildcard(str(value)) if name == ep.wildcard else quote(str(value), safe="")
        headers = httpx2.Headers({"Accept": accept})
        if options is not None and options.headers:
            headers.update(options.headers)  # case-insensitive: a caller's "accept" replaces ours
        kwargs: dict[str, Any] = {}
        if ep.body is not None:
            kwargs["json"] = {
                k: wire(v) for k, v in (body or {}).items() if v is not None or k in codec.body_required
            }
        if options is not None and options.timeout is not None:
            kwargs["timeout"] = options.timeout
        elif ep.waits or ep.stream is not None:
            # their answer takes as long as the session does: only connecting and sending stay bounded
            kwargs["timeout"] = httpx2.Timeout(self._timeout, read=None)
        return self._client().build_request(
            ep.method,
            self.base_url + ep.wire_path(encoded),
            params=tuple(encode_query(query or {})),  # a tuple: httpx2 takes wider item types than ours
            headers=headers,
            **kwargs,
        )

    async def _send(self, request: httpx2.Request, *, stream: bool) -> httpx2.Response:
        try:
            return await self._client().send(request, stream=stream)
        except httpx2.RequestError as exc:
            raise ClientError("Transport", f"{type(exc).__name__}: {exc}", cause=exc) from exc

    # --- operations ------------------------------------------------------------------------------

    async def _call(
        self,
        operation_id: str,
        *,
        path: Mapping[str, Any] | None = None,
        query: Mapping[str, Any] | None = None,
        body: Mapping[str, Any] | None = None,
        options: CallOptions | None = None,
    ) -> Any:
        """Send one non-streaming operation and return its decoded result."""
        codec = _codec(operation_id)
        ep = codec.endpoint
        kind = ep.result_kind
        accept = f"{BYTES_CONTENT_TYPE}, application/json" if kind == "bytes" else "application/json"
        request = self._request(codec, path, query, body, options, accept)
        response = await self._send(request, stream=False)
        if response.status_code != ep.success_status:
            raise _failure(ep, response)
        if kind == "none":
            return None
        if kind == "bytes":
            return response.content
        assert codec.response is not None
        try:
            # newer servers may add fields: ignore what this client does not know (forward compatibility)
            value = codec.response.validate_python(_json(response), extra="ignore")
        except ValidationError as exc:
            raise ClientError(
                "MalformedResponse",
                f"the response does not match {ep.operation_id}: {exc}",
                status=response.status_code,
                cause=exc,
            ) from exc
        if kind == "data":
            return value.data
        if kind == "page":
            return Page(items=list(value.data), previous=value.cursor.previous, next=value.cursor.next)
        return value

    def _stream(
        self,
        operation_id: str,
        *,
        path: Mapping[str, Any] | None = None,
        query: Mapping[str, Any] | None = None,
        body: Mapping[str, Any] | None = None,
        options: CallOptions | None = None,
    ) -> EventStream[Any]:
        """A lazy EventStream for one streaming operation; the request is sent on its first `__anext__`."""
        codec = _codec(operation_id)
        ep = codec.endpoint

        async def connect() -> httpx2.Response:
            request = self._request(codec, path, query, body, options, SSE_CONTENT_TYPE)
            response = await self._send(request, stream=True)
            try:
                if response.status_code != ep.success_status:
                    await response.aread()
                    raise _failure(ep, response)
                content_type = response.headers.get("content-type", "")
                if content_type.split(";")[0].strip().lower() != SSE_CONTENT_TYPE:
                    raise ClientError(
                        "UnsupportedContentType",
                        f"expected {SSE_CONTENT_TYPE}, got {content_type or 'no content type'}",
                        status=response.status_code,
                    )
            except httpx2.RequestError as exc:
                await response.aclose()
                raise ClientError("Transport", f"{type(exc).__name__}: {exc}", cause=exc) from exc
            except BaseException:
                await response.aclose()
                raise
            return response

        assert codec.item is not None
        assert ep.stream is not None
        endless = ep.stream.endless
        if isinstance(endless, str):
            endless = bool((query or {}).get(endless))
        return EventStream(connect, codec.item, endless=endless)

    def _websocket(
        self,
        operation_id: str,
        *,
        path: Mapping[str, Any] | None = None,
        query: Mapping[str, Any] | None = None,
        options: CallOptions | None = None,
    ) -> WebSocketSession:
        """A lazy WebSocketSession for one WebSocket operation; the upgrade is sent when it opens."""
        codec = _codec(operation_id)
        ep = codec.endpoint

        async def connect() -> WebSocketChannel:
            request = self._request(codec, path, query, None, options, "*/*")
            url = str(request.url)
            url = ("wss" if url.startswith("https:") else "ws") + url[url.index(":"):]
            headers = [(k, v) for k, v in request.headers.items() if k.lower() not in _NOT_FORWARDED]
            if self._auth is not None:  # httpx2 applies auth while sending, which a WebSocket does not go through
                token = base64.b64encode(f"{self._auth[0]}:{self._auth[1]}".encode()).decode("ascii")
                headers.append(("Authorization", f"Basic {token}"))
            timeout = options.timeout if options is not None and options.timeout is not None else self._timeout
            try:
                return await self._websocket_connector(url, headers, timeout)
            except WebSocketRefused as refused:
                raise _failure_of(ep, refused.status, refused.body) from None

        return WebSocketSession(connect)


def _wildcard(value: str) -> str:
    """A path that keeps its slashes, each segment encoded; `.` and `..` as %2E so that no URL normalization
    removes them before the server resolves them (against the Location, where it refuses what leaves it)."""
    return "/".join(segment.replace(".", "%2E") if segment in (".", "..") else quote(segment, safe="")
                    for segment in value.split("/"))


# Headers an HTTP request carries that a WebSocket upgrade sets for itself.
_NOT_FORWARDED = frozenset({"host", "accept", "accept-encoding", "connection", "content-length", "user-agent"})
