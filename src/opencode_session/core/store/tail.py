"""The newest durable events of recently active sessions, as announced in commit order, so that log followers that
keep pace read them from memory instead of querying and decoding the same rows once per follower."""

from __future__ import annotations

from collections import OrderedDict, deque
from itertools import islice

from ...schema.events import EventRecord

PER_SESSION = 32
SESSIONS = 512


class Tails:
    """Per session, the contiguous run of its latest announced events (at most `PER_SESSION`), for the `SESSIONS`
    sessions announced most recently. Only announcements feed it, so what it answers is always committed."""

    def __init__(self, per_session: int = PER_SESSION, sessions: int = SESSIONS) -> None:
        self._per_session = per_session
        self._sessions = sessions
        self._tails: OrderedDict[str, deque[EventRecord]] = OrderedDict()

    def add(self, record: EventRecord) -> None:
        sid = record.aggregate_id
        tail = self._tails.get(sid)
        if tail is None:
            tail = self._tails[sid] = deque(maxlen=self._per_session)
            if len(self._tails) > self._sessions:
                self._tails.popitem(last=False)
        else:
            self._tails.move_to_end(sid)
            if tail and tail[-1].sequence + 1 != record.sequence:
                tail.clear()  # never expected (announcements keep commit order); a gap must not be served
        tail.append(record)

    def after(self, aggregate_id: str, after: int, limit: int) -> list[EventRecord] | None:
        """The session's events with seq > `after` (at most `limit`), or None when the tail cannot tell (it does
        not reach back to `after + 1`, or holds nothing of the session)."""
        tail = self._tails.get(aggregate_id)
        if not tail:
            return None
        first = tail[0].sequence
        if after + 1 < first:
            return None
        start = after + 1 - first
        return list(islice(tail, start, start + limit)) if start < len(tail) else []
