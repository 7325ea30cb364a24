"""The retry policy: which provider failures retry, how many times, and after how long (pure)."""

from __future__ import annotations

from ..llm.errors import ProviderError

MAX_RETRIES = 4
BASE_DELAY_MS = 2000.0


def retry_delay_ms(retry_number: int, provider_delay_ms: float | None) -> float:
    """Exponential from 2 s (2, 4, 8, 16 s for retries 1..4), stretched to the provider's delay when longer."""
    backoff = BASE_DELAY_MS * (2 ** (retry_number - 1))
    return max(backoff, provider_delay_ms or 0.0)


def may_retry(error: BaseException, *, retries_so_far: int, has_evidence: bool, allowance_left: bool) -> bool:
    """Retry only typed rate-limit, provider-internal and transport failures, only before any durable assistant
    content, tool input or tool call exists, at most four times, and only while the agent's allowance remains."""
    return (
        isinstance(error, ProviderError)
        and error.retryable
        and not has_evidence
        and allowance_left
        and retries_so_far < MAX_RETRIES
    )
