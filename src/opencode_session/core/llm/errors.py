"""Typed provider failures: what went wrong on one provider call, whether the runtime may retry it, how a
provider's error answer is classified (status, error code and kind, retry headers; the same for every protocol),
and how the failure is recorded in a Session (`SessionErrorInfo`)."""

from __future__ import annotations

import copy
import email.utils
import re
import time
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

from opencode_session.schema import session_errors
from opencode_session.schema.common import SessionErrorInfo


class ProviderError(Exception):
    """One failed provider call. `retryable` is a property of the failure class, never of the instance,
    so the retry policy can decide from the type alone."""

    retryable: ClassVar[bool] = False
    error_type: ClassVar[str] = session_errors.PROVIDER_UNKNOWN

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        retry_after_ms: float | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.retry_after_ms = retry_after_ms

    def to_session_error(self) -> SessionErrorInfo:
        return SessionErrorInfo(type=self.error_type, message=self.message, status=self.status)

    def redacted(self, secrets: Iterable[str]) -> ProviderError:
        """The same failure with `secrets` and bearer tokens cut from its message: providers echo the credentials
        they were sent ("Invalid API key: Bearer sk-..."), and the message becomes a durable, streamed event."""
        clean = copy.copy(self)
        clean.message = redact(self.message, secrets)
        clean.args = (clean.message,)
        return clean

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self.message!r}, status={self.status!r}, "
            f"retry_after_ms={self.retry_after_ms!r})"
        )


class RateLimitError(ProviderError):
    retryable = True
    error_type = session_errors.PROVIDER_RATE_LIMIT


class ProviderInternalError(ProviderError):
    retryable = True
    error_type = session_errors.PROVIDER_INTERNAL


class TransportError(ProviderError):
    retryable = True
    error_type = session_errors.PROVIDER_TRANSPORT


class AuthenticationError(ProviderError):
    error_type = session_errors.PROVIDER_AUTH


class QuotaExceededError(ProviderError):
    error_type = session_errors.PROVIDER_QUOTA


class ContentPolicyError(ProviderError):
    error_type = session_errors.PROVIDER_CONTENT_FILTER


class InvalidProviderRequestError(ProviderError):
    error_type = session_errors.PROVIDER_INVALID_REQUEST


class ContextOverflowError(InvalidProviderRequestError):
    """The request did not fit the model's context window; the runner may compact once and rebuild."""

    error_type = session_errors.PROVIDER_CONTEXT_OVERFLOW


class InvalidProviderOutputError(ProviderError):
    error_type = session_errors.PROVIDER_INVALID_OUTPUT


CONFIGURE_MODEL_HELP = (
    "To choose a model, set the \"model\" key in opencode.json to \"provider/model\" "
    "(for example \"openai/gpt-4.1\", with the OPENAI_API_KEY environment variable set). "
    "For an OpenAI-compatible server (Ollama, vLLM, llama.cpp, OpenRouter, ...) add a provider entry: "
    "\"provider\": {\"local\": {\"npm\": \"@ai-sdk/openai-compatible\", "
    "\"options\": {\"baseURL\": \"http://127.0.0.1:11434/v1\"}, "
    "\"models\": {\"qwen3\": {\"limit\": {\"context\": 32768, \"output\": 8192}}}}} "
    "with \"model\": \"local/qwen3\", and put its key in options.apiKey or the LOCAL_API_KEY "
    "environment variable (<PROVIDER_ID>_API_KEY) if the server needs one."
)


class NoModelConfiguredError(ProviderError):
    """No usable model could be resolved from configuration; the message says what to set."""

    error_type = session_errors.PROVIDER_NO_MODEL

    def __init__(self, detail: str | None = None) -> None:
        prefix = f"{detail.rstrip('.')}. " if detail else "No model is configured. "
        super().__init__(prefix + CONFIGURE_MODEL_HELP)
        self.detail = detail


REDACTED = "[REDACTED]"
# Shorter configured values are not treated as secrets: cutting them would mangle ordinary words in the message.
MIN_SECRET_LENGTH = 8
_BEARER = re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9\-._~+/]+=*")


