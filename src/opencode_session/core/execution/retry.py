"""The retry policy: which provider failures retry, how many times, and after how long (pure)."""

from __future__ import annotations

from ..llm.errors import ProviderError, ProviderInternalError, RateLimitError

MAX_RETRIES = 4
BASE_DELAY_MS = 2000.0


def retry_delay_ms(retry_number: int, error: ProviderError) -> float:
    """Exponential from 2 s (2, 4, 8, 16 s for retries 1..4); a rate limit or a provider-internal failure
    stretches it to the provider's own retry delay when that is longer."""
    backoff = BASE_DELAY_MS * (2 ** (retry_number - 1))
    if isinstance(error, (RateLimitError, ProviderInternalError)) and error.retry_after_ms:
        return max(backoff, error.retry_after_ms)
    return backoff


def may_retry(error: BaseException, *, retries_so_far: int, allowance_left: bool) -> bool:
    """Retry only typed rate-limit, provider-internal and transport failures, at most four times, and only while
    the agent's allowance remains. The Step asks only while no durable assistant output exists."""
    return (
        isinstance(error, ProviderError)
        and error.retryable
        and allowance_left
        and retries_so_far < MAX_RETRIES
    )
