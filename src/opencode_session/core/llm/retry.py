"""The retry policy of provider calls (Steps and compactions): which failures retry, how many times, and after how
long (pure), and the Clock their waits run on, replaceable so tests observe and skip them."""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Mapping

from .errors import ProviderError, ProviderInternalError, RateLimitError

log = logging.getLogger(__name__)

MAX_RETRIES = 4
BASE_DELAY_MS = 2000.0
# Overrides BASE_DELAY_MS for a whole runtime (tests and local experiments that must not wait out real backoff).
BASE_DELAY_ENV = "OCS_RETRY_BASE_DELAY_MS"


def retry_delay_ms(retry_number: int, error: ProviderError, base_ms: float = BASE_DELAY_MS) -> float:
    """Exponential from `base_ms` (2, 4, 8, 16 s for retries 1..4 by default); a rate limit or a provider-internal
    failure stretches it to the provider's own retry delay when that is longer."""
    backoff = base_ms * (2 ** (retry_number - 1))
    if isinstance(error, (RateLimitError, ProviderInternalError)) and error.retry_after_ms:
        return max(backoff, error.retry_after_ms)
    return backoff


def base_delay_ms(env: Mapping[str, str]) -> float:
    """The first retry's delay: `$OCS_RETRY_BASE_DELAY_MS` when it is a non-negative number, else BASE_DELAY_MS."""
    raw = env.get(BASE_DELAY_ENV)
    if raw is None:
        return BASE_DELAY_MS
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not (math.isfinite(value) and value >= 0):
        log.warning("ignoring %s=%r: not a non-negative number of milliseconds", BASE_DELAY_ENV, raw)
        return BASE_DELAY_MS
    return value


def may_retry(error: BaseException, *, retries_so_far: int, allowance_left: bool) -> bool:
    """Retry only typed rate-limit, provider-internal and transport failures, at most four times, and only while
    the agent's allowance remains. The Step asks only while no durable assistant output exists."""
    return (
        isinstance(error, ProviderError)
        and error.retryable
        and allowance_left
        and retries_so_far < MAX_RETRIES
    )


class Clock:
    """Wall-clock time and sleeping, for retry times and waits."""

    def now_ms(self) -> int:
        return int(time.time() * 1000)

    async def sleep_ms(self, ms: float) -> None:
        await asyncio.sleep(ms / 1000)
