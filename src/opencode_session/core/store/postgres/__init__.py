"""The PostgreSQL backend of the store: one database shared by several hosts (`ocs serve --db postgresql://...`)."""

from .backend import PostgresBackend, describe

__all__ = ["PostgresBackend", "describe"]
