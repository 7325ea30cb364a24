"""The network client derived from protocol's IR: typed async methods per operation, ClientError, lazy SSE streams."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .errors import ClientError
from .runtime import BaseClient, CallOptions, Page
from .sse import EventStream

if TYPE_CHECKING:
    from .generated import OpenCodeClient

__all__ = ["BaseClient", "CallOptions", "ClientError", "EventStream", "OpenCodeClient", "Page"]


def __getattr__(name: str) -> Any:
    # Imported on demand so that `python -m opencode_session.client.codegen` still runs when generated.py is stale.
    if name == "OpenCodeClient":
        from .generated import OpenCodeClient

        return OpenCodeClient
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
