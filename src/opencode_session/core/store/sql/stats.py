"""Usage statistics in SQL: prompts, Steps, tokens and cost grouped in all, per model, per agent or per local day,
tool calls and failures per tool, and sessions created, over a time range (one statement each, both backends)."""

from __future__ import annotations

from typing import Any

from ..rows import StatsFilter, UsageRow
from .connection import Connection

_DAY_MS = 86_400_000

_USAGE = (
    "count(DISTINCT session_id),"
    " sum(CASE WHEN type = 'user' THEN 1 ELSE 0 END),"
    " sum(CASE WHEN type = 'assistant' THEN 1 ELSE 0 END),"
    " sum(CASE WHEN type = 'assistant' AND json_extract(data, '$.error') IS NOT NULL THEN 1 ELSE 0 END),"
    " coalesce(sum(CAST(json_extract(data, '$.tokens.input') AS BIGINT)), 0),"
    " coalesce(sum(CAST(json_extract(data, '$.tokens.output') AS BIGINT)), 0),"
    " coalesce(sum(CAST(json_extract(data, '$.tokens.reasoning') AS BIGINT)), 0),"
    " coalesce(sum(CAST(json_extract(data, '$.tokens.cache.read') AS BIGINT)), 0),"
    " coalesce(sum(CAST(json_extract(data, '$.tokens.cache.write') AS BIGINT)), 0),"
    " coalesce(sum(CAST(json_extract(data, '$.cost') AS DOUBLE PRECISION)), 0)"
)

# The grouping values of each breakdown (a day: the local day number, with the time shifted into local time).
_KEYS = {
    "total": (),
    "model": ("json_extract(data, '$.model.providerID')", "json_extract(data, '$.model.id')"),
    "agent": ("json_extract(data, '$.agent')",),
    "day": ("day",),
}


def _messages(where: StatsFilter, types: str, day: bool) -> tuple[str, list[Any]]:
    """The counted messages as a CTE `m` (with the local `day` number when asked) and its parameters."""
    params: list[Any] = []
    columns = "msg.session_id, msg.type, msg.data"
    if day:
        if where.shifts:
            cases = " ".join("WHEN msg.time_created < CAST(? AS BIGINT) THEN CAST(? AS BIGINT)" for _ in where.shifts)
            shift = f"CASE {cases} ELSE CAST(? AS BIGINT) END"
            for until, offset in where.shifts:
                params += [until, offset]
        else:
            shift = "CAST(? AS BIGINT)"
        params.append(where.offset)
        columns += f", (msg.time_created + {shift}) / {_DAY_MS} AS day"
    sql = (f"WITH m AS (SELECT {columns} FROM session_message msg"
           + (" JOIN session s ON s.id = msg.session_id" if where.project is not None else "")
           + f" WHERE msg.type IN ({types}) AND msg.time_created >= ? AND msg.time_created < ?"
           + (" AND s.project_id = ?" if where.project is not None else "") + ")")
    params += [where.start, where.end]
    if where.project is not None:
        params.append(where.project)
    return sql, params


class SqlStats:
    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    def usage(self, where: StatsFilter, by: str) -> list[UsageRow]:
        keys = _KEYS[by]
        # per model and per agent count Steps only: a prompt has neither
        types = "'user', 'assistant'" if by in ("total", "day") else "'assistant'"
        cte, params = _messages(where, types, by == "day")
        select = ", ".join((*keys, _USAGE))
        group = f" GROUP BY {', '.join(keys)} ORDER BY {', '.join(keys)}" if keys else ""
        rows = self.conn.execute(f"{cte} SELECT {select} FROM m{group}", params).fetchall()
        out = []
        for row in rows:
            n = len(keys)
            values = list(row)
            if values[n] == 0:
                continue  # the total of nothing: no row
            out.append(UsageRow(tuple(values[:n]), *(int(v or 0) for v in values[n:n + 9]),
                                float(values[n + 9] or 0)))
        return out

    def tools(self, where: StatsFilter) -> list[tuple[str, int, int]]:
        cte, params = _messages(where, "'assistant'", False)
        rows = self.conn.execute(
            f"{cte} SELECT json_extract(part.value, '$.name') AS tool, count(*) AS calls,"
            " sum(CASE WHEN json_extract(part.value, '$.state.status') = 'error' THEN 1 ELSE 0 END) AS failures"
            " FROM m, json_each(m.data, '$.content') AS part"
            " WHERE json_extract(part.value, '$.type') = 'tool'"
            " AND json_extract(part.value, '$.state.status') IN ('completed', 'error')"
            " GROUP BY json_extract(part.value, '$.name') ORDER BY calls DESC, tool", params).fetchall()
        return [(str(row[0]), int(row[1]), int(row[2])) for row in rows]

    def created(self, where: StatsFilter) -> int:
        sql = "SELECT count(*) FROM session WHERE time_created >= ? AND time_created < ?"
        params: list[Any] = [where.start, where.end]
        if where.project is not None:
            sql += " AND project_id = ?"
            params.append(where.project)
        return int(self.conn.execute(sql, params).fetchone()[0])
