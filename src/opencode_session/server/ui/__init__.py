"""The session inspector in the browser: server-rendered pages at `/` on the API's own origin (so its Host/Origin
guard and password cover them), live over SSE through htmx, writing through the V2 API."""

from .routes import ui_routes

__all__ = ["ui_routes"]
