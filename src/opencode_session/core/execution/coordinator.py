"""SessionExecution: process-local ownership of Session drains, keyed by Session ID.

One Execution is one busy period from the first wake until idle; wakes coalesce into one follow-up drain,
explicit resumes join, interruption stops the owner without touching pending input, and each busy period
publishes exactly one durable terminal event. On a database several hosts share, a busy period first takes the
session's lease (`Ownership`): writes are fenced by it, and a wake or interrupt for a session another host holds is
forwarded to that host."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Literal

import anyio

from ...schema import events as ev
from ...schema import session_errors
from ...schema.common import SessionErrorInfo
from ...schema.errors import SessionBusyError
from ..cancellation import TaskScope, owned_tasks
from ..store import Lease, SessionFencedError, Store, Tx, set_fence
from .ownership import LeaseTenure, Ownership

log = logging.getLogger(__name__)

Drain = Callable[[str, bool], Awaitable[None]]
InterruptReason = Literal["user", "shutdown", "superseded"]


class DrainFailure(Exception):
    """A drain ended with a typed session failure that the execution records as `session.execution.failed`."""

    def __init__(self, error: SessionErrorInfo) -> None:
        super().__init__(error.message)
        self.error = error


class DrainInterrupted(Exception):
    """A drain stopped on the user's behalf from inside (they declined a tool call): recorded as
    `session.execution.interrupted` with `reason`, like an interrupt through the API."""

    def __init__(self, reason: InterruptReason = "user") -> None:
        super().__init__(reason)
        self.reason: InterruptReason = reason


@dataclass
class _Execution:
    session_id: str
    task: asyncio.Task | None = None  # the task running the busy period (in the coordinator's scope), once started
    cancelled: bool = False  # its interrupt's one cancellation was sent
    pending_wake: bool = False
    force: bool = False
    stopping: InterruptReason | None = None
    done: asyncio.Event = field(default_factory=asyncio.Event)
    outcome: str | None = None
    lease: Lease | None = None  # on a shared database: the lease this busy period executes (and writes) under
    lost: bool = False  # the lease changed hands meanwhile: this host may no longer write for the session
    tenure: LeaseTenure | None = None  # how long this host can be sure it still holds `lease`

    def cancel(self) -> None:
        """Interrupt the busy period: one cancellation of its task (or none ever starts, when it has not yet)."""
        if self.task is not None and not self.cancelled:
            self.task.cancel()
        self.cancelled = True

    def consumed(self) -> bool:
        """Whether the cancellation being handled is only this busy period's interrupt: it is consumed (the task no
        longer counts it); one from outside (the coordinator's scope closing) is still pending and must propagate."""
        task = asyncio.current_task()
        if not self.cancelled or task is None or task is not self.task:
            return False
        return task.uncancel() == 0


class SessionExecution:
    def __init__(self, store: Store, drain: Drain,
                 on_started: Callable[[Tx, str], None] | None = None,
                 on_settled: Callable[[Tx, str, str], None] | None = None,
                 ownership: Ownership | None = None) -> None:
        self.store = store
        self.drain = drain
        self._on_started = on_started
        self._on_settled = on_settled
        self._running: dict[str, _Execution] = {}
        self._successor: set[str] = set()
        self._held: dict[str, bool] = {}  # sessions held idle -> whether a wake (a forced one: True) waits
        self._closed = False
        self.ownership = ownership
        # the busy periods' tasks, each failure logged there once
        self._tasks = TaskScope("session execution")

    # --- queries ----------------------------------------------------------------------------------

    def active(self) -> list[str]:
        """Sessions with a foreground drain owned by this process right now."""
        return [sid for sid, ex in self._running.items() if not ex.done.is_set()]

    # --- doorbells --------------------------------------------------------------------------------------

    def wake(self, session_id: str, force: bool = False) -> None:
        """Advisory: start a drain, or ask the running one for one more pass. `force` is an explicit resume: it
        joins an active execution or starts a drain that runs even with no pending input (restart continuation)."""
        if self._closed:
            return
        if session_id in self._held:
            self._held[session_id] = self._held[session_id] or force
            self._successor.add(session_id)  # starts when the hold ends
            return
        ex = self._running.get(session_id)
        if ex is not None:
            if ex.stopping is not None:
                self._successor.add(session_id)  # arrived during interrupt clean-up: start a successor after
            else:
                ex.pending_wake = True
                ex.force = ex.force or force
            return
        self._start(session_id, force=force)

    async def interrupt(self, session_id: str, reason: InterruptReason = "user") -> bool:
        """Stop the session's execution (asking the host that holds it, on a shared database, and waiting for it
        to stop); pending input stays pending. Idle is a no-op returning False."""
        ex = self._running.get(session_id)
        if ex is None or ex.done.is_set():
            if self.ownership is None or (lease := await self.ownership.holder(session_id)) is None:
                return False
            await self.ownership.forward(lease, "interrupt")
            await self._until_no_host_holds(session_id)
            return True
        if ex.stopping is None:
            ex.stopping = reason
            ex.pending_wake = False  # wakes so far belonged to the interrupted intent
            self._successor.discard(session_id)
            ex.cancel()
        await ex.done.wait()
        return True

    async def wait(self, session_id: str) -> None:
        """Return once the session is idle (no drain, no successor pending; on a shared database, on no host)."""
        while True:
            ex = self._running.get(session_id)
            if ex is None:
                break
            await ex.done.wait()
        if self.ownership is not None:
            await self._until_no_host_holds(session_id)

    async def _until_no_host_holds(self, session_id: str) -> None:
        """Wait until no other host holds the session's lease, reading it again after each commit of the session
        (the owner's terminal event releases it in the same transaction)."""
        assert self.ownership is not None
        with self.store.durable.subscribe(session_id) as commits:
            async def next_commit() -> None:
                await commits.wait()
                commits.clear()

            await self.ownership.released(session_id, next_commit)

    def take_over(self, lease: Lease) -> None:
        """Run a session this host just took the lease of (its admitted input waited with no owner)."""
        if self._closed or lease.session_id in self._running:
            return
        self._start(lease.session_id, force=True).lease = lease

    @contextlib.asynccontextmanager
    async def idle_hold(self, session_id: str) -> AsyncIterator[None]:
        """Keep the session idle while changing what a drain reads (its files, its history): SessionBusyError while
        it executes (or is held already); a wake meanwhile starts its drain once the hold ends."""
        if session_id in self._running or session_id in self._held:
            raise SessionBusyError(sessionID=session_id)
        self._held[session_id] = False
        try:
            yield
        finally:
            force = self._held.pop(session_id)
            if session_id in self._successor:
                self._successor.discard(session_id)
                if not self._closed:
                    self._start(session_id, force=force)

    async def shutdown(self, reason: InterruptReason = "shutdown") -> None:
        self._closed = True
        self._successor.clear()
        async with anyio.create_task_group() as stopping:
            for sid in list(self._running):
                stopping.start_soon(self.interrupt, sid, reason)
        await self._tasks.aclose()  # what is left: the forwarded chores (every busy period ended above)

    # --- the busy period ----------------------------------------------------------------------------------

    def _start(self, session_id: str, force: bool) -> _Execution:
        ex = _Execution(session_id, force=force)
        self._running[session_id] = ex
        # a context of its own: a drain started from inside another's (a subagent) writes under its own lease
        if not self._tasks.start_soon(lambda: self._run(ex), f"session-execution:{session_id}",
                                      contextvars.Context()):
            self._release(ex)
        return ex

    def _release(self, ex: _Execution) -> None:
        """End the busy period's local ownership once (idempotent); start a successor woken during clean-up."""
        if ex.done.is_set():
            return
        sid = ex.session_id
        if ex.outcome is None:
            ex.outcome = "interrupted"
        if self._running.get(sid) is ex:
            del self._running[sid]
        ex.done.set()
        # a wake that arrived after the drain's last pass (while the terminal event was being written) or during
        # interrupt clean-up would otherwise be lost: it starts the next busy period
        woken = sid in self._successor or (ex.pending_wake and ex.stopping is None)
        self._successor.discard(sid)
        if woken and not self._closed:
            self._start(sid, force=ex.force)

    async def _settle(self, ex: _Execution, terminal: object, outcome: str) -> None:
        """Record the busy period's terminal event (and release its lease in the same transaction)."""
        sid, lease = ex.session_id, ex.lease

        def _hook(tx: Tx) -> None:
            if self._on_settled is not None:
                self._on_settled(tx, sid, outcome)
            if lease is not None:
                tx.leases.release(lease)

        try:
            await self.store.write(self._writing(terminal, _hook))
        except SessionFencedError:
            log.warning("session %s was taken over by another host before its execution ended here", sid)
        except Exception:
            log.exception("could not record the end of session %s's execution", sid)
            if lease is not None:  # never leave a lease behind that only its expiry would free
                with contextlib.suppress(Exception):
                    await self.store.write(lambda tx: tx.leases.release(lease))

    @staticmethod
    def _writing(data, hook=None) -> Callable[[Tx], None]:
        def _write(tx: Tx) -> None:
            tx.append(data)
            if hook is not None:
                hook(tx)

        return _write

    async def _own(self, ex: _Execution) -> LeaseTenure | None:
        """Take the session's lease for this busy period (its tenure, to keep renewed); when another host holds it,
        forward the wake there instead and return None."""
        assert self.ownership is not None
        sid = ex.session_id
        lease = ex.lease or await self.ownership.take(sid)
        if lease is None:
            holder = await self.ownership.holding(sid)
            if holder is not None:
                await self.ownership.forward(holder, "wake", force=ex.force)
            ex.outcome = "forwarded"
            return None
        ex.lease = lease
        ex.tenure = tenure = self.ownership.tenure(lease, lambda: self._lost(ex))
        set_fence(lease, tenure)
        return tenure

    def _lost(self, ex: _Execution) -> None:
        """The lease changed hands under a running drain: stop it; the new owner continues the session."""
        ex.lost = True
        ex.pending_wake = False
        if ex.stopping is None:
            ex.stopping = "superseded"
        ex.cancel()

    async def _run(self, ex: _Execution) -> None:
        ex.task = asyncio.current_task()
        try:
            if ex.cancelled:
                return  # interrupted before it began
            if self.ownership is None:
                await self._busy(ex)
                return
            try:
                tenure = await self._own(ex)
            except asyncio.CancelledError:
                if ex.consumed():
                    return  # interrupted while taking the lease: nothing began, nothing to record
                raise
            if tenure is None:
                return
            try:
                # the busy period owns its lease's renewal: it ends with it
                async with owned_tasks() as keeping:
                    keeping.start_soon(self._keep, ex, tenure, name=f"lease:{ex.session_id}")
                    try:
                        await self._busy(ex)
                    finally:
                        keeping.cancel_scope.cancel()
            finally:
                tenure.end(lost=ex.lost)
        except asyncio.CancelledError:
            if not ex.consumed():
                raise
            # the interrupt arrived after the busy period's end was recorded: nothing is left to stop
        finally:
            self._release(ex)  # (idempotent: `_busy` released it already)

    async def _keep(self, ex: _Execution, tenure: LeaseTenure) -> None:
        assert self.ownership is not None
        try:
            await self.ownership.keep(tenure)
        except Exception:  # the drain runs on; the lease lapses (and fences it) if it cannot be renewed
            log.exception("renewing session %s's lease failed", ex.session_id)

    async def _busy(self, ex: _Execution) -> None:
        sid = ex.session_id
        outcome: str = "succeeded"
        terminal: object
        # lazy: the start commits with the drain's first write (or the terminal), one commit fewer per busy period
        started = self.store.submit(self._writing(
            ev.ExecutionStarted(sessionID=sid), (lambda tx: self._on_started(tx, sid)) if self._on_started else None),
            lazy=True)
        try:
            try:
                while True:
                    force, ex.force, ex.pending_wake = ex.force, False, False
                    await self.drain(sid, force)
                    if not ex.pending_wake:
                        break
                terminal = ev.ExecutionSucceeded(sessionID=sid)
            except asyncio.CancelledError:
                if not ex.consumed():
                    raise  # not this busy period's interrupt: the coordinator's scope is closing
                outcome = "interrupted"
                terminal = ev.ExecutionInterrupted(sessionID=sid, reason=ex.stopping or "shutdown")
            except DrainInterrupted as stop:
                outcome = "interrupted"
                terminal = ev.ExecutionInterrupted(sessionID=sid, reason=stop.reason)
            except DrainFailure as failure:
                outcome = "failed"
                terminal = ev.ExecutionFailed(sessionID=sid, error=failure.error)
            except SessionFencedError:
                log.warning("session %s was taken over by another host; this host stops executing it", sid)
                ex.lost = True
                outcome, terminal = "interrupted", None
            except Exception as exc:  # a defect: record it, never leave the session looking busy
                log.exception("session %s drain crashed", sid)
                outcome = "failed"
                terminal = ev.ExecutionFailed(sessionID=sid, error=SessionErrorInfo(
                    type=session_errors.UNKNOWN, message=f"{type(exc).__name__}: {exc}"))
            ex.outcome = outcome
            if not ex.lost:  # a former owner writes nothing more: the new one records the session's course
                await self._settle(ex, terminal, outcome)
        finally:
            try:
                self.store.kick()
                await asyncio.shield(started)  # committed by now (before the terminal): only its error is left
            except SessionFencedError:
                pass
            except Exception:
                log.exception("could not record the start of session %s's execution", sid)
            finally:
                self._release(ex)
