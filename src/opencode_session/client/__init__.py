"""The network client derived from protocol's IR: typed async methods per operation, lazy SSE streams, and what a
call raises: an operation's declared tagged errors (the schema's, re-exported here) or ClientError."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..schema.errors import (
    ConflictError,
    ForbiddenError,
    InvalidCursorError,
    InvalidRequestError,
    MessageNotFoundError,
    NotFoundError,
    PermissionNotFoundError,
    ProviderNotFoundError,
    PtyNotFoundError,
    QuestionNotFoundError,
    ServiceUnavailableError,
    SessionBusyError,
    SessionExecutionFailedError,
    SessionNotFoundError,
    StepContextNotFoundError,
    TaggedError,
    TooManyAttemptsError,
    UnauthorizedError,
    UnknownError,
)
from .errors import ClientError
from .runtime import BaseClient, CallOptions, Page
from .sse import EventStream

if TYPE_CHECKING:
    from .generated import OpenCodeClient

__all__ = [
    "BaseClient",
    "CallOptions",
    "ClientError",
    "ConflictError",
    "EventStream",
    "ForbiddenError",
    "InvalidCursorError",
    "InvalidRequestError",
    "MessageNotFoundError",
    "NotFoundError",
    "OpenCodeClient",
    "Page",
    "PermissionNotFoundError",
    "ProviderNotFoundError",
    "PtyNotFoundError",
    "QuestionNotFoundError",
    "ServiceUnavailableError",
    "SessionBusyError",
    "SessionExecutionFailedError",
    "SessionNotFoundError",
    "StepContextNotFoundError",
    "TaggedError",
    "TooManyAttemptsError",
    "UnauthorizedError",
    "UnknownError",
]


def __getattr__(name: str) -> Any:
    # Imported on demand so that `python -m opencode_session.client.codegen` still runs when generated.py is stale.
    if name == "OpenCodeClient":
        from .generated import OpenCodeClient

        return OpenCodeClient
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
