"""What `experimental.session.stats` costs on a big store: 10,000 sessions (each 2 turns of 2 Steps, one tool call a
Step, 3 models, 2 agents, spread over 30 days) seeded as projection rows through the store directly (its message
inserts write the usage projection, as the projector's do), then the stats operation's reads (totals, per model, per
agent, per New York day, tool reliability) over everything and over the last 7 days; median ms per call on SQLite,
and on PostgreSQL when BENCH_PG_URL names a database (its own schema).
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from typing import Any

from _common import emit, median, spread, table, workspace

from opencode_session.core.session.projector import project
from opencode_session.core.session.stats import session_stats
from opencode_session.core.store import Store, open_backend

SESSIONS = int(os.environ.get("BENCH_STATS_SESSIONS", "10000"))
REPS = int(os.environ.get("BENCH_STATS_REPS", "9"))
DAY = 86_400_000
NOW = 1_780_000_000_000
MODELS = ("m1", "m2", "m3")
TOOLS = ("bash", "read", "edit", "grep")


def _seed(tx: Any, first: int, last: int) -> None:
    for n in range(first, last):
        sid = f"ses_{n:08d}"
        at = NOW - (n % 30) * DAY - n * 1000
        tx.sessions.insert({"id": sid, "projectID": "prj", "title": "t", "location": {"directory": "/w"},
                            "time": {"created": at, "updated": at}, "agent": "build"})
        seq = 0
        for turn in range(2):
            seq += 1
            t = at + turn * 60_000
            tx.messages.insert(sid, seq, {"id": f"msg_{sid}_{seq}", "time": {"created": t}, "type": "user",
                                          "text": "make the change"})
            for step in range(2):
                seq += 1
                status = "error" if (n + step) % 7 == 0 else "completed"
                tool = {"type": "tool", "id": f"c{seq}", "name": TOOLS[(n + seq) % 4],
                        "state": {"status": status, "input": {"command": "ls"}, "content": [], "structured": {}},
                        "time": {"created": t}}
                began = t + step * 1000 + 1
                tx.messages.insert(sid, seq, {
                    "id": f"msg_{sid}_{seq}", "time": {"created": began, "completed": began + 900},
                    "type": "assistant", "agent": ("build", "plan")[n % 2],
                    "model": {"id": MODELS[n % 3], "providerID": "p"},
                    "content": [{"type": "text", "id": "t", "text": "working on it " * 10}, tool],
                    "finish": "stop", "cost": 0.001 * (step + 1),
                    "tokens": {"input": 1200, "output": 300, "reasoning": 50, "cache": {"read": 800, "write": 10}}})


async def _measure(store: Store) -> dict[str, Any]:
    for first in range(0, SESSIONS, 500):
        await store.write(lambda tx, first=first: _seed(tx, first, min(first + 500, SESSIONS)))
    out: dict[str, Any] = {}
    for name, kwargs in (("all", {}), ("7 days", {"start": NOW - 7 * DAY, "end": NOW + DAY})):
        stats = await session_stats(store, timezone="America/New_York", **kwargs)  # warm
        times = []
        for _ in range(REPS):
            began = time.perf_counter()
            await session_stats(store, timezone="America/New_York", **kwargs)
            times.append((time.perf_counter() - began) * 1000)
        out[name] = {"median_ms": median(times), "spread": spread(times), "steps": stats.total.steps,
                     "days": len(stats.days)}
    return out


async def main() -> None:
    results: dict[str, Any] = {}
    with workspace("bench-stats-") as ws:
        async with Store(open_backend(str(ws["db"])), project=project) as store:
            results["sqlite"] = await _measure(store)
    url = os.environ.get("BENCH_PG_URL")
    if url:
        import psycopg

        schema = f"bench_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f"CREATE SCHEMA {schema}")
        try:
            sep = "&" if "?" in url else "?"
            async with Store(open_backend(f"{url}{sep}options=-csearch_path%3D{schema}"), project=project) as store:
                results["postgres"] = await _measure(store)
        finally:
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute(f"DROP SCHEMA {schema} CASCADE")
    rows = [[backend, name, f"{r['median_ms']:.1f}", r["spread"], r["steps"], r["days"]]
            for backend, by in results.items() for name, r in by.items()]
    print(f"experimental.session.stats over {SESSIONS:,} sessions ({SESSIONS * 4:,} Steps), {REPS} calls each")
    print(table(["backend", "range", "median ms", "min..max", "steps", "days"], rows))
    emit("session_stats", {"sessions": SESSIONS, "results": results})


if __name__ == "__main__":
    asyncio.run(main())
