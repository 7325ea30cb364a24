"""What every V1 route shares: its row (`V1Route`: method, path, handler, the body it reads and the answer it gives),
what a handler reads from its request (the Runtime, the client's directory scope and Location, the Location's
config, a session's V1 messages) and the Starlette route a row becomes, which decodes the body and turns a
TaggedError into its status and body."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from pydantic import BaseModel, ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ...core.config import Config, ConfigError
from ...core.location import Location, require_usable_directory, select_location
from ...core.runtime import Runtime
from ...schema.errors import InvalidRequestError, TaggedError, UnknownError
from ..body import invalid, read_json_body
from ..sse import SSEResponse
from ..state import runtime_of
from . import shapes

log = logging.getLogger(__name__)

# a handler answers a JSON value (sent as it is) or a response of its own (a stream, a 204)
Handler = Callable[..., Awaitable[Any]]


@dataclass(frozen=True)
class V1Route:
    """One V1 route. A handler takes the request, and the decoded `body` after it when the row names one; `answer`
    is the type of its JSON answer (None: a stream or no content)."""

    method: str
    path: str
    handler: Handler
    answer: Any = None
    body: type[BaseModel] | None = None

    def route(self) -> Route:
        return Route(self.path, self._serve, methods=[self.method], name=f"v1.{self.method.lower()}.{self.path}")

    async def _serve(self, request: Request) -> Response:
        try:
            if self.body is None:
                result = await self.handler(request)
            else:
                result = await self.handler(request, await _decode(request, self.body))
        except TaggedError as err:
            return JSONResponse(err.body(), status_code=err.status)
        except Exception:
            unknown = UnknownError.with_ref()
            log.exception("unexpected failure in V1 %s %s (ref %s)", request.method, request.url.path,
                          unknown.values["ref"])
            return JSONResponse(unknown.body(), status_code=unknown.status)
        if isinstance(result, Response | SSEResponse):
            return result  # type: ignore[return-value]  # SSEResponse: an ASGI response Starlette awaits alike
        return JSONResponse(result)


async def _decode(request: Request, model: type[BaseModel]) -> BaseModel:
    """The body as `model` (a blank body is `{}`); a body of another shape is the 400 the V2 routes answer."""
    try:
        return model.model_validate(read_json_body(await request.body()), strict=True)
    except ValidationError as exc:
        raise invalid(exc, "body") from None


def directory(request: Request) -> str | None:
    """The client's directory scope: `?directory=` or the (percent-encoded) `x-opencode-directory` header."""
    value = request.query_params.get("directory") or request.headers.get("x-opencode-directory")
    return unquote(value) if value else None


def usable_directory(request: Request) -> str | None:
    """The client's directory scope, refused (400) when it is not a usable directory."""
    value = directory(request)
    if value is not None:
        require_usable_directory(value, "query", "directory")
    return value


def location(request: Request) -> Location:
    return select_location(runtime_of(request).location, usable_directory(request), None)


async def config_at(rt: Runtime, loc: Location) -> Config:
    try:
        return await rt.config.at(loc)
    except ConfigError as bad:
        raise InvalidRequestError(str(bad), kind="config") from None


async def history(rt: Runtime, session_id: str) -> list[dict[str, Any]]:
    """The session's newest 200 messages as V1 `{info, parts}`, oldest first."""
    info = await rt.sessions.get(session_id)
    found, _links = await rt.sessions.messages(session_id, limit=200, order="desc")
    return shapes.messages(info, list(reversed(found)))
