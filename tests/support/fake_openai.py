"""A loopback HTTP server speaking the streaming wire protocols of OpenAI Chat Completions, OpenAI Responses and
Anthropic Messages (Starlette on uvicorn in a background thread) that replays scripted responses from one queue and
records every request it receives. Session title requests are answered apart (with `title`), and compaction summary
requests from their own script (`summaries`, else a valid summary), so that scripts stay in step with the Session's
own Steps. With `context_window` set it behaves like a model with that window: a request whose prompt (measured
independently of the runtime, as a quarter token per character of its JSON messages and tools) plus `max_tokens` does
not fit is refused with a context-length error, and every answer reports that prompt size as its usage. With `keys`
set it authenticates as the real services do, each protocol in its own scheme (`Authorization: Bearer` for the OpenAI
protocols, `x-api-key` with `anthropic-version` for Messages), refusing anything else with 401. Like the real Responses
API it keeps no output items unless a request asks for `store` (the API's default), and refuses an input item that
names an ID it does not hold, or a call output without its call."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import json
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import anyio
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.routing import Route

from opencode_session.core.compaction.render import SUMMARY_SYSTEM
from opencode_session.core.execution.title import TITLE_SYSTEM

DEFAULT_MODEL = "fake-model"
SUMMARY = "## Objective\n- Keep going with the scripted task.\n\n## Next Move\n- Continue."


# ---------------------------------------------------------------------------------------------
# Scripts: what the server answers to the next request.


@dataclass
class StreamScript:
    """A 200 `text/event-stream` answer: each frame is sent as `data: <frame>\\n\\n` (an `(event, data)` pair also
    gets an `event:` line), then `data: [DONE]` unless `done` is False. With `drop_after=N` the connection is closed
    after N frames, mid-body."""

    frames: list[str | tuple[str, str]]
    drop_after: int | None = None
    done: bool = True
    # with hold_after=N the answer pauses after N frames: `held` is set, and it resumes when `release` is set
    # (or ends when the client goes away)
    hold_after: int | None = None
    held: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)


@dataclass
class ErrorScript:
    status: int
    body: Any
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class DropScript:
    """Close the connection before sending a single byte of response."""


Script = StreamScript | ErrorScript | DropScript


def text_deltas(*pieces: str) -> list[dict[str, Any]]:
    return [{"content": p} for p in pieces]


def reasoning_deltas(*pieces: str, field: str = "reasoning_content") -> list[dict[str, Any]]:
    return [{field: p} for p in pieces]


def tool_call_deltas(index: int, call_id: str, name: str, *argument_pieces: str) -> list[dict[str, Any]]:
    """A tool call the way OpenAI streams it: id and name first, then the arguments in pieces."""
    first = {"tool_calls": [{"index": index, "id": call_id, "type": "function",
                             "function": {"name": name, "arguments": ""}}]}
    rest = [{"tool_calls": [{"index": index, "function": {"arguments": piece}}]} for piece in argument_pieces]
    return [first, *rest]


def usage_block(
    prompt_tokens: int, completion_tokens: int, *, cached_tokens: int = 0, reasoning_tokens: int = 0
) -> dict[str, Any]:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "prompt_tokens_details": {"cached_tokens": cached_tokens},
        "completion_tokens_details": {"reasoning_tokens": reasoning_tokens},
    }


def chunk(
    delta: dict[str, Any] | None = None,
    *,
    finish_reason: str | None = None,
    usage: dict[str, Any] | None = None,
    model: str = DEFAULT_MODEL,
    with_choice: bool = True,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": model,
        "choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish_reason}] if with_choice else [],
    }
    if usage is not None:
        body["usage"] = usage
    return body


def completion(
    *deltas: dict[str, Any] | list[dict[str, Any]],
    finish_reason: str | None = "stop",
    usage: dict[str, Any] | None = None,
    drop_after: int | None = None,
    done: bool = True,
    model: str = DEFAULT_MODEL,
    hold_after: int | None = None,
) -> StreamScript:
    """A streamed completion: one chunk per delta, a finish chunk, then (OpenAI style) a separate
    usage chunk with no choices."""
    flat: list[dict[str, Any]] = []
    for d in deltas:
        flat.extend(d if isinstance(d, list) else [d])
    chunks = [chunk({"role": "assistant", "content": ""}, model=model)]
    chunks += [chunk(d, model=model) for d in flat]
    if finish_reason is not None:
        chunks.append(chunk({}, finish_reason=finish_reason, model=model))
    if usage is not None:
        chunks.append(chunk(usage=usage, model=model, with_choice=False))
    return StreamScript([json.dumps(c) for c in chunks], drop_after=drop_after, done=done, hold_after=hold_after)


def raw_stream(*frames: str, drop_after: int | None = None, done: bool = True) -> StreamScript:
    return StreamScript(list(frames), drop_after=drop_after, done=done)


def error(
    status: int,
    message: str,
    *,
    type: str | None = None,  # noqa: A002 - mirrors the wire field
    code: str | None = None,
    headers: dict[str, str] | None = None,
) -> ErrorScript:
    return ErrorScript(
        status, {"error": {"message": message, "type": type, "param": None, "code": code}}, dict(headers or {})
    )


def drop() -> DropScript:
    return DropScript()


# ---------------------------------------------------------------------------------------------
# The server.


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    json: Any
    raw: bytes = b""  # the body exactly as it arrived


class _Uvicorn(uvicorn.Server):
    """Announces readiness through an event once the listening socket is serving."""

    def __init__(self, config: uvicorn.Config, ready: threading.Event) -> None:
        super().__init__(config)
        self._ready = ready

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        self._ready.set()


class FakeOpenAI:
    """`async with FakeOpenAI() as server:` then `server.enqueue(...)`, point a client at
    `server.base_url`, and inspect `server.requests` afterwards."""

    def __init__(self) -> None:
        self.requests: list[RecordedRequest] = []
        self.title = "Scripted title"
        self.title_requests: list[RecordedRequest] = []
        self._script: collections.deque[Script] = collections.deque()
        self._lock = threading.Lock()
        self._ready = threading.Event()
        self._thread: threading.Thread | None = None
        self._server: _Uvicorn | None = None
        self._failure: BaseException | None = None
        self.base_url = ""
        # the answer to a request when nothing is scripted (None: a 500 that says so)
        self.fallback: Script | None = None
        # (does this request's payload match, the answer): the first match answers it, before the queue; for
        # requests whose order is not known (sessions running at once)
        self.routes: list[tuple[Callable[[Any], bool], Script]] = []
        self.summaries: collections.deque[Script] = collections.deque()
        self.summary_requests: list[RecordedRequest] = []
        self.context_window: int | None = None
        self.prompt_tokens: list[int] = []  # the measured prompt of every step and summary request, in order
        self.overflows = 0
        self.keys: set[str] | None = None  # the API keys it accepts (None: it checks none)
        self.refused: list[RecordedRequest] = []  # requests answered 401 or 400 before any script was used
        self._stored: set[str] = set()  # Responses output item IDs kept for later requests (`store`)
        self.app = Starlette(
            routes=[
                Route("/v1/chat/completions", self._chat_completions, methods=["POST"]),
                Route("/v1/responses", self._chat_completions, methods=["POST"]),
                Route("/v1/messages", self._chat_completions, methods=["POST"]),
                Route("/{path:path}", self._not_found, methods=["GET", "POST", "PUT", "DELETE"]),
            ]
        )

    # -- scripting ---------------------------------------------------------------------------

    def enqueue(self, *scripts: Script) -> None:
        with self._lock:
            self._script.extend(scripts)

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._script) + len(self.routes)

    def release_held(self) -> None:
        """Let every still-queued answer that would hold go on at once (teardown: no handler may wait forever)."""
        with self._lock:
            for script in [*self._script, *(script for _matches, script in self.routes)]:
                if isinstance(script, StreamScript):
                    script.release.set()

    # -- lifecycle ---------------------------------------------------------------------------

    @classmethod
    @contextlib.contextmanager
    def running(cls) -> Iterator[FakeOpenAI]:
        """A started server, stopped on exit (for synchronous, e.g. module-scoped, fixtures)."""
        server = cls()
        server.start()
        try:
            yield server
        finally:
            server.stop()

    def serve_config(self, models: dict[str, Any], **extra: Any) -> dict[str, Any]:
        """An opencode.json declaring provider `loop` at this server with `models`, plus `extra` top-level keys."""
        return {**extra, "provider": {"loop": {"npm": "@ai-sdk/openai-compatible",
                                               "options": {"baseURL": self.base_url, "apiKey": "test-key"},
                                               "models": models}}}

    def start(self) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # no Nagle delay on small SSE frames (asyncio also sets this on every accepted connection)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        config = uvicorn.Config(
            self.app,
            lifespan="off",
            log_config=None,
            log_level="warning",
            access_log=False,
            http="h11",
            timeout_graceful_shutdown=2,
        )
        self._server = _Uvicorn(config, self._ready)
        self._thread = threading.Thread(target=self._run, args=(sock,), name="fake-openai", daemon=True)
        self._thread.start()
        self.base_url = f"http://127.0.0.1:{port}/v1"

    def _run(self, sock: socket.socket) -> None:
        assert self._server is not None
        try:
            asyncio.run(self._server.serve(sockets=[sock]))
        except BaseException as exc:  # uvicorn reports startup failure with SystemExit
            self._failure = exc
        finally:
            sock.close()
            self._ready.set()  # never leave a waiter hanging if startup failed

    def _check_started(self) -> None:
        if self._failure is not None or self._server is None or not self._server.started:
            raise RuntimeError(f"FakeOpenAI failed to start: {self._failure!r}")

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join()

    async def __aenter__(self) -> FakeOpenAI:
        self.start()
        await anyio.to_thread.run_sync(self._ready.wait)
        self._check_started()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            await anyio.to_thread.run_sync(self._thread.join)

    # -- handlers ----------------------------------------------------------------------------

    async def _not_found(self, request: Request) -> Any:
        return _JSONAnswer(404, {"error": {"message": f"no route {request.url.path}", "type": "not_found"}})

    async def _chat_completions(self, request: Request) -> Any:
        raw = await request.body()
        try:
            payload: Any = json.loads(raw)
        except ValueError:
            payload = raw.decode("utf-8", errors="replace")
        recorded = RecordedRequest(request.method, request.url.path,
                                   {k.lower(): v for k, v in request.headers.items()}, payload, raw)
        refusal = self._unauthorized(recorded) or self._unknown_items(recorded)
        if refusal is not None:
            with self._lock:
                self.refused.append(recorded)
            return refusal
        if _is_title_request(payload):
            with self._lock:
                self.title_requests.append(recorded)
            return _ScriptedAnswer(self, _title_answer(request.url.path, self.title))
        summary = _first_message_is(payload, SUMMARY_SYSTEM)
        with self._lock:
            measured = prompt_tokens(payload)
            self.prompt_tokens.append(measured)
            if summary:
                self.summary_requests.append(recorded)
                script = self.summaries.popleft() if self.summaries else completion(text_deltas(SUMMARY))
            else:
                self.requests.append(recorded)
                routed = next((i for i, (matches, _) in enumerate(self.routes) if matches(payload)), None)
                if routed is not None:
                    script = self.routes.pop(routed)[1]
                else:
                    script = self._script.popleft() if self._script else self.fallback
            window = self.context_window
            if window is not None and measured + int(payload.get("max_tokens") or 0) > window:
                self.overflows += 1
                script = error(400, f"This model's maximum context length is {window} tokens",
                               type="invalid_request_error", code="context_length_exceeded")
        if script is None:
            return _JSONAnswer(500, {"error": {"message": "FakeOpenAI has no scripted response left", "type": "fake"}})
        if isinstance(script, ErrorScript):
            return _JSONAnswer(script.status, script.body, script.headers)
        if window is not None and isinstance(script, StreamScript):
            usage = chunk(usage=usage_block(measured, 10), with_choice=False)
            script = dataclasses.replace(script, frames=[*script.frames, json.dumps(usage)])
        if isinstance(script, StreamScript) and _stores_items(recorded):
            self._stored.update(_output_item_ids(script))  # only the server's thread reads and writes it
        return _ScriptedAnswer(self, script)

    def _unauthorized(self, request: RecordedRequest) -> _JSONAnswer | None:
        """The 401 a real service answers a request whose key is missing, wrong or sent in another scheme."""
        if self.keys is None:
            return None
        headers = request.headers
        if request.path.endswith("/messages"):
            if headers.get("x-api-key") in self.keys and headers.get("anthropic-version"):
                return None
            return _JSONAnswer(401, {"type": "error", "error": {"type": "authentication_error",
                                                                "message": "invalid x-api-key"}})
        scheme, _, key = headers.get("authorization", "").partition(" ")
        if scheme == "Bearer" and key in self.keys:
            return None
        return _JSONAnswer(401, {"error": {"message": "Incorrect API key provided.", "type": "invalid_request_error",
                                           "param": None, "code": "invalid_api_key"}})

    def _unknown_items(self, request: RecordedRequest) -> _JSONAnswer | None:
        """The 400 the Responses API answers an input item naming an ID it does not hold (with `store: false` it
        holds none), or a call output whose call is not in the input."""
        if not request.path.endswith("/responses") or not isinstance(request.json, dict):
            return None
        items = [i for i in request.json.get("input") or () if isinstance(i, dict)]
        calls = {i.get("call_id") for i in items if i.get("type") == "function_call"}
        for item in items:
            item_id = item.get("id")
            if item_id is not None and item_id not in self._stored:
                message = f"Item with id '{item_id}' not found."
                if request.json.get("store") is False:
                    message += (" Items are not persisted when `store` is set to false. Try again with `store` set"
                                " to true, or remove this item from your input.")
                return _JSONAnswer(400, {"error": {"message": message, "type": "invalid_request_error",
                                                   "param": "input", "code": None}})
            if item.get("type") == "function_call_output" and item.get("call_id") not in calls:
                return _JSONAnswer(400, {"error": {
                    "message": f"No tool call found for function call output with call_id {item.get('call_id')}.",
                    "type": "invalid_request_error", "param": "input", "code": None}})
        return None

    def _connection_for(self, scope: dict[str, Any]) -> Any:
        assert self._server is not None
        client = tuple(scope.get("client") or ())
        for connection in list(self._server.server_state.connections):
            if getattr(connection, "client", None) == client:
                return connection
        raise RuntimeError(f"no live connection for client {client}")


def _first_message_is(payload: Any, system: str) -> bool:
    """Whether the request's system text is `system`, in whichever of the three protocols it speaks."""
    if not isinstance(payload, dict):
        return False
    if payload.get("instructions") == system:  # Responses
        return True
    head = payload.get("system")
    if isinstance(head, list) and head and isinstance(head[0], dict):  # Messages
        return head[0].get("text") == system
    messages = payload.get("messages")
    return bool(messages) and isinstance(messages[0], dict) and messages[0].get("content") == system


