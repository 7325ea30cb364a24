"""Usage statistics in SQL: prompts, Steps, tokens and cost in all, per model, per agent and per local day (one
statement), tool calls and failures per tool, and sessions created, over a time range (both backends), counted from
the usage projection (`usage.py`)."""

from __future__ import annotations

from typing import Any

from ..rows import StatsFilter, UsageRow
from .connection import Connection

_DAY_MS = 86_400_000

# Usage is kept per quarter hour too (the tables the triggers of the usage projection keep): a range reads the
# quarter hours wholly inside it from them and the rows of the parts at either end. Every time zone's offset and change
# of offset falls on a quarter hour, so a quarter hour lies within one local day (a zone whose does not: rows alone).
PERIOD_MS = 900_000

_KEYS_OF_PERIOD = "NULLIF(provider, '') AS provider, NULLIF(model, '') AS model, NULLIF(agent, '') AS agent"
# The counted prompts' and Steps' sums (`n` of them) by type, model and agent, per quarter hour or per row.
_SUMS_OF_PERIOD = ("session_usage_sums", "type, n, failed, input, output, reasoning, cache_read, cache_write, cost,"
                   f" {_KEYS_OF_PERIOD}, time_created")
_SUMS_OF_ROWS = ("session_usage", "type, 1 AS n, failed, input, output, reasoning, cache_read, cache_write, cost,"
                 " provider, model, agent, time_created")
# Which sessions were active (their Steps by model and agent), per quarter hour or per row.
_ACTIVE_OF_PERIOD = ("session_usage_active", "session_id, time_created")
_ACTIVE_OF_ROWS = ("session_usage", "session_id, time_created")
_STEPS_OF_PERIOD = ("session_usage_period", f"session_id, {_KEYS_OF_PERIOD}")
_STEPS_OF_ROWS = ("session_usage", "session_id, provider, model, agent")
# Four groupings in one statement each: the total, per model and per agent (a prompt counts for the first Step that
# answered it; one no Step answered has neither: its row's model or agent is NULL), per local day; of the sums, and of
# the sessions.
_SUMS = (
    "sum(CASE WHEN type = 'user' THEN n ELSE 0 END), sum(CASE WHEN type = 'assistant' THEN n ELSE 0 END),"
    " sum(failed), coalesce(sum(input), 0), coalesce(sum(output), 0), coalesce(sum(reasoning), 0),"
    " coalesce(sum(cache_read), 0), coalesce(sum(cache_write), 0), coalesce(sum(cost), 0)"
)
_SESSIONS = "count(DISTINCT session_id)"
_SESSIONS_GROUPED = " UNION ALL ".join((
    f"SELECT 'total', NULL, NULL, {_SESSIONS} FROM a",
    f"SELECT 'day', CAST(day AS TEXT), NULL, {_SESSIONS} FROM a GROUP BY day",
    f"SELECT 'model', provider, model, {_SESSIONS} FROM s GROUP BY provider, model",
    f"SELECT 'agent', agent, NULL, {_SESSIONS} FROM s GROUP BY agent",
))


def _grouped(values: str) -> str:
    return " UNION ALL ".join((
        f"SELECT 'total', NULL, NULL, {values} FROM m",
        f"SELECT 'model', provider, model, {values} FROM m GROUP BY provider, model",
        f"SELECT 'agent', agent, NULL, {values} FROM m GROUP BY agent",
        f"SELECT 'day', CAST(day AS TEXT), NULL, {values} FROM m GROUP BY day",
    ))


_RANGE = " WHERE time_created >= ? AND time_created < ?"


def _aligned(where: StatsFilter) -> bool:
    return where.offset % PERIOD_MS == 0 and all(until % PERIOD_MS == 0 and offset % PERIOD_MS == 0
                                                 for until, offset in where.shifts)


