"""Usage statistics in SQL: prompts, Steps, tokens and cost in all, per model, per agent and per local day (one
statement), tool calls and failures per tool, and sessions created, over a time range (both backends), counted from
the usage projection (`usage.py`)."""

from __future__ import annotations

from typing import Any

from ..rows import StatsFilter, UsageRow
from .connection import Connection

_DAY_MS = 86_400_000

# Usage is summed per quarter hour (the `_period` tables, which triggers keep): a range reads the sums of the quarter
# hours wholly inside it and the rows of the parts at either end. Every time zone's offset and change of offset falls
# on a quarter hour, so a quarter hour is wholly inside one local day (a zone whose does not reads the rows alone).
PERIOD_MS = 900_000

# Each counted prompt's and Step's sums (`n` of them; a quarter hour's per session, type, agent and model), as the
# materialized CTE `m`, grouped four ways in one statement: the total, per model and per agent (Steps only: a prompt
# has neither), per local day.
_USAGE = "session_id, type, {n}, failed, input, output, reasoning, cache_read, cache_write, cost, {keys}, time_created"
_ROWS = _USAGE.format(n="1 AS n", keys="provider, model, agent")
_SUMS_OF_PERIOD = _USAGE.format(n="n", keys="NULLIF(provider, '') AS provider, NULLIF(model, '') AS model,"
                                " NULLIF(agent, '') AS agent")
_SUMS = (
    "count(DISTINCT session_id),"
    " sum(CASE WHEN type = 'user' THEN n ELSE 0 END), sum(CASE WHEN type = 'assistant' THEN n ELSE 0 END),"
    " sum(failed), coalesce(sum(input), 0), coalesce(sum(output), 0), coalesce(sum(reasoning), 0),"
    " coalesce(sum(cache_read), 0), coalesce(sum(cache_write), 0), coalesce(sum(cost), 0)"
)
_GROUPED = " UNION ALL ".join((
    f"SELECT 'total', NULL, NULL, {_SUMS} FROM m",
    f"SELECT 'model', provider, model, {_SUMS} FROM m WHERE type = 'assistant' GROUP BY provider, model",
    f"SELECT 'agent', agent, NULL, {_SUMS} FROM m WHERE type = 'assistant' GROUP BY agent",
    f"SELECT 'day', CAST(day AS TEXT), NULL, {_SUMS} FROM m GROUP BY day",
))
_IN_PROJECT = " AND session_id IN (SELECT id FROM session WHERE project_id = ?)"
_RANGE = " WHERE time_created >= ? AND time_created < ?"


def _aligned(where: StatsFilter) -> bool:
    return where.offset % PERIOD_MS == 0 and all(until % PERIOD_MS == 0 and offset % PERIOD_MS == 0
                                                 for until, offset in where.shifts)


def _parts(where: StatsFilter, sums: bool) -> tuple[tuple[int, int], tuple[tuple[int, int], ...]]:
    """The range's whole quarter hours [first, last) (empty when it has none, when its zone's offsets are not whole
    quarter hours, or when there are no `sums` to read) and the parts of it outside them, read row by row."""
    first = -(-where.start // PERIOD_MS) * PERIOD_MS
    last = where.end // PERIOD_MS * PERIOD_MS
    if first >= last or not sums or not _aligned(where):
        return (where.end, where.end), ((where.start, where.end),)
    return (first, last), tuple(part for part in ((where.start, first), (last, where.end)) if part[0] < part[1])


def _shift(where: StatsFilter) -> tuple[str, list[Any]]:
    """The local `day` number of a time_created as a column, and its parameters."""
    params: list[Any] = []
    if where.shifts:
        cases = " ".join("WHEN time_created < CAST(? AS BIGINT) THEN CAST(? AS BIGINT)" for _ in where.shifts)
        shift = f"CASE {cases} ELSE CAST(? AS BIGINT) END"
        for until, offset in where.shifts:
            params += [until, offset]
    else:
        shift = "CAST(? AS BIGINT)"
    params.append(where.offset)
    return f"(time_created + {shift}) / {_DAY_MS} AS day", params


def _union(where: StatsFilter, period: tuple[str, str] | None, rows: tuple[str, str]) -> tuple[str, list[Any]]:
    """The sums of the range's whole quarter hours (`period`: its table and columns; None: none) and the rows of its
    other parts (`rows`: table and columns), as one UNION ALL, and its parameters."""
    whole, edges = _parts(where, period is not None)
    project = _IN_PROJECT if where.project is not None else ""
    selects: list[str] = []
    params: list[Any] = []
    if period is not None and whole[0] < whole[1]:
        selects.append(f"SELECT {period[1]} FROM {period[0]}{_RANGE}{project}")
        params += [*whole, *([where.project] if where.project is not None else [])]
    for edge in edges:
        selects.append(f"SELECT {rows[1]} FROM {rows[0]}{_RANGE}{project}")
        params += [*edge, *([where.project] if where.project is not None else [])]
    return " UNION ALL ".join(selects), params


class SqlStats:
    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    def usage(self, where: StatsFilter) -> dict[str, list[UsageRow]]:
        day, day_params = _shift(where)
        counted, params = _union(where, ("session_usage_period", _SUMS_OF_PERIOD), ("session_usage", _ROWS))
        cte = f"WITH m AS MATERIALIZED (SELECT *, {day} FROM ({counted}) AS c)"
        params = day_params + params
        out: dict[str, list[UsageRow]] = {"total": [], "model": [], "agent": [], "day": []}
        for row in self.conn.execute(f"{cte} {_GROUPED}", params).fetchall():
            kind, first, second, *values = list(row)
            if not values[0]:
                continue  # the total of nothing
            key: tuple[Any, ...] = (() if kind == "total" else (first, second) if kind == "model"
                                    else (int(first),) if kind == "day" else (first,))
            n = [int(v or 0) for v in values[:9]]
            out[kind].append(UsageRow(key, sessions=n[0], prompts=n[1], steps=n[2], failed=n[3], input=n[4],
                                      output=n[5], reasoning=n[6], cache_read=n[7], cache_write=n[8],
                                      cost=float(values[9] or 0)))
        for rows in out.values():
            rows.sort(key=lambda r: tuple("" if k is None else k for k in r.key))
        return out

    def tools(self, where: StatsFilter) -> list[tuple[str, int, int]]:
        # per tool, without its session (tool statistics count calls, not sessions), unless a project is asked
        period = None if where.project is not None else ("session_usage_tool_period",
                                                         "NULLIF(tool, '') AS tool, calls, failed")
        counted, params = _union(where, period, ("session_usage_tool", "tool, 1 AS calls, failed"))
        rows = self.conn.execute(
            f"SELECT tool, sum(calls) AS calls, sum(failed) AS failures FROM ({counted}) AS c"
            " GROUP BY tool ORDER BY calls DESC, tool", params).fetchall()
        return [(str(row[0]), int(row[1]), int(row[2])) for row in rows]

    def earliest(self) -> int | None:
        """When the first session still stored was created (no message is older)."""
        row = self.conn.execute("SELECT min(time_created) FROM session").fetchone()
        return None if row is None or row[0] is None else int(row[0])

    def created(self, where: StatsFilter) -> int:
        sql = "SELECT count(*) FROM session WHERE time_created >= ? AND time_created < ?"
        params: list[Any] = [where.start, where.end]
        if where.project is not None:
            sql += " AND project_id = ?"
            params.append(where.project)
        return int(self.conn.execute(sql, params).fetchone()[0])