def _stores_items(request: RecordedRequest) -> bool:
    """A Responses request that asks for its output to be kept (the API's default)."""
    return request.path.endswith("/responses") and isinstance(request.json, dict) and \
        request.json.get("store", True) is not False


def _output_item_ids(script: StreamScript) -> set[str]:
    ids = set()
    for frame in script.frames:
        try:
            event = json.loads(frame[1] if isinstance(frame, tuple) else frame)
        except ValueError:
            continue
        item = event.get("item") if isinstance(event, dict) else None
        if event.get("type") == "response.output_item.done" and isinstance(item, dict) and item.get("id"):
            ids.add(item["id"])
    return ids


def _is_title_request(payload: Any) -> bool:
    return _first_message_is(payload, TITLE_SYSTEM)


def prompt_tokens(payload: Any) -> int:
    """The fake's own measure of a request's prompt: a quarter token per character of its messages and tools."""
    if not isinstance(payload, dict):
        return 0
    return len(json.dumps([payload.get("messages"), payload.get("tools")], ensure_ascii=False)) // 4


def _title_answer(path: str, title: str) -> StreamScript:
    from . import fake_wire  # the other protocols' builders, which use this module's scripts

    if path.endswith("/responses"):
        return fake_wire.responses(fake_wire.r_text(title))
    if path.endswith("/messages"):
        return fake_wire.messages(fake_wire.m_text(title))
    return completion(text_deltas(title))


