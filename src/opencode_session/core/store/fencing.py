"""The fencing token of an execution: the session lease its writes are made under. A drain sets it for its task
(and the tasks it starts); every write the Store queues meanwhile is refused once the lease changed hands."""

from __future__ import annotations

from contextvars import ContextVar

from .rows import Lease

_fence: ContextVar[Lease | None] = ContextVar("ocs_fence", default=None)


class SessionFencedError(Exception):
    """A write of an execution whose session lease another host has taken since (or that was released): refused,
    so a paused or partitioned former owner never writes after the new owner took over."""

    def __init__(self, lease: Lease) -> None:
        super().__init__(f"session {lease.session_id} is no longer executed here (lease epoch {lease.epoch} of"
                         f" {lease.owner} was superseded)")
        self.lease = lease


def current_fence() -> Lease | None:
    return _fence.get()


def set_fence(lease: Lease | None) -> None:
    """Make `lease` the fence of the writes this task (and the tasks it creates from now on) queues."""
    _fence.set(lease)
