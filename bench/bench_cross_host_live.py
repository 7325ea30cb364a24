"""Live events across hosts: two `ocs serve` hosts on one PostgreSQL schema, a loopback model (in this process) that
streams text deltas 2 ms apart, and one `GET /api/event` subscriber on each host. Every session is prompted through
host A, which executes it; each text delta's latency is measured from the moment the model wrote it to the moment
each subscriber read it (one clock: this process's). Reports median and p99 for the subscriber on A (same host) and
on B (through PostgreSQL's NOTIFY), their ratio, and B's added delay per delta; with 1 session and with several at
once (BENCH_LIVE_SESSIONS, default 4; BENCH_LIVE_DELTAS deltas each, default 300; BENCH_RUNS runs, default 3).

Run: .venv/bin/python bench/bench_cross_host_live.py   (needs PostgreSQL; OCS_TEST_POSTGRES names the server, default
the local one's `test` database)
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _common import ROOT, emit, table

sys.path.insert(0, str(ROOT))  # the loopback model and the server helpers live with the tests

import psycopg  # noqa: E402

from opencode_session.client import OpenCodeClient  # noqa: E402
from tests.support.postgres import base_url, schema_url  # noqa: E402
from tests.support.server import isolated_env, start_server  # noqa: E402
from tests.support.stream_model import StreamModel  # noqa: E402
from tests.support.tool_model import config  # noqa: E402

SESSIONS = int(os.environ.get("BENCH_LIVE_SESSIONS", 4))
DELTAS = int(os.environ.get("BENCH_LIVE_DELTAS", 300))
RUNS = int(os.environ.get("BENCH_RUNS", 3))


def _p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


async def _follow(client: OpenCodeClient, sids: set[str], ready: asyncio.Event, arrived: dict[str, float]) -> None:
    done: set[str] = set()
    stream = client.event.subscribe()
    try:
        async for item in stream:
            if item.type == "server.connected":
                ready.set()
            elif item.data.get("sessionID") in sids:
                if item.type == "session.text.delta":
                    arrived.setdefault(item.data["delta"], time.perf_counter())
                elif item.type == "session.execution.succeeded":
                    done.add(item.data["sessionID"])
                    if done == sids:
                        return
    finally:
        await stream.aclose()


async def _run(a: OpenCodeClient, b: OpenCodeClient, model: StreamModel, sessions: int) -> dict[str, list[float]]:
    sids = [(await a.session.create()).id for _ in range(sessions)]
    model.emitted.clear()
    on_a: dict[str, float] = {}
    on_b: dict[str, float] = {}
    ready_a, ready_b = asyncio.Event(), asyncio.Event()
    readers = [asyncio.create_task(_follow(a, set(sids), ready_a, on_a)),
               asyncio.create_task(_follow(b, set(sids), ready_b, on_b))]
    await asyncio.wait_for(asyncio.gather(ready_a.wait(), ready_b.wait()), 30)
    for n, sid in enumerate(sids):
        await a.session.prompt(sid, prompt={"text": f"stream as s{n}"})
    await asyncio.wait_for(asyncio.gather(*readers), 300)
    missing = sum(1 for delta in model.emitted if delta not in on_b)
    if missing:
        print(f"  (B's subscriber missed {missing} of {len(model.emitted)} deltas)")
    return {"a": [(on_a[d] - t) * 1000 for d, t in model.emitted.items() if d in on_a],
            "b": [(on_b[d] - t) * 1000 for d, t in model.emitted.items() if d in on_b],
            "added": [(on_b[d] - on_a[d]) * 1000 for d in model.emitted if d in on_a and d in on_b]}


async def main() -> None:
    schema = "bench_live_" + secrets.token_hex(4)
    with psycopg.connect(base_url(), autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    model = StreamModel(deltas=DELTAS, reasoning=0, pieces=4)
    model.start()
    hosts = []
    try:
        with tempfile.TemporaryDirectory(prefix="bench-live-") as tmp:
            root = Path(tmp)
            env = isolated_env(root)
            (root / "config" / "opencode").mkdir(parents=True, exist_ok=True)
            (root / "config" / "opencode" / "opencode.json").write_text(json.dumps(config(model.base_url)))
            (root / "work").mkdir()
            hosts = [start_server(root, env=env, db=schema_url(schema), workdir=root / "work") for _ in range(2)]
            a, b = OpenCodeClient(hosts[0].url), OpenCodeClient(hosts[1].url)
            await _run(a, b, model, 1)  # warm: connections, caches
            rows, results = [], {}
            for sessions in (1, SESSIONS):
                merged: dict[str, list[float]] = {"a": [], "b": [], "added": []}
                for _ in range(RUNS):
                    for key, values in (await _run(a, b, model, sessions)).items():
                        merged[key] += values
                med_a, med_b = statistics.median(merged["a"]), statistics.median(merged["b"])
                p99_a, p99_b = _p99(merged["a"]), _p99(merged["b"])
                added_med, added_p99 = statistics.median(merged["added"]), _p99(merged["added"])
                rows.append([f"{sessions} session(s), {len(merged['b'])} deltas", f"{med_a:.2f}", f"{p99_a:.2f}",
                             f"{med_b:.2f}", f"{p99_b:.2f}", f"{med_b / med_a:.2f}x",
                             f"{added_med:.2f} / {added_p99:.2f}"])
                results[str(sessions)] = {"a_median_ms": med_a, "a_p99_ms": p99_a, "b_median_ms": med_b,
                                          "b_p99_ms": p99_b, "b_over_a": med_b / med_a,
                                          "added_median_ms": added_med, "added_p99_ms": added_p99}
            await a.aclose()
            await b.aclose()
            print(table(["model -> subscriber (ms)", "A median", "A p99", "B median", "B p99", "B/A",
                         "B-A median / p99"], rows))
            emit("cross_host_live", {"sessions": SESSIONS, "deltas": DELTAS, "runs": RUNS, "results": results})
    finally:
        for host in hosts:
            host.stop(timeout=15)
        model.stop()
        with psycopg.connect(base_url(), autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


if __name__ == "__main__":
    asyncio.run(main())
