"""Builds the Starlette app from protocol's endpoint table: decoding, handler dispatch, encoding, errors, /doc."""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import anyio
from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Match, Route, WebSocketRoute
from starlette.websockets import WebSocket

from ..core.fs import is_binary
from ..core.runtime import Runtime
from ..core.telemetry import hooks, telemetry
from ..protocol import ENDPOINTS, Endpoint, decode_query
from ..protocol.endpoint import BYTES_CONTENT_TYPE
from ..schema.errors import InvalidRequestError, NotFoundError, TaggedError, UnknownError
from .auth import BasicAuthMiddleware
from .body import JSONAnswer, invalid, read_json_body
from .guard import BodyGuard, GuardOptions, OriginGuard
from .handlers import HANDLERS, Call
from .host import Host
from .scope import scope
from .state import AppState, app_state, app_state_of
from .terminal_socket import serve_terminal
from .ui.routes import UI_ROUTES
from .v1.events import Streams
from .v1.routes import V1_ROUTES

log = logging.getLogger(__name__)

METRICS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"  # Prometheus' text exposition format


def error_response(err: TaggedError, status: int | None = None) -> JSONResponse:
    return JSONAnswer(err.body(), status_code=status or err.status)


async def _decode(endpoint: Endpoint, request: Request) -> tuple[Any, Any, Any]:
    try:
        path = endpoint.path_params.model_validate(request.path_params) if endpoint.path_params else None
    except ValidationError as exc:
        raise invalid(exc, "path") from None
    scoped = scope(endpoint, request.query_params.multi_items(), request.headers)
    try:
        query = decode_query(endpoint.query, scoped.items) if endpoint.query else None
    except ValidationError as exc:
        raise invalid(exc, "query") from None
    body = None
    if endpoint.body is not None:
        payload = read_json_body(await request.body())
        try:
            body = endpoint.body.model_validate(payload, strict=True)
        except ValidationError as exc:
            raise invalid(exc, "body") from None
        body = scoped.fill_body(endpoint, body)
    return path, query, body


def _route(endpoint: Endpoint) -> Route:
    handler = HANDLERS[endpoint.operation_id]

    async def endpoint_fn(request: Request) -> Response:
        state = app_state(request)
        try:
            path, query, body = await _decode(endpoint, request)
            traceparent = hooks.valid_traceparent(request.headers.get("traceparent"))
            call = Call(path, query, body, endpoint, state.shutdown, state.host, traceparent)
            result = await handler(state.runtime, call)
        except TaggedError as err:
            return error_response(err)
        except Exception:
            unknown = UnknownError.with_ref()
            log.exception("unexpected failure in %s (ref %s)", endpoint.operation_id, unknown.values["ref"])
            return error_response(unknown)
        if endpoint.result_kind == "stream":
            # an ASGI response of our own, which Starlette awaits exactly like one of its Responses
            return state.stream(result)  # type: ignore[return-value]
        if endpoint.success_status == 204:
            return Response(status_code=204)
        if endpoint.result_kind == "bytes":
            # never sniffed as something a browser would render or run; the kind says whether it is text
            return Response(result, media_type=BYTES_CONTENT_TYPE, headers={
                "X-Content-Type-Options": "nosniff", "X-File-Kind": "binary" if is_binary(result) else "text"})
        try:
            content = endpoint.encode(result)
        except Exception:
            unknown = UnknownError.with_ref()
            log.exception("%s answered a value its declaration does not allow (ref %s)", endpoint.operation_id,
                          unknown.values["ref"])
            return error_response(unknown)
        return JSONAnswer(content, status_code=endpoint.success_status)

    if "{" in endpoint.route_path:
        return _TemplateRoute(endpoint.route_path, endpoint_fn, methods=[endpoint.method], name=endpoint.operation_id)
    return Route(endpoint.route_path, endpoint_fn, methods=[endpoint.method], name=endpoint.operation_id)


# Paths declared literally (`/api/session/active`): never a value of another route's parameter, so a method the
# literal path lacks is a 405 there, not a request for the session called "active".
_LITERAL_PATHS = frozenset(e.route_path for e in ENDPOINTS if "{" not in e.route_path)


class _TemplateRoute(Route):
    def matches(self, scope: Any) -> tuple[Match, Any]:
        if scope.get("type") == "http" and scope.get("path") in _LITERAL_PATHS:
            return Match.NONE, {}
        return super().matches(scope)


def _websocket_route(endpoint: Endpoint) -> WebSocketRoute:
    async def serve(websocket: WebSocket) -> None:
        state = app_state(websocket)
        await serve_terminal(websocket, state.runtime, state.host, state.shutdown, invalid)

    return WebSocketRoute(endpoint.route_path, serve, name=endpoint.operation_id + ".websocket")


