"""The session inspector in the browser: server-rendered pages at `/` on the API's own origin (so its Host/Origin
guard and password cover them), live over SSE through htmx, writing through the V2 API. Its routes are
`routes.py`'s `UI_ROUTES`, module-level functions that read the Runtime from the app's state."""
