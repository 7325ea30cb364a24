"""Session leases: which host executes a session (owner, epoch, expiry). The epoch moves on whenever the lease
changes hands, and is the fencing token every write of an execution is checked against."""

from __future__ import annotations

from ..rows import Lease
from .connection import Connection


class SqlLeases:
    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    def holder(self, session_id: str) -> Lease | None:
        row = self.conn.execute("SELECT owner, epoch, expires FROM session_lease WHERE session_id = ?",
                                (session_id,)).fetchone()
        return None if row is None or row[0] is None else Lease(session_id, row[0], int(row[1]), int(row[2]))

    def take(self, session_id: str, owner: str, now: int, expires: int, *, steal: bool = False) -> Lease | None:
        # One statement decides: the row is inserted, or updated only where the lease is free, expired, already
        # `owner`'s or stolen. Two hosts racing for it both reach this statement; the database serialises them on
        # the row, and the later one re-reads the row the earlier one wrote (PostgreSQL's ON CONFLICT DO UPDATE
        # sees the newest committed version even under READ COMMITTED), so it finds a live lease and gets no row:
        # never two winners of one epoch, and never a unique violation for the loser.
        # The epoch moves on whenever the lease changes hands, and also when its owner takes back a lease of its own
        # that expired: that owner had stopped the execution (it could not renew in time), so its sweep continues
        # the session as any host's would, under an epoch that fences whatever its old drain still tries to write.
        row = self.conn.execute(
            "INSERT INTO session_lease (session_id, owner, epoch, expires) VALUES (?, ?, 1, ?)"
            " ON CONFLICT (session_id) DO UPDATE SET"
            " epoch = CASE WHEN session_lease.owner = excluded.owner AND session_lease.expires >= ?"
            " THEN session_lease.epoch ELSE session_lease.epoch + 1 END,"
            " owner = excluded.owner, expires = excluded.expires"
            " WHERE session_lease.owner IS NULL OR session_lease.owner = excluded.owner"
            " OR session_lease.expires < ? OR ?"
            " RETURNING epoch",
            (session_id, owner, expires, now, now, bool(steal))).fetchone()
        return None if row is None else Lease(session_id, owner, int(row[0]), expires)

    def renew(self, lease: Lease, expires: int) -> bool:
        return self.conn.execute(
            "UPDATE session_lease SET expires = ? WHERE session_id = ? AND owner = ? AND epoch = ? RETURNING epoch",
            (expires, lease.session_id, lease.owner, lease.epoch)).fetchone() is not None

    def release(self, lease: Lease) -> None:
        self.conn.execute(
            "UPDATE session_lease SET owner = NULL, expires = 0 WHERE session_id = ? AND owner = ? AND epoch = ?",
            (lease.session_id, lease.owner, lease.epoch))

    def holds(self, lease: Lease) -> bool:
        """Whether `lease` is still the session's lease (its owner and epoch unchanged): the fencing check."""
        row = self.conn.execute("SELECT owner, epoch FROM session_lease WHERE session_id = ?",
                                (lease.session_id,)).fetchone()
        return row is not None and row[0] == lease.owner and int(row[1]) == lease.epoch

    def next_expiry(self, now: int, other_than: str) -> int | None:
        row = self.conn.execute("SELECT MIN(expires) FROM session_lease WHERE owner IS NOT NULL AND expires >= ?"
                                " AND owner <> ?", (now, other_than)).fetchone()
        return None if row is None or row[0] is None else int(row[0])

    _EXPIRED = ("SELECT session_id, owner, epoch, expires FROM session_lease WHERE owner IS NOT NULL AND expires < ?"
                " ORDER BY expires LIMIT ?")

    def expired(self, now: int, limit: int = 100) -> list[Lease]:
        """Leases still held whose expiry has passed: their owner stopped renewing (it died or lost the database)."""
        return self._leases(self._EXPIRED, now, limit)

    def claimable(self, now: int, limit: int = 100) -> list[Lease]:
        return self.expired(now, limit)  # (one writer holds the whole database: no row is ever another's)

    def _leases(self, query: str, now: int, limit: int) -> list[Lease]:
        rows = self.conn.execute(query, (now, limit)).fetchall()
        return [Lease(row[0], row[1], int(row[2]), int(row[3])) for row in rows]
