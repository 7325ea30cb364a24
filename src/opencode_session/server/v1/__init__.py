"""OpenCode's V1 HTTP API as a compatibility layer (`opencode run --attach`): routes at the V1 paths over the same
core, answering in V1 shapes derived from the session projections (`shapes.py`) and V1 bus events (`events.py`)."""

from .routes import v1_routes

__all__ = ["v1_routes"]