def _allowed_methods(routes: list[BaseRoute], request: Request) -> list[str]:
    methods: set[str] = set()
    for route in routes:
        if isinstance(route, Route) and route.methods and route.matches(request.scope)[0] is not Match.NONE:
            methods |= route.methods
    return sorted(methods)


@asynccontextmanager
async def lifespan(app: Starlette) -> AsyncIterator[None]:
    """The app's Runtime open for as long as it serves: `ocs serve` (around uvicorn) and the embedded host (around its
    in-memory transport) both enter it. A Runtime that fails to open is closed again (what opened before the failure:
    the store's threads) and the failure raised; at the end every stream is ended, then the Runtime closed."""
    state = app_state_of(app)
    try:
        await state.runtime.open()
    except BaseException:
        await state.runtime.close()
        raise
    try:
        yield
    finally:
        state.shutdown.set()
        await state.runtime.close()


def create_app(runtime: Runtime, *, env: Mapping[str, str] | None = None, heartbeat: float = 15.0,
               guard: GuardOptions | None = None, stall_timeout: float = 15.0) -> Starlette:
    """The V2 API app over `runtime`, which its `lifespan` opens and closes. `app.state.ocs.shutdown` ends every
    stream when set; an event stream whose reader accepts nothing for `stall_timeout` seconds is cut off. New
    terminals get the runtime's PTY Environment."""
    guard = guard or GuardOptions()
    env = os.environ if env is None else env
    missing = [e.operation_id for e in ENDPOINTS if e.operation_id not in HANDLERS]
    if missing:
        raise RuntimeError(f"operations without a handler: {missing}")
    state = AppState(runtime, heartbeat, stall_timeout, Host(pty_environment=runtime.pty_environment), Streams())
    doc: list[dict[str, Any]] = []  # rendered on first request: it costs a third of start-up and few ask for it

    async def openapi_doc(_request: Request) -> Response:
        if not doc:
            from ..protocol.openapi import render_openapi

            doc.append(await anyio.to_thread.run_sync(render_openapi))
        return JSONResponse(doc[0])

    async def metrics(_request: Request) -> Response:
        # the first scrape starts counting (and imports prometheus_client): a server nobody scrapes counts nothing
        exposition = telemetry.enable_metrics()
        return Response(exposition.text(), media_type=METRICS_CONTENT_TYPE)

    async def not_found(request: Request, exc: Exception) -> Response:
        status = getattr(exc, "status_code", 404)
        # RFC 9110: a 405 names the methods the path has. Starlette's names those of the first route on the path
        # only, and each method of a path is a route of its own here.
        if status == 404:
            return JSONResponse(NotFoundError(method=request.method, path=request.url.path).body(), status_code=404)
        headers = {"Allow": ", ".join(_allowed_methods(routes, request))} if status == 405 else None
        return JSONResponse(InvalidRequestError(f"No route for {request.method} {request.url.path}",
                                                kind="route").body(), status_code=status, headers=headers)

    routes: list[BaseRoute] = [_route(e) for e in ENDPOINTS]
    routes += [_websocket_route(e) for e in ENDPOINTS if e.websocket]
    routes.append(Route("/doc", openapi_doc, methods=["GET"], name="doc"))
    # Prometheus text, not JSON and not OpenCode's V2 API: beside /doc, outside the endpoint table (and the client)
    routes.append(Route("/metrics", metrics, methods=["GET"], name="metrics"))
    # OpenCode's V1 paths (its own CLI's `run --attach`), a compatibility layer outside the V2 endpoint table
    routes += [r.route() for r in V1_ROUTES]
    # the browser inspector at `/`: behind the same guard and password as the API it writes to
    routes += UI_ROUTES
    app = Starlette(routes=routes, exception_handlers={HTTPException: not_found}, lifespan=lifespan)
    app.state.ocs = state
    # The last added runs first: Host/Origin, then CORS (a preflight carries no credentials), auth, the body.
    app.add_middleware(BodyGuard, max_bytes=guard.max_body_bytes)
    password = env.get("OPENCODE_SERVER_PASSWORD")
    if password:
        app.add_middleware(BasicAuthMiddleware, username=env.get("OPENCODE_SERVER_USERNAME") or "opencode",
                           password=password)
    if guard.allowed_origins:
        app.add_middleware(CORSMiddleware, allow_origins=list(guard.allowed_origins),
                           allow_methods=["GET", "POST", "PUT", "PATCH", "DELETE"],
                           allow_headers=["authorization", "content-type", "accept", "last-event-id",
                                          "x-opencode-directory"], max_age=600)
    app.add_middleware(OriginGuard, allowed_hosts=guard.allowed_hosts, allowed_origins=guard.allowed_origins)
    return app