class _JSONAnswer:
    def __init__(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        self.status = status
        self.body = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.headers = headers or {}

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(self.body)).encode())]
        headers += [(k.lower().encode(), str(v).encode()) for k, v in self.headers.items()]
        await send({"type": "http.response.start", "status": self.status, "headers": headers})
        await send({"type": "http.response.body", "body": self.body, "more_body": False})


class _ScriptedAnswer:
    """Streams or drops at the socket level so the client sees a real broken connection."""

    def __init__(self, server: FakeOpenAI, script: StreamScript | DropScript) -> None:
        self.server = server
        self.script = script

    async def _drop(self, scope: dict[str, Any], receive: Any) -> None:
        # close() (not abort()) flushes what was already written, then sends FIN mid-body.
        self.server._connection_for(scope).transport.close()
        # Returning before uvicorn notices the disconnect would make it answer 500 on a dead socket.
        while (await receive())["type"] != "http.disconnect":
            pass

    async def _hold(self, receive: Any) -> bool:
        """Pause until released (True) or until the client disconnects (False)."""
        assert isinstance(self.script, StreamScript)
        script = self.script
        script.held.set()
        released = False
        async with anyio.create_task_group() as tg:
            async def wait_release() -> None:
                nonlocal released
                await anyio.to_thread.run_sync(script.release.wait, abandon_on_cancel=True)
                released = True
                tg.cancel_scope.cancel()

            async def wait_disconnect() -> None:
                while (await receive())["type"] != "http.disconnect":
                    pass
                tg.cancel_scope.cancel()

            tg.start_soon(wait_release)
            tg.start_soon(wait_disconnect)
        return released

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        script = self.script
        if isinstance(script, DropScript):
            await self._drop(scope, receive)
            return
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")],
            }
        )
        for sent, frame in enumerate(script.frames):
            if script.hold_after is not None and sent == script.hold_after and not await self._hold(receive):
                return
            if script.drop_after is not None and sent >= script.drop_after:
                await self._drop(scope, receive)
                return
            wire = f"event: {frame[0]}\ndata: {frame[1]}\n\n" if isinstance(frame, tuple) else f"data: {frame}\n\n"
            await send({"type": "http.response.body", "body": wire.encode(), "more_body": True})
        if script.drop_after is not None:
            await self._drop(scope, receive)
            return
        if script.done:
            await send({"type": "http.response.body", "body": b"data: [DONE]\n\n", "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})


__all__ = [
    "DropScript",
    "ErrorScript",
    "SUMMARY",
    "FakeOpenAI",
    "RecordedRequest",
    "StreamScript",
    "chunk",
    "completion",
    "drop",
    "error",
    "prompt_tokens",
    "raw_stream",
    "reasoning_deltas",
    "text_deltas",
    "tool_call_deltas",
    "usage_block",
]
