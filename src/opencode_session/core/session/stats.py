"""Usage statistics over a time range (`experimental.session.stats`): the store counts in SQL; this turns the range and
its time zone into what the SQL needs (the zone's offsets as steps in time) and the counted rows into the public
shape."""

from __future__ import annotations

import datetime as dt
import functools
import time
import zoneinfo
from typing import TYPE_CHECKING, Any

from ...schema.common import TokenCache, Tokens
from ...schema.errors import InvalidRequestError
from ...schema.stats import SessionStats, StatsAgent, StatsDay, StatsModel, StatsRange, StatsTool, StatsUsage
from ..store.rows import StatsFilter, UsageRow

if TYPE_CHECKING:  # `counted_stats` reads through a read-only connection's StatsReads, without the store
    from ..store import Store
    from ..store.rows import StatsReads

_HOUR_MS = 3_600_000
_DAY_MS = 24 * _HOUR_MS
_WEEK_MS = 7 * 24 * _HOUR_MS  # no zone changes its offset twice in a week
MAX_SHIFTS = 400  # offsets over ~200 years of daylight saving: a longer range counts in the latest offsets


def zone(name: str | None) -> zoneinfo.ZoneInfo | dt.timezone:
    """The named IANA time zone (None: UTC); InvalidRequestError for a name this machine does not know."""
    if name is None or name in ("UTC", "Etc/UTC"):
        return dt.UTC
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
        raise InvalidRequestError(f"Unknown time zone: {name!r}", kind="query", field="timezone") from None


def _offset(tz: dt.tzinfo, at_ms: int) -> int:
    when = dt.datetime.fromtimestamp(at_ms / 1000, dt.UTC).astimezone(tz)
    offset = when.utcoffset()
    return 0 if offset is None else int(offset.total_seconds() * 1000)


@functools.lru_cache(maxsize=64)
def shifts(tz: dt.tzinfo, start: int, end: int) -> tuple[tuple[tuple[int, int], ...], int]:
    """The zone's offset over [start, end) as steps: each (until, offset) holds before `until`, the last offset after
    the last step. Found by sampling weekly and narrowing each change to the millisecond."""
    steps: list[tuple[int, int]] = []
    current = _offset(tz, start)
    at = start
    while at < end and len(steps) < MAX_SHIFTS:
        following = min(at + _WEEK_MS, end)
        later = _offset(tz, following)
        if later != current:
            low, high = at, following  # the change lies in (low, high]
            while high - low > 1:
                middle = (low + high) // 2
                if _offset(tz, middle) == current:
                    low = middle
                else:
                    high = middle
            steps.append((high, current))
            current = _offset(tz, high)
        at = following
    return tuple(steps), current


def _usage(row: UsageRow | None) -> dict[str, Any]:
    if row is None:
        return {"sessions": 0, "prompts": 0, "steps": 0, "failed": 0, "tokens": Tokens(), "cost": 0.0}
    return {"sessions": row.sessions, "prompts": row.prompts, "steps": row.steps, "failed": row.failed,
            "tokens": Tokens(input=row.input, output=row.output, reasoning=row.reasoning,
                             cache=TokenCache(read=row.cache_read, write=row.cache_write)),
            "cost": row.cost}


async def session_stats(store: Store, *, start: int | None = None, end: int | None = None,
                        project: str | None = None, timezone: str | None = None, tools: bool = True) -> SessionStats:
    """Usage in [start, end) (epoch ms; omitted: from the beginning, until now), in sessions of `project` (None: every
    project), its days counted in `timezone` (IANA; None: UTC). InvalidRequestError for an unknown zone or an empty
    range."""
    tz, lo, hi = _range(start, end, timezone)
    counted = await store.read(lambda reader: _count(reader.stats, tz, lo, hi, project, tools))
    return _assemble(counted, start, end, timezone)


def counted_stats(stats: StatsReads, *, start: int | None = None, end: int | None = None, project: str | None = None,
                  timezone: str | None = None, tools: bool = True) -> SessionStats:
    """`session_stats` read through `stats` as it is (a read-only connection's: `ocs stats` on a local database)."""
    tz, lo, hi = _range(start, end, timezone)
    return _assemble(_count(stats, tz, lo, hi, project, tools), start, end, timezone)


def _now_ms() -> int:
    return int(time.time() * 1000)


def _range(start: int | None, end: int | None, timezone: str | None) -> tuple[dt.tzinfo, int, int]:
    tz = zone(timezone)
    lo = 0 if start is None else start
    hi = _now_ms() + 1 if end is None else end
    if hi <= lo:
        raise InvalidRequestError("The range ends before it starts: `to` must be later than `from`", kind="query",
                                  field="to")
    return tz, lo, hi


def _count(stats: StatsReads, tz: dt.tzinfo, lo: int, hi: int, project: str | None, tools: bool) -> tuple[Any, ...]:
    # the zone's offsets matter only from the oldest session on and until now (no message is newer); whole days keep
    # the cache warm
    until = min(hi, _now_ms() + _DAY_MS)
    until = until - until % _DAY_MS + _DAY_MS
    oldest = min(max(lo, stats.earliest() or until), until)
    steps, last = shifts(tz, oldest - oldest % _DAY_MS, until)
    where = StatsFilter(start=lo, end=hi, project=project, shifts=steps, offset=last)
    return stats.created(where), stats.usage(where), stats.tools(where) if tools else None


def _assemble(counted: tuple[Any, ...], start: int | None, end: int | None, timezone: str | None) -> SessionStats:
    created, usage, used = counted
    total, models, agents, days = usage["total"], usage["model"], usage["agent"], usage["day"]
    epoch = dt.date(1970, 1, 1)
    return SessionStats(
        range=StatsRange(from_=start, to=end, timezone=timezone or "UTC"),
        created=created,
        total=StatsUsage(**_usage(total[0] if total else None)),
        models=[StatsModel(providerID=r.key[0] or "", modelID=r.key[1] or "", **_usage(r)) for r in models],
        agents=[StatsAgent(agent=r.key[0] or "", **_usage(r)) for r in agents],
        days=[StatsDay(day=(epoch + dt.timedelta(days=int(r.key[0]))).isoformat(), **_usage(r))
              for r in days],
        tools=None if used is None else [StatsTool(tool=t, calls=c, failures=f) for t, c, f in used],
    )
