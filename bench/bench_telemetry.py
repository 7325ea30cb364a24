"""What observability costs per Step, over HTTP: three real `ocs serve` processes with the real Chat Completions
adapter against the instantly answering loopback provider of `bench_http` (uvicorn in this process): one with
nothing configured, one whose metrics count (GET /metrics scraped once), one tracing to a loopback OTLP/HTTP
collector (the tests' receiver, decoding every export with opentelemetry-proto, in this process). A plain prompt is
one Step.

Each round prompts every server in turn, so drift on a shared machine hits all alike. Rows:
prompt -> idle wall time per server (medians of every prompt) and its difference to the unconfigured one; the
server's CPU per prompt (user + system from /proc, summed over every round, the exporter thread's included; the
min..max column is per round) and its difference; and, in this process, what the
instrumentation points of one Step cost while telemetry is off (the calls a Step makes, timed in a loop).

Knobs: BENCH_TEL_ROUNDS (15), BENCH_TEL_PROMPTS (10 prompts per server and round)."""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import ROOT, emit, median, reference_ms, spread, table

sys.path.insert(0, str(ROOT))  # the loopback provider, the collector and the server harness live with the tests

import httpx2  # noqa: E402
from bench_http import Loopback, cpu_ms, prompt_idle  # noqa: E402

from opencode_session.client import OpenCodeClient  # noqa: E402
from opencode_session.core.telemetry import hooks, telemetry  # noqa: E402
from tests.support.config import write_global_config  # noqa: E402
from tests.support.load import load_config  # noqa: E402
from tests.support.otlp import OtlpReceiver  # noqa: E402
from tests.support.server import ServerProcess, isolated_env, start_server  # noqa: E402

ROUNDS = int(os.environ.get("BENCH_TEL_ROUNDS", 15))
PROMPTS = int(os.environ.get("BENCH_TEL_PROMPTS", 10))
VARIANTS = ("nothing configured", "metrics counting", "tracing to loopback")


def _server(root: Path, name: str, extra: dict[str, str]) -> ServerProcess:
    home = root / name
    env = isolated_env(home, **extra)
    write_global_config(env["XDG_CONFIG_HOME"], load_config(LLM.base_url))
    return start_server(home, env=env)


async def _round(client: OpenCodeClient, sid: str, pid: int) -> tuple[list[float], float]:
    """The walls of PROMPTS prompts, and the server's CPU time they took (ms)."""
    cpu0 = cpu_ms(pid)
    walls = [await prompt_idle(client, sid) for _ in range(PROMPTS)]
    return walls, cpu_ms(pid) - cpu0


def off_hook_cost_us(n: int = 200_000) -> float:
    """The instrumentation points one Step passes while telemetry is off, per Step (microseconds)."""
    assert not telemetry.on

    class _Request:
        system: list[str] = []
        messages: list[Any] = []

    request = _Request()
    t0 = time.perf_counter()
    for _ in range(n):
        with hooks.step("s", "build", 1, 1) as traced:
            attempt = hooks.attempt("loop", "m", "m", request)
            if attempt is not None:
                attempt.first_output()
            if traced is not None:
                traced.settled("a", None)
        hooks.committed(0.001)
        hooks.prompt_admitted("steer")
    return (time.perf_counter() - t0) / n * 1e6


LLM = Loopback()


async def main() -> None:
    reference = [reference_ms()]
    print(f"load average before: {os.getloadavg()}; reference loop {reference[0]:.0f} ms")
    LLM.start()
    with OtlpReceiver() as collector, tempfile.TemporaryDirectory(prefix="bench-telemetry-",
                                                                  dir=os.environ.get("BENCH_TMPDIR")) as tmp:
        root = Path(tmp)
        extras = [{}, {}, {"OTEL_EXPORTER_OTLP_ENDPOINT": collector.url, "OTEL_SERVICE_NAME": "bench"}]
        servers = [_server(root, f"s{i}", extra) for i, extra in enumerate(extras)]
        walls: dict[str, list[float]] = {v: [] for v in VARIANTS}
        cpus: dict[str, list[float]] = {v: [] for v in VARIANTS}
        try:
            clients = [OpenCodeClient(s.url, timeout=120) for s in servers]
            sids = []
            for client in clients:
                await client.__aenter__()
                sid = (await client.session.create()).id
                for _ in range(3):  # imports, caches, the title
                    await prompt_idle(client, sid)
                sids.append(sid)
            async with httpx2.AsyncClient(base_url=servers[1].url) as http:
                assert (await http.get("/metrics")).status_code == 200  # counting starts here
            for _ in range(ROUNDS):
                for variant, client, sid, server in zip(VARIANTS, clients, sids, servers, strict=True):
                    round_walls, cpu = await _round(client, sid, server.proc.pid)
                    walls[variant] += round_walls
                    cpus[variant].append(cpu)
            async with httpx2.AsyncClient(base_url=servers[1].url) as http:
                counted = [line for line in (await http.get("/metrics")).text.splitlines()
                           if line.startswith('ocs_steps_total{outcome="ended"}')]
            for client in clients:
                await client.__aexit__(None, None, None)
        finally:
            for server in servers:
                server.stop()
        spans = len(collector.spans)
    LLM.stop()
    # CPU ticks are 10 ms: per prompt, only the total over every round resolves a fraction of a millisecond
    cpu_per_prompt = {v: sum(cpus[v]) / (ROUNDS * PROMPTS) for v in VARIANTS}
    per_round = {v: [c / PROMPTS for c in cpus[v]] for v in VARIANTS}
    base_wall, base_cpu = median(walls[VARIANTS[0]]), cpu_per_prompt[VARIANTS[0]]
    rows: list[list[Any]] = []
    for variant in VARIANTS:
        rows.append([f"prompt -> idle, {variant} (ms)", f"{median(walls[variant]):.2f}", spread(walls[variant]),
                     f"{median(walls[variant]) - base_wall:+.2f}"])
    for variant in VARIANTS:
        rows.append([f"server CPU per prompt (all rounds), {variant} (ms)", f"{cpu_per_prompt[variant]:.2f}",
                     spread(per_round[variant]), f"{cpu_per_prompt[variant] - base_cpu:+.2f}"])
    off_us = off_hook_cost_us()
    rows.append(["instrumentation points of one Step, telemetry off (us)", f"{off_us:.2f}", "", ""])
    print(table(["row", "median", "min..max", "vs nothing configured"], rows))
    print(f"spans received by the collector: {spans}; metrics server: {counted}")
    reference.append(reference_ms())
    print(f"load average after: {os.getloadavg()}; reference loop {reference[1]:.0f} ms")
    emit("telemetry", {
        "wall_ms": {v: median(walls[v]) for v in VARIANTS}, "cpu_ms": cpu_per_prompt,
        "tracing_extra_wall_ms": median(walls[VARIANTS[2]]) - base_wall,
        "tracing_extra_cpu_ms": cpu_per_prompt[VARIANTS[2]] - base_cpu,
        "metrics_extra_wall_ms": median(walls[VARIANTS[1]]) - base_wall,
        "off_hooks_us": off_us, "spans": spans, "raw": {"wall": walls, "cpu": cpus},
        "reference_loop_ms": reference})


if __name__ == "__main__":
    asyncio.run(main())
