"""Durable storage: the SQLite event log, its projections and the feeds that wake readers."""

from .db import Store, Tx
from .feed import DurableFeed, LiveBus, LiveSubscription

__all__ = ["Store", "Tx", "DurableFeed", "LiveBus", "LiveSubscription"]
