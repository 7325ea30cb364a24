"""The Starlette app hosting protocol's endpoints over core, its middleware, SSE, and graceful serving."""

from .app import create_app

__all__ = ["create_app"]
