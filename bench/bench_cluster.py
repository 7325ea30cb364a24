"""Several hosts on PostgreSQL against one host on SQLite, over HTTP with the real OpenAI-compatible adapter and a
loopback model (TCP_NODELAY) that answers at once.

(a) Per-Step overhead: one `ocs serve` on a SQLite file and one on PostgreSQL, both running; prompts alternate
    between them (so background load hits both alike), each timed from the prompt request until `wait` returns;
    every prompt is one Step. Reports the medians and PostgreSQL's ratio to SQLite (target <= 2x).
(b) Throughput: one host pinned to core 0 (the affinity `taskset` sets) against two hosts pinned to cores 0 and 1,
    on one PostgreSQL database; the model, PostgreSQL and the load client are unpinned. Sessions are prompted
    round-robin through the hosts; prompts/s are counted server-side, from the first admission to the last
    execution's end (the events' own timestamps). Runs alternate between the two layouts. Reports the ratio (target
    >= 1.5x), and the CPU time per prompt of what shares the cores: the hosts, PostgreSQL's processes, and this
    process (the load client and the model).

Run: .venv/bin/python bench/bench_cluster.py   (BENCH_STEPS / BENCH_SESSIONS / BENCH_RUNS to scale; OCS_TEST_POSTGRES
names the server, default the local one's `test` database)
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from _common import ROOT, emit, median, table

sys.path.insert(0, str(ROOT))  # the loopback model and the server helpers live with the tests

import psycopg  # noqa: E402

from opencode_session.client import OpenCodeClient  # noqa: E402
from tests.support.postgres import base_url, schema_url  # noqa: E402
from tests.support.server import ServerProcess, isolated_env, start_server  # noqa: E402
from tests.support.tool_model import ToolModel, config  # noqa: E402

STEPS = int(os.environ.get("BENCH_STEPS", 60))
SESSIONS = int(os.environ.get("BENCH_SESSIONS", 200))
RUNS = int(os.environ.get("BENCH_RUNS", 3))
CONCURRENCY = 40


def _schema(name: str) -> str:
    with psycopg.connect(base_url(), autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")
        conn.execute(f"CREATE SCHEMA {name}")
    return schema_url(name)


def _drop(name: str) -> None:
    with psycopg.connect(base_url(), autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")


def _environment(root: Path, model: ToolModel) -> dict[str, str]:
    env = isolated_env(root)
    (root / "config" / "opencode").mkdir(parents=True, exist_ok=True)
    (root / "config" / "opencode" / "opencode.json").write_text(json.dumps(config(model.base_url)))
    return env


async def _step(client: OpenCodeClient, sid: str) -> float:
    start = time.perf_counter()
    await client.session.prompt(sid, prompt={"text": "say hello"})
    await client.session.wait(sid)
    return time.perf_counter() - start


async def per_step(root: Path, model: ToolModel) -> dict[str, float]:
    env = _environment(root, model)
    sqlite = start_server(root / "sqlite", env=env, db=root / "steps.sqlite", workdir=root / "work")
    pg = start_server(root / "pg", env=env, db=_schema("bench_steps"), workdir=root / "work")
    try:
        clients = {"sqlite": OpenCodeClient(sqlite.url), "postgres": OpenCodeClient(pg.url)}
        sids = {name: (await c.session.create()).id for name, c in clients.items()}
        for name, c in clients.items():  # warm: caches, prepared statements, the model's connection
            for _ in range(5):
                await _step(c, sids[name])
        times: dict[str, list[float]] = {name: [] for name in clients}
        for _ in range(STEPS):
            for name, c in clients.items():
                times[name].append(await _step(c, sids[name]))
        for c in clients.values():
            await c.aclose()
    finally:
        sqlite.stop()
        pg.stop()
        _drop("bench_steps")
    return {name: median(values) * 1000 for name, values in times.items()}


def _cpu(pid: int | str) -> float:
    """CPU seconds (user + system) a process has used so far; 0 once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _postgres_cpu() -> float:
    total = 0.0
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "comm").read_text().strip() in ("postgres", "postmaster"):
                    total += _cpu(entry.name)
            except OSError:
                continue
    return total


