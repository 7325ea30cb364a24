"""The fencing token of an execution: the session lease its writes are made under, and its tenure (how recently it
was renewed, by the execution's own clock). A drain sets both for its task (and the tasks it starts); every write the
Store queues meanwhile is refused once the lease changed hands, and nothing leaves the host (a provider request, a
tool) unless the lease cannot have expired (`confirm_lease`)."""

from __future__ import annotations

from contextvars import ContextVar
from typing import Protocol

from .rows import Lease

_fence: ContextVar[Lease | None] = ContextVar("ocs_fence", default=None)


class SessionFencedError(Exception):
    """A write of an execution whose session lease another host has taken since (or that was released): refused,
    so a paused or partitioned former owner never writes after the new owner took over."""

    def __init__(self, lease: Lease, message: str | None = None) -> None:
        super().__init__(message or f"session {lease.session_id} is no longer executed here (lease epoch"
                                    f" {lease.epoch} of {lease.owner} was superseded)")
        self.lease = lease


class LeaseLapsedError(SessionFencedError):
    """Something was about to leave the host (a provider request, a tool run) for an execution whose lease may have
    expired and could not be renewed: it is not sent, and the execution stops as a fenced one does."""

    def __init__(self, lease: Lease) -> None:
        super().__init__(lease, f"session {lease.session_id}: lease epoch {lease.epoch} may have lapsed and could not"
                                " be renewed; nothing more is sent for it from this host")


class Tenure(Protocol):
    """An execution's hold on its lease."""

    async def confirm(self) -> None:
        """Return once the lease cannot have expired (renewing it first when its last renewal is too old to be
        sure); LeaseLapsedError when it may have and could not be renewed."""
        ...

    def lose(self) -> None:
        """A write of the execution found its lease superseded: from now on it sends and writes nothing more."""
        ...

    def fence(self) -> Lease | None:
        """The lease to write under while the execution holds it; None once it ended and released it;
        LeaseLapsedError once it was lost."""
        ...


_tenure: ContextVar[Tenure | None] = ContextVar("ocs_tenure", default=None)


def current_fence() -> Lease | None:
    return _fence.get()


def set_fence(lease: Lease | None, tenure: Tenure | None = None) -> None:
    """Make `lease` the fence of the writes this task (and the tasks it creates from now on) queues, and `tenure`
    what `confirm_lease` asks before something leaves the host."""
    _fence.set(lease)
    _tenure.set(tenure)


def current_tenure() -> Tenure | None:
    return _tenure.get()


async def confirm_lease(tenure: Tenure | None = None) -> None:
    """Before a provider request or a tool run: return once the execution's lease (this task's, or `tenure`) cannot
    have expired, else raise LeaseLapsedError. Without a lease (one host on SQLite) it returns at once."""
    held = tenure if tenure is not None else _tenure.get()
    if held is not None:
        await held.confirm()