def redact(text: str, secrets: Iterable[str]) -> str:
    """`text` with every secret of at least MIN_SECRET_LENGTH characters and every bearer/basic credential replaced
    by REDACTED."""
    for secret in sorted({s for s in secrets if s and len(s) >= MIN_SECRET_LENGTH}, key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    return _BEARER.sub(lambda m: f"{m.group(1)} {REDACTED}", text)
class ModelNotFoundError(ProviderError):
    """The model is declared neither by the configuration's provider entry nor by the built-in catalog."""

    error_type = session_errors.MODEL_NOT_FOUND

    def __init__(self, provider_id: str, model_id: str) -> None:
        super().__init__(
            f"Model {provider_id}/{model_id} is not known: declare it under provider.{provider_id}.models "
            "in opencode.json, or choose a model that is declared there"
        )


def parse_retry_after_ms(headers: Mapping[str, str] | None, *, now: float | None = None) -> float | None:
    """Delay the provider asked for, in milliseconds: `retry-after-ms` wins over `retry-after`,
    which may be seconds or an HTTP date. Unparseable or negative values mean "no hint"."""
    if not headers:
        return None
    lowered = {str(k).lower(): str(v) for k, v in headers.items()}
    raw_ms = lowered.get("retry-after-ms")
    if raw_ms is not None:
        try:
            value = float(raw_ms.strip())
        except ValueError:
            value = -1.0
        if value >= 0 and value == value and value != float("inf"):
            return value
    raw = lowered.get("retry-after")
    if raw is None:
        return None
    raw = raw.strip()
    try:
        seconds = float(raw)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(raw)
        except (TypeError, ValueError, IndexError):
            return None
        if when is None:
            return None
        current = time.time() if now is None else now
        return max(0.0, (when.timestamp() - current) * 1000.0)
    if seconds < 0 or seconds != seconds or seconds == float("inf"):
        return None
    return seconds * 1000.0


# Phrases servers use for "the prompt does not fit the context window" (OpenAI, Anthropic, vLLM, llama.cpp,
# OpenRouter, Azure). Kept specific: a false match costs a pointless compaction.
_OVERFLOW_MARKERS = (
    "context_length_exceeded",
    "context length",
    "context window",
    "context_window",
    "context size",
    "maximum context",
    "prompt is too long",
    "input is too long",
    "too many tokens",
    "exceeds the context",
    "reduce the length",
    "request_too_large",
)
_QUOTA_MARKERS = ("insufficient_quota", "billing_hard_limit", "quota_exceeded", "billing_error")
_CONTENT_POLICY_MARKERS = ("content_filter", "content_policy", "content policy", "responsibleaipolicyviolation")
_AUTH_KINDS = ("invalid_api_key", "authentication_error", "permission_error")
_RATE_LIMIT_KINDS = ("rate_limit_exceeded", "rate_limit_error")
# Error kinds that name a server-side failure when the status does not say so (an error event inside a 200 stream).
_INTERNAL_KINDS = ("overloaded_error", "api_error", "server_error", "internal_server_error", "timeout_error")
_INVALID_KINDS = ("invalid_request_error", "not_found_error", "invalid_request")


def body_fields(body: object) -> tuple[str | None, str | None, str | None, int | None]:
    """(message, code, kind, numeric code) from a provider error body, tolerating the shapes servers send:
    `{"error": {...}}` (OpenAI), `{"type": "error", "error": {"type": ...}}` (Anthropic), or the bare object."""
    if isinstance(body, Mapping):
        inner = body.get("error")
        if isinstance(inner, Mapping):
            body = inner
    if not isinstance(body, Mapping):
        return (body if isinstance(body, str) and body else None), None, None, None
    message = body.get("message")
    code = body.get("code")
    kind = body.get("type")
    numeric = code if isinstance(code, int) and not isinstance(code, bool) else None
    return (
        message if isinstance(message, str) and message else None,
        str(code) if code is not None else None,
        str(kind) if kind is not None else None,
        numeric,
    )


def classify_failure(
    status: int | None,
    message: str,
    *,
    code: str | None = None,
    kind: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> ProviderError:
    """The typed failure for a provider error answer, or for an error event inside a stream (then `status` is None
    or the stream's 200, and the error's code and kind decide)."""
    if status is not None and status < 400:
        status = None
    retry_after = parse_retry_after_ms(headers)
    text = " ".join(x for x in (message, code or "", kind or "") if x).lower()
    tags = {(code or "").lower(), (kind or "").lower()}
    args: dict[str, Any] = {"status": status, "retry_after_ms": retry_after}

    if status == 413 or (
        (status is None or 400 <= status < 500) and status != 429 and any(m in text for m in _OVERFLOW_MARKERS)
    ):
        return ContextOverflowError(message, **args)
    if status == 402 or any(m in tags for m in _QUOTA_MARKERS):
        return QuotaExceededError(message, **args)
    if any(m in tag for tag in tags for m in _CONTENT_POLICY_MARKERS):
        return ContentPolicyError(message, **args)
    if status in (401, 403) or tags & set(_AUTH_KINDS):
        return AuthenticationError(message, **args)
    if status == 429 or tags & set(_RATE_LIMIT_KINDS):
        return RateLimitError(message, **args)
    if status == 408:
        return TransportError(message, **args)
    if (status is not None and status >= 500) or tags & set(_INTERNAL_KINDS):
        return ProviderInternalError(message, **args)
    if any(m in text for m in _CONTENT_POLICY_MARKERS):
        return ContentPolicyError(message, **args)
    if status == 409:
        # OpenAI answers 409 for transient lock contention; its own SDK retries it.
        return ProviderInternalError(message, **args)
    if (status is not None and 400 <= status < 500) or tags & set(_INVALID_KINDS):
        return InvalidProviderRequestError(message, **args)
    # An error event inside an otherwise healthy stream without a usable status: the server failed.
    return ProviderInternalError(message, **args)


__all__ = [
    "AuthenticationError",
    "CONFIGURE_MODEL_HELP",
    "ContentPolicyError",
    "ContextOverflowError",
    "InvalidProviderOutputError",
    "InvalidProviderRequestError",
    "ModelNotFoundError",
    "NoModelConfiguredError",
    "ProviderError",
    "ProviderInternalError",
    "QuotaExceededError",
    "REDACTED",
    "RateLimitError",
    "TransportError",
    "body_fields",
    "classify_failure",
    "parse_retry_after_ms",
    "redact",
]
