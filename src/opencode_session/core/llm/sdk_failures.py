"""The one place SDK and transport exceptions become typed `ProviderError`s, for every adapter: the official SDKs
share their error classes' names and shapes, so each adapter hands in its SDK's set."""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType

import httpx2

from .errors import (
    InvalidProviderOutputError,
    InvalidProviderRequestError,
    ProviderError,
    TransportError,
    body_fields,
    classify_failure,
)


@dataclass(frozen=True)
class SDKErrors:
    """The error classes of one official SDK (openai, anthropic)."""

    base: type[Exception]
    timeout: type[Exception]
    connection: type[Exception]
    status: type[Exception]
    response_validation: type[Exception]
    api: type[Exception]

    @classmethod
    def of(cls, sdk: ModuleType, base: str) -> SDKErrors:
        return cls(base=getattr(sdk, base), timeout=sdk.APITimeoutError, connection=sdk.APIConnectionError,
                   status=sdk.APIStatusError, response_validation=sdk.APIResponseValidationError, api=sdk.APIError)

    @property
    def failures(self) -> tuple[type[BaseException], ...]:
        """What the SDK and its transport raise for provider trouble; anything else is a bug and propagates."""
        return (self.base, httpx2.HTTPError, ValueError, OSError)


def _describe_cause(exc: BaseException) -> str:
    cause = exc.__cause__ or exc.__context__
    if cause is None:
        return ""
    detail = str(cause)
    return f"{type(cause).__name__}: {detail}" if detail else type(cause).__name__


def map_exception(exc: BaseException, sdk: SDKErrors, *, started: bool = False,
                  base_url: str | None = None) -> ProviderError:
    """Translate anything an SDK or its transport raises into a `ProviderError`. `started` says the response stream
    was being read (a broken connection dropped mid-stream, and a parse failure is bad provider output rather than a
    bad request); `base_url` names the provider in connection failures."""
    if isinstance(exc, ProviderError):
        return exc
    at = f" at {base_url}" if base_url else ""
    if isinstance(exc, sdk.timeout):
        return TransportError(f"The provider request{at} timed out" + (" mid-stream" if started else ""))
    if isinstance(exc, sdk.connection):
        cause = _describe_cause(exc)
        what = "The provider connection dropped mid-stream" if started else f"Could not reach the provider{at}"
        return TransportError(what + (f" ({cause})" if cause else ""))
    if isinstance(exc, sdk.status):
        message, code, kind, _ = body_fields(getattr(exc, "body", None))
        response = getattr(exc, "response", None)
        return classify_failure(
            getattr(exc, "status_code", None),
            message or str(getattr(exc, "message", None) or exc),
            code=code or getattr(exc, "code", None),
            kind=kind or getattr(exc, "type", None),
            headers=response.headers if response is not None else None,
        )
    if isinstance(exc, sdk.response_validation):
        return InvalidProviderOutputError(f"The provider sent a response of the wrong shape: {exc}")
    if isinstance(exc, sdk.api):
        message, code, kind, numeric = body_fields(getattr(exc, "body", None))
        status = numeric if numeric is not None and 400 <= numeric < 600 else None
        return classify_failure(status, message or str(getattr(exc, "message", None) or exc), code=code, kind=kind)
    if isinstance(exc, httpx2.TimeoutException):
        return TransportError("The provider request timed out")
    if isinstance(exc, (httpx2.HTTPError, OSError)):
        return TransportError(f"The provider connection failed ({type(exc).__name__}: {exc})")
    if isinstance(exc, ValueError) and started:
        # json.JSONDecodeError and pydantic.ValidationError both land here: a malformed chunk.
        return InvalidProviderOutputError(f"The provider sent a malformed stream chunk: {exc}")
    if isinstance(exc, (sdk.base, ValueError)):
        return InvalidProviderRequestError(f"The provider request could not be made: {exc}")
    return InvalidProviderOutputError(
        f"Unexpected failure while reading the provider stream: {type(exc).__name__}: {exc}"
    )


__all__ = ["SDKErrors", "map_exception"]