def _parts(where: StatsFilter) -> tuple[tuple[int, int], tuple[tuple[int, int], ...]]:
    """The range's whole quarter hours [first, last) (empty when it has none, or when its zone's offsets are not
    whole quarter hours) and the parts of it outside them, read row by row."""
    first = -(-where.start // PERIOD_MS) * PERIOD_MS
    last = where.end // PERIOD_MS * PERIOD_MS
    if first >= last or not _aligned(where):
        return (where.end, where.end), ((where.start, where.end),)
    return (first, last), tuple(part for part in ((where.start, first), (last, where.end)) if part[0] < part[1])


def _day(where: StatsFilter) -> tuple[str, list[Any]]:
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


def _union(where: StatsFilter, period: tuple[str, str] | None, rows: tuple[str, str],
           project: tuple[str, str], only: str = "") -> tuple[str, list[Any]]:
    """The range's whole quarter hours read from `period` (its table and columns; None: none) and its other parts
    from `rows` (`only`: a further condition on them), as one UNION ALL, and its parameters; `project`: how each of
    them keeps one project's."""
    whole, edges = _parts(where) if period is not None else ((where.end, where.end), ((where.start, where.end),))
    selects: list[str] = []
    params: list[Any] = []
    in_project = [where.project] if where.project is not None else []
    if period is not None and whole[0] < whole[1]:
        selects.append(f"SELECT {period[1]} FROM {period[0]}{_RANGE}{project[0] if in_project else ''}")
        params += [*whole, *in_project]
    for edge in edges:
        selects.append(f"SELECT {rows[1]} FROM {rows[0]}{_RANGE}{only}{project[1] if in_project else ''}")
        params += [*edge, *in_project]
    return " UNION ALL ".join(selects), params


_OF_PROJECT = " AND project_id = ?"
_OF_PROJECT_SESSIONS = " AND session_id IN (SELECT id FROM session WHERE project_id = ?)"


class SqlStats:
    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    def _groups(self, where: StatsFilter, period: tuple[str, str], rows: tuple[str, str], project: tuple[str, str],
                values: str) -> list[Any]:
        day, params = _day(where)
        counted, more = _union(where, period, rows, project)
        return list(self.conn.execute(f"WITH m AS MATERIALIZED (SELECT *, {day} FROM ({counted}) AS c)"
                                      f" {_grouped(values)}", params + more).fetchall())

    def _sessions(self, where: StatsFilter) -> dict[tuple[Any, ...], int]:
        """How many sessions were active in all and per local day, and had Steps per model and per agent."""
        day, params = _day(where)
        project = (_OF_PROJECT_SESSIONS, _OF_PROJECT)
        active, more = _union(where, _ACTIVE_OF_PERIOD, _ACTIVE_OF_ROWS, project)
        steps, most = _union(where, _STEPS_OF_PERIOD, _STEPS_OF_ROWS, project, " AND type = 'assistant'")
        rows = self.conn.execute(f"WITH a AS MATERIALIZED (SELECT session_id, {day} FROM ({active}) AS c),"
                                 f" s AS MATERIALIZED ({steps}) {_SESSIONS_GROUPED}", params + more + most).fetchall()
        return {(row[0], row[1], row[2]): int(row[3] or 0) for row in rows}

    def usage(self, where: StatsFilter) -> dict[str, list[UsageRow]]:
        sessions = self._sessions(where)
        out: dict[str, list[UsageRow]] = {"total": [], "model": [], "agent": [], "day": []}
        for row in self._groups(where, _SUMS_OF_PERIOD, _SUMS_OF_ROWS, (_OF_PROJECT, _OF_PROJECT), _SUMS):
            kind, first, second, *values = list(row)
            n = [int(v or 0) for v in values[:8]]
            if not n[0] + n[1]:
                continue  # the total of nothing
            key: tuple[Any, ...] = (() if kind == "total" else (first, second) if kind == "model"
                                    else (int(first),) if kind == "day" else (first,))
            out[kind].append(UsageRow(key, sessions=sessions.get((kind, first, second), 0), prompts=n[0], steps=n[1],
                                      failed=n[2], input=n[3], output=n[4], reasoning=n[5], cache_read=n[6],
                                      cache_write=n[7], cost=float(values[8] or 0)))
        for rows in out.values():
            rows.sort(key=lambda r: tuple("" if k is None else k for k in r.key))
        return out

    def tools(self, where: StatsFilter) -> list[tuple[str, int, int]]:
        counted, params = _union(where, ("session_usage_tool_period", "NULLIF(tool, '') AS tool, calls, failed"),
                                 ("session_usage_tool", "tool, 1 AS calls, failed"), (_OF_PROJECT, _OF_PROJECT))
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
