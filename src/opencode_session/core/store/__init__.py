"""Durable storage: the event log, its projections and the feeds that wake readers, over a backend.

Core speaks in the operations `rows.py` declares (events, sessions, messages, pending input, instruction state,
saved permissions, suspension marks), through a `Reader` or a `Tx` that a `Store` hands out; `sqlite/` implements
them (the embedded default), and a backend for another database implements the same protocols (`backend.py`).

Each name below is imported from its module on first use, so a command that only reads a database file
(`sqlite/readonly.py`) loads neither the store's writer side nor the schema's event models."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .backend import Backend
    from .backends import (
        database_files,
        describe_database,
        is_postgres,
        open_backend,
        require_backend,
        server_record_file,
    )
    from .errors import BackendNotInstalledError, DatabaseInUseError, DatabaseNotFoundError, StoreError
    from .feed import DurableFeed, LiveBus, LiveSubscription
    from .fencing import (
        LeaseLapsedError,
        SessionFencedError,
        Tenure,
        confirm_lease,
        current_fence,
        current_tenure,
        set_fence,
    )
    from .rows import Checkpoint, HistoryRow, Lease, PendingInput, Placement, Reader, SessionFilter, Writer
    from .store import Store, Tx, live_event, now_ms

__all__ = ["Backend", "BackendNotInstalledError", "Checkpoint", "DatabaseInUseError", "DatabaseNotFoundError",
           "DurableFeed", "HistoryRow", "Lease", "LeaseLapsedError", "LiveBus", "LiveSubscription", "PendingInput",
           "Placement", "Reader", "SessionFencedError", "SessionFilter", "Store", "StoreError", "Tenure", "Tx",
           "Writer", "confirm_lease", "current_fence", "current_tenure", "database_files", "describe_database",
           "is_postgres", "live_event", "now_ms", "open_backend", "require_backend", "server_record_file",
           "set_fence"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        for where in (".errors", ".backends", ".rows", ".fencing", ".backend", ".feed", ".store"):  # cheapest first
            module = import_module(where, __name__)
            if hasattr(module, name):
                value = globals()[name] = getattr(module, name)  # looked up once
                return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