async def _load(hosts: list[ServerProcess], cpu: dict[str, list[float]]) -> float:
    """Prompts/s from the first admission to the last execution's end, by the servers' own event timestamps."""
    clients = [OpenCodeClient(h.url) for h in hosts]
    gate = asyncio.Semaphore(CONCURRENCY)

    async def one(n: int) -> str:
        client = clients[n % len(clients)]
        async with gate:
            sid = (await client.session.create()).id
            await client.session.prompt(sid, prompt={"text": "say hello"})
            await client.session.wait(sid)
            return sid

    before = [sum(_cpu(h.proc.pid) for h in hosts), _postgres_cpu(), _cpu("self")]
    sids = await asyncio.gather(*(one(n) for n in range(SESSIONS)))
    after = [sum(_cpu(h.proc.pid) for h in hosts), _postgres_cpu(), _cpu("self")]
    for name, b, a in zip(("hosts", "postgres", "client+model"), before, after, strict=True):
        cpu.setdefault(name, []).append((a - b) / SESSIONS * 1000)
    first, last = float("inf"), 0.0
    for sid in sids:
        async for event in clients[0].session.log(sid, follow=False):
            if event.type == "session.input.admitted":
                first = min(first, event.created)
            elif event.type == "session.execution.succeeded":
                last = max(last, event.created)
    for client in clients:
        await client.aclose()
    return SESSIONS / ((last - first) / 1000)


async def throughput(root: Path, model: ToolModel) -> tuple[dict[str, list[float]], dict[str, dict[str, list[float]]]]:
    env = _environment(root, model)
    rates: dict[str, list[float]] = {"1 host": [], "2 hosts": []}
    cpu: dict[str, dict[str, list[float]]] = {"1 host": {}, "2 hosts": {}}
    for run in range(RUNS):
        for layout, cores in (("1 host", ["0"]), ("2 hosts", ["0", "1"])):
            url = _schema(f"bench_load_{run}")
            hosts = [start_server(root / f"h{n}", env=env, db=url, workdir=root / "work",
                                  preexec_fn=_pin(int(core))) for n, core in enumerate(cores)]
            try:
                rates[layout].append(await _load(hosts, cpu[layout]))
            finally:
                for host in hosts:
                    host.stop()
                _drop(f"bench_load_{run}")
    return rates, cpu


def _pin(core: int):
    def pin() -> None:
        os.sched_setaffinity(0, {core})

    return pin


async def main() -> None:
    model = ToolModel()
    model.start()
    try:
        with tempfile.TemporaryDirectory(prefix="bench-cluster-") as tmp:
            steps = await per_step(Path(tmp), model)
            rates, cpu = await throughput(Path(tmp), model)
    finally:
        model.stop()
    ratio = steps["postgres"] / steps["sqlite"]
    print(table(["backend", "prompt -> idle (ms, median)"],
                [[name, f"{value:.1f}"] for name, value in steps.items()]))
    print(f"PostgreSQL / SQLite per Step: {ratio:.2f}x (target <= 2x)")
    one, two = median(rates["1 host"]), median(rates["2 hosts"])
    print(table(["layout", "prompts/s (median)", "runs"],
                [[name, f"{median(values):.1f}", " ".join(f"{v:.1f}" for v in values)] for name, values in
                 rates.items()]))
    print(f"2 hosts / 1 host: {two / one:.2f}x (target >= 1.5x); each host pinned to its own core, the model,"
          " PostgreSQL and this client share both")
    print(table(["layout", "CPU ms per prompt: hosts", "postgres", "client+model"],
                [[name, *(f"{median(parts[k]):.1f}" for k in ("hosts", "postgres", "client+model"))]
                 for name, parts in cpu.items()]))
    emit("cluster", {"step_ms": steps, "step_ratio": ratio, "prompts_per_s": rates, "scaling": two / one,
                     "cpu_ms_per_prompt": {n: {k: median(v) for k, v in parts.items()} for n, parts in cpu.items()}})


if __name__ == "__main__":
    asyncio.run(main())
