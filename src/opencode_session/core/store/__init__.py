"""Durable storage: the SQLite event log, its projections and the feeds that wake readers.

All SQL lives in this package, one module per concern (events, sessions, messages, pending, instructions, suspension,
keyset paging); code above it speaks in their domain operations over a Reader or a Tx, so another backend is a
replacement of these modules, not a hunt through the runtime."""

from .db import PROJECTION_TABLES, Reader, Store, Tx
from .feed import DurableFeed, LiveBus, LiveSubscription
from .lock import DatabaseInUseError

__all__ = ["PROJECTION_TABLES", "Reader", "Store", "Tx", "DatabaseInUseError", "DurableFeed", "LiveBus",
           "LiveSubscription"]
