"""The session inspector in the browser: server-rendered pages at `/` on the API's own origin (so its Host/Origin
guard and password cover them), live over SSE through htmx, writing through the V2 API."""

from collections.abc import AsyncIterator, Callable
from typing import Any

from starlette.routing import BaseRoute

from ...core.runtime import Runtime
from .files import files_routes
from .routes import ui_routes as page_routes

__all__ = ["ui_routes"]


def ui_routes(runtime: Runtime, stream: Callable[[AsyncIterator[bytes]], Any]) -> list[BaseRoute]:
    """The inspector's routes over `runtime`; `stream` makes the app's SSE response from encoded frames."""
    return files_routes(runtime) + page_routes(runtime, stream)
