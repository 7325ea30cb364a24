"""The Session Drain's state between Safe Step Boundaries (pure): what the next boundary is for, the Step's number in
the agent's allowance, the Physical Attempt of the logical Step being prepared, and the retries of a failure before
any output. The runner reads it at each boundary and moves it on with the outcome of each Step."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import Enum

from ..session.admission import PromotionScope


class Next(Enum):
    """What the next boundary is for."""

    FIRST = "first"  # the drain's first boundary: promote admitted input (or answer a forced resume)
    INPUT = "input"  # the turn is over: a Step runs only if admitted input waits
    CONTINUE = "continue"  # the last Step's tool results await an answer: steering input joins that Step
    REBUILD = "rebuild"  # the same logical Step again, after a compaction: nothing is promoted for it
    RETRY = "retry"  # the next Step retries one that failed before any output: it repeats that request


@dataclass(frozen=True)
class PhysicalAttempt:
    """One provider request on the wire in service of a Step. Most Steps make one; a context overflow the provider
    reports before any output compacts history and rebuilds the Step for a second, which may not recover again."""

    number: int = 1

    @property
    def may_recover_overflow(self) -> bool:
        return self.number == 1

    def after_overflow(self) -> PhysicalAttempt:
        return PhysicalAttempt(self.number + 1)


@dataclass(frozen=True)
class Retrying:
    """The retries of one failure before any output, so far. Each retry is its own Step, on the assistant message of
    the Step that failed (no durable output exists to keep it apart)."""

    retries: int = 0
    assistant_id: str | None = None  # the failed Step's assistant message, which the retry reuses

    @property
    def attempt(self) -> int:
        """The number of the next try of the request, the first try being 1 (`session.retry.scheduled`'s attempt)."""
        return self.retries + 1

    def again(self, assistant_id: str) -> Retrying:
        return Retrying(self.retries + 1, assistant_id)


@dataclass(frozen=True)
class DrainState:
    next: Next = Next.FIRST
    step: int = 1  # the Step's number within the agent's allowance, from 1; promoted input resets it
    attempt: PhysicalAttempt = field(default_factory=PhysicalAttempt)
    retrying: Retrying = field(default_factory=Retrying)

    @property
    def promotes(self) -> PromotionScope | None:
        """The input this boundary promotes: admitted input, steering input only, or none (a rebuild or a retry
        repeats its Step's request: nothing new joins it)."""
        if self.next is Next.CONTINUE:
            return "steer"
        if self.next in (Next.FIRST, Next.INPUT):
            return "input"
        return None

    def promoted(self) -> DrainState:
        """New user input joined history: the allowance starts again (once per boundary, however much joined)."""
        return replace(self, step=1)

    def compacted(self, *, overflowed: bool) -> DrainState:
        """History was compacted instead of sending this Step's request (a pre-flight check found it too large: no
        Physical Attempt was made) or after its request overflowed (the rebuilt Step is its next Physical Attempt).
        A retry's assistant message now lies before the checkpoint: the rebuilt Step starts a new one."""
        return replace(self, next=Next.REBUILD, attempt=self.attempt.after_overflow() if overflowed else self.attempt,
                       retrying=replace(self.retrying, assistant_id=None))

    def retry(self, assistant_id: str) -> DrainState:
        """The Step failed before any output and may retry: the next Step is the retry, counted in the allowance."""
        return DrainState(Next.RETRY, self.step + 1, PhysicalAttempt(), self.retrying.again(assistant_id))

    def settled(self, *, continues: bool) -> DrainState:
        """The Step settled (success, or a failure that ends the drain): the next boundary continues the turn or
        looks for new input."""
        return DrainState(Next.CONTINUE if continues else Next.INPUT, self.step + 1)


__all__ = ["DrainState", "Next", "PhysicalAttempt", "Retrying"]
