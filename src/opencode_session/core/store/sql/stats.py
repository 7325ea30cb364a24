"""Usage statistics in SQL: prompts, Steps, tokens and cost in all, per model, per agent and per local day (one
statement), tool calls and failures per tool, and sessions created, over a time range (both backends), counted from
the usage projection (`usage.py`)."""

from __future__ import annotations

from typing import Any

from ..rows import StatsFilter, UsageRow
from .connection import Connection

_DAY_MS = 86_400_000

# Each counted prompt's and Step's row of the usage projection (the CTE is materialized), grouped four ways in one
# statement: the total, per model and per agent (Steps only: a prompt has neither), per local day.
_COLUMNS = ("session_id, type, failed, input, output, reasoning, cache_read, cache_write, cost, provider, model,"
            " agent")
_SUMS = (
    "count(DISTINCT session_id),"
    " sum(CASE WHEN type = 'user' THEN 1 ELSE 0 END), sum(CASE WHEN type = 'assistant' THEN 1 ELSE 0 END),"
    " sum(failed), coalesce(sum(input), 0), coalesce(sum(output), 0), coalesce(sum(reasoning), 0),"
    " coalesce(sum(cache_read), 0), coalesce(sum(cache_write), 0), coalesce(sum(cost), 0)"
)
_GROUPED = " UNION ALL ".join((
    f"SELECT 'total', NULL, NULL, {_SUMS} FROM m",
    f"SELECT 'model', provider, model, {_SUMS} FROM m WHERE type = 'assistant' GROUP BY provider, model",
    f"SELECT 'agent', agent, NULL, {_SUMS} FROM m WHERE type = 'assistant' GROUP BY agent",
    f"SELECT 'day', CAST(day AS TEXT), NULL, {_SUMS} FROM m GROUP BY day",
))


def _counted(where: StatsFilter, table: str, columns: str, day: bool) -> tuple[str, list[Any]]:
    """The counted rows of a usage table as a materialized CTE `m` (with the local `day` number when asked) and its
    parameters."""
    params: list[Any] = []
    if day:
        if where.shifts:
            cases = " ".join("WHEN time_created < CAST(? AS BIGINT) THEN CAST(? AS BIGINT)" for _ in where.shifts)
            shift = f"CASE {cases} ELSE CAST(? AS BIGINT) END"
            for until, offset in where.shifts:
                params += [until, offset]
        else:
            shift = "CAST(? AS BIGINT)"
        params.append(where.offset)
        columns += f", (time_created + {shift}) / {_DAY_MS} AS day"
    sql = (f"WITH m AS MATERIALIZED (SELECT {columns} FROM {table}"
           " WHERE time_created >= ? AND time_created < ?"
           + (" AND session_id IN (SELECT id FROM session WHERE project_id = ?)" if where.project is not None else "")
           + ")")
    params += [where.start, where.end]
    if where.project is not None:
        params.append(where.project)
    return sql, params


class SqlStats:
    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    def usage(self, where: StatsFilter) -> dict[str, list[UsageRow]]:
        cte, params = _counted(where, "session_usage", _COLUMNS, True)
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
        cte, params = _counted(where, "session_usage_tool", "tool, failed", False)
        rows = self.conn.execute(
            f"{cte} SELECT tool, count(*) AS calls, sum(failed) AS failures FROM m"
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
