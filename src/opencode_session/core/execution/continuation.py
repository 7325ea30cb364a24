"""Continuation after a hard crash: the claim an execution holds while it runs (so a restarted host knows which
executions its predecessor lost), the resume budget (how many automatic continuations a session gets per window),
and `Continuations.continue_after_loss`, which continues a session whose host was lost as a new Step, or over budget
leaves it idle with a `host.lost` execution failure."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

from ...schema import events as ev
from ...schema import session_errors
from ...schema.common import SessionErrorInfo
from ...schema.errors import SessionNotFoundError
from ..store import Lease, Store, Tx, now_ms, set_fence
from .coordinator import SessionExecution
from .orphans import settle_orphans

log = logging.getLogger(__name__)

RESUME_BUDGET_ENV = "OCS_RESUME_BUDGET"
Outcome = Literal["continued", "over-budget", "running", "idle"]


class InvalidResumeBudget(ValueError):
    """A resume budget that is not `COUNT/SECONDS` with a non-negative whole COUNT and a positive SECONDS."""


@dataclass(frozen=True)
class ResumeBudget:
    """At most `count` automatic continuations of one session within any `window_s` seconds (0: none at all)."""

    count: int = 1
    window_s: float = 3600.0

    @classmethod
    def parse(cls, text: str) -> ResumeBudget:
        """`COUNT/SECONDS`, e.g. `1/3600` (the default), `3/600`, or `0/1` to never continue automatically."""
        count_text, slash, window_text = text.strip().partition("/")
        try:
            count, window = int(count_text), float(window_text)
        except ValueError:
            count, window = -1, math.nan
        if not slash or count < 0 or not (math.isfinite(window) and window > 0):
            raise InvalidResumeBudget(f"{RESUME_BUDGET_ENV}={text!r} is not COUNT/SECONDS (e.g. 1/3600: one "
                                      "automatic continuation per session per hour; 0/1: none)")
        return cls(count, window)

    @classmethod
    def of(cls, env: Mapping[str, str]) -> ResumeBudget:
        """`$OCS_RESUME_BUDGET` when set, else the default; InvalidResumeBudget when it is set but malformed."""
        raw = env.get(RESUME_BUDGET_ENV)
        return cls() if raw is None else cls.parse(raw)

    def spend(self, record: list[int], now: int) -> list[int] | None:
        """The record of continuations (ms) after one more at `now`, or None when the budget is spent; times that
        left the window are dropped."""
        recent = [t for t in record if now - t < self.window_s * 1000]
        return None if len(recent) >= self.count else [*recent, now]

    def describe(self) -> str:
        return f"{self.count} per {self.window_s:g} s"


# --- the claim, with the execution's start and terminal ---------------------------------------------------------


def on_started(tx: Tx, session_id: str) -> None:
    tx.continuation.claim(session_id, now_ms())


def on_settled(tx: Tx, session_id: str, _outcome: str) -> None:
    tx.continuation.release(session_id)  # settled, whichever way: its host was not lost


# --- continuing ---------------------------------------------------------------------------------------------------


class Continuations:
    """Continues sessions whose host was lost, within the resume budget."""

    def __init__(self, store: Store, execution: SessionExecution, budget: ResumeBudget,
                 clock: Callable[[], int] = now_ms) -> None:
        self.store = store
        self.execution = execution
        self.budget = budget
        self.clock = clock

    async def continue_after_loss(self, session_id: str, lease: Lease | None = None) -> Outcome:
        """Continue a session whose executing host was lost (call it once this host owns the session). Within the
        budget the continuation is recorded and a forced drain reconciles the orphans (re-running idempotent calls)
        and runs a new Step over durable history: "continued". Over it the orphans fail, a `session.execution.failed`
        with `host.lost` ends the lost execution and the session stays idle, its pending input kept: "over-budget".
        A session executing on this host already is left to it: "running". SessionNotFoundError when unknown.

        On a shared database `lease` is the one this host took the session over with: the decision is written under
        it (SessionFencedError, and nothing written, when another host has taken the session since), so one takeover
        spends at most one continuation, and the continuation's drain executes under it. A takeover finds no
        execution to continue when the lease outlived the execution (it ended, its claim released): nothing is spent
        or written, "idle"."""
        if session_id in self.execution.active():
            return "running"
        if lease is not None:
            set_fence(lease)  # (this task's own context: the caller's write, not the drain's)

        def _decide(tx: Tx) -> Outcome:
            if tx.sessions.load_data(session_id) is None:
                raise SessionNotFoundError(sessionID=session_id)
            if lease is not None and not tx.continuation.is_claimed(session_id):
                return "idle"  # the lease outlived its execution: nothing was lost, nothing is continued
            record = self.budget.spend(tx.continuation.continued(session_id), self.clock())
            if record is not None:
                tx.continuation.record_continued(session_id, record)
                return "continued"  # the claim stays until the continuation's own execution settles
            settle_orphans(tx, session_id)
            tx.append(ev.ExecutionFailed(sessionID=session_id, error=SessionErrorInfo(
                type=session_errors.HOST_LOST,
                message=f"The host running this session was lost and its automatic continuations are spent "
                        f"({self.budget.describe()}): it waits for a prompt.")))
            tx.continuation.release(session_id)
            return "over-budget"

        outcome = await self.store.write(_decide)
        if outcome == "continued" and lease is not None:
            self.execution.take_over(lease)
        elif outcome == "continued":
            self.execution.wake(session_id, force=True)
        elif outcome == "over-budget":
            log.warning("session %s: its host was lost and its automatic continuations (%s) are spent; it waits for "
                        "a prompt", session_id, self.budget.describe())
        return outcome

    async def lost(self) -> list[str]:
        """The sessions whose execution claim outlived its process. Valid on a single-host store before this host
        runs anything: every claim then belongs to a process that is gone."""
        return await self.store.write(lambda tx: tx.continuation.claimed())

    async def continue_lost(self, session_ids: list[str]) -> dict[str, Outcome]:
        """`continue_after_loss` for each of `session_ids` (as `lost` found them)."""
        return {sid: await self.continue_after_loss(sid) for sid in session_ids}


__all__ = ["RESUME_BUDGET_ENV", "Continuations", "InvalidResumeBudget", "Outcome", "ResumeBudget", "on_settled",
           "on_started"]
