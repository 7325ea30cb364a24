"""Durable storage: the SQLite event log, its projections and the feeds that wake readers."""

from .db import Store, Tx
from .feed import DurableFeed, LiveBus, LiveSubscription
from .lock import DatabaseInUseError

__all__ = ["Store", "Tx", "DatabaseInUseError", "DurableFeed", "LiveBus", "LiveSubscription"]
