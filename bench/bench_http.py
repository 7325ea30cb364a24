"""The hot path end to end over HTTP: a real `ocs serve` process with the real Chat Completions adapter against an
instantly answering loopback OpenAI-compatible server (uvicorn in this process: TCP_NODELAY, keep-alive).

Rows (medians over repetitions): plain prompt -> idle; LLM stream end -> next LLM request (the tool step gap);
10 sessions prompted at once, wall until all idle; prompt -> idle at ~10, ~1,000 and ~10,000 history messages (and
their ratios); start -> first healthy `GET /api/health`; the server's idle RSS after start; and the load scenario of
`bench_load` (50 sessions x 4 prompts, 200 SSE subscribers): prompts/s, admission p50/p99.

History is built in this process through the core (one real Step on a template session, its durable events cloned
with fresh IDs, as `bench_step_overhead` does) into the database the server then opens.

Knobs: BENCH_HTTP_REPS (20 prompts per latency row), BENCH_HTTP_HISTORY ("10,1000,10000"), BENCH_HTTP_LOAD_REPS (1),
BENCH_HTTP_START_REPS (5); BENCH_HTTP_ONLY ("latency,start,load": the groups of rows to measure). OpenCode side by
side is not measured here (see the README)."""

from __future__ import annotations

import asyncio
import collections
import compileall
import json
import os
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import httpx2
import uvicorn
from _common import ROOT, emit, median, reference_ms, spread, table

sys.path.insert(0, str(ROOT))  # the load scenario and the wire builders live with the tests

from bench_step_overhead import Bench, InstantProvider  # noqa: E402

import opencode_session  # noqa: E402
from opencode_session.client import OpenCodeClient  # noqa: E402
from opencode_session.core.execution.title import TITLE_SYSTEM  # noqa: E402
from opencode_session.core.runtime import Runtime, RuntimeOptions  # noqa: E402
from opencode_session.core.wiring import make_drain_factory  # noqa: E402
from tests.support import fake_openai as fake  # noqa: E402
from tests.support.config import write_global_config  # noqa: E402
from tests.support.load import load_config, percentile, run_load  # noqa: E402
from tests.support.server import ServerProcess, isolated_env, start_server  # noqa: E402

REPS = int(os.environ.get("BENCH_HTTP_REPS", 20))
HISTORY = [int(x) for x in os.environ.get("BENCH_HTTP_HISTORY", "10,1000,10000").split(",")]
LOAD_REPS = int(os.environ.get("BENCH_HTTP_LOAD_REPS", 1))
START_REPS = int(os.environ.get("BENCH_HTTP_START_REPS", 5))
ONLY = set(os.environ.get("BENCH_HTTP_ONLY", "latency,start,load").split(","))
CONCURRENT = 10
PROMPT = "Please summarise the changes in src/ and list the files you touched."


def _sse(script: fake.StreamScript) -> bytes:
    return b"".join(f"data: {f}\n\n".encode() for f in script.frames) + b"data: [DONE]\n\n"


TEXT = _sse(fake.completion(fake.text_deltas("Done: ", "nothing to change.")))
TITLE = _sse(fake.completion(fake.text_deltas("A title")))
TOOL = _sse(fake.completion(fake.tool_call_deltas(0, "call_1", "glob", json.dumps({"pattern": "nothing-*"})),
                            finish_reason="tool_calls"))
TITLE_MARK = json.dumps(TITLE_SYSTEM)[1:60].encode()


class Loopback:
    """A raw ASGI Chat Completions answerer: scripted answers from a queue (text when empty), title requests apart.
    Records, per non-title request, when it arrived and when its answer's last byte was handed to the transport."""

    def __init__(self) -> None:
        self.script: collections.deque[bytes] = collections.deque()
        self.arrived: list[float] = []
        self.finished: list[float] = []
        self.ready = threading.Event()
        self.base_url = ""

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        arrived = time.perf_counter()
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        title = TITLE_MARK in body
        answer = TITLE if title else (self.script.popleft() if self.script else TEXT)
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]})
        await send({"type": "http.response.body", "body": answer, "more_body": False})
        if not title:
            self.arrived.append(arrived)
            self.finished.append(time.perf_counter())

    def start(self) -> None:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind(("127.0.0.1", 0))
        self.base_url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
        server = uvicorn.Server(uvicorn.Config(self, lifespan="off", log_config=None, log_level="warning",
                                               access_log=False))
        self._server = server

        def run() -> None:
            self.ready.set()
            asyncio.run(server.serve(sockets=[sock]))

        threading.Thread(target=run, name="loopback-llm", daemon=True).start()
        self.ready.wait(30)

    def stop(self) -> None:
        self._server.should_exit = True


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def cpu_ms(pid: int) -> float:
    """The process's user + system CPU time so far: on a shared machine, steadier than the wall clock."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


async def prompt_idle(client: OpenCodeClient, sid: str) -> float:
    t0 = time.perf_counter()
    await client.session.prompt(sid, prompt={"text": PROMPT})
    await client.session.wait(sid)
    return (time.perf_counter() - t0) * 1000


async def build_history(db: Path, workdir: Path, env: dict[str, str], sizes: list[int]) -> dict[int, str]:
    """Sessions with exactly `size` messages of history each, written through the core into `db`."""
    provider = InstantProvider()
    options = RuntimeOptions(db_path=db, directory=workdir, env=env,
                             drain_factory=make_drain_factory(provider=lambda _model: provider, titles=False))
    async with Runtime(options) as rt:
        bench = Bench(rt, provider)
        await bench.make_template()
        return {size: await bench.session_with_history(size) for size in sizes}


async def latency_rows(server: ServerProcess, llm: Loopback, history: dict[int, str]) -> dict[str, Any]:
    async with OpenCodeClient(server.url, timeout=120) as client:
        warm = (await client.session.create()).id
        for _ in range(3):  # imports, caches, the title
            await prompt_idle(client, warm)

        plain = []
        for _ in range(REPS):
            sid = (await client.session.create()).id
            await prompt_idle(client, sid)  # first prompt also asks for a title; not measured
            plain.append(await prompt_idle(client, sid))

        gaps = []
        for _ in range(REPS):
            llm.script.extend([TOOL, TEXT])
            n = len(llm.arrived)
            await prompt_idle(client, warm)
            assert len(llm.arrived) == n + 2, "expected a tool Step and a text Step"
            gaps.append((llm.arrived[n + 1] - llm.finished[n]) * 1000)

        together = []
        for _ in range(max(3, REPS // 4)):
            sids = [(await client.session.create()).id for _ in range(CONCURRENT)]
            for sid in sids:
                await prompt_idle(client, sid)
            t0 = time.perf_counter()
            async with anyio.create_task_group() as tg:
                for sid in sids:
                    tg.start_soon(prompt_idle, client, sid)
            together.append((time.perf_counter() - t0) * 1000)

        by_size: dict[int, list[float]] = {size: [] for size in history}
        for n in range(REPS):  # interleaved so drift hits every size alike; history grows 2 per prompt
            for size, sid in history.items():
                if size >= 10_000 and n >= max(3, REPS // 4):
                    continue
                by_size[size].append(await prompt_idle(client, sid))
    return {"plain": plain, "gap": gaps, "together": together, "history": by_size}


def start_rows(root: Path, env: dict[str, str]) -> tuple[list[float], list[float], list[float]]:
    # An installed package has its bytecode; without it (PYTHONDONTWRITEBYTECODE keeps imports from caching it) every
    # start would also compile each module it imports, which measures the compiler, not the server's start.
    compileall.compile_dir(Path(opencode_session.__file__).parent, quiet=1)
    starts, cpu, rss = [], [], []
    # made before the clock starts: a new client builds an SSL context (~30 ms), which is not the server's start
    client = httpx2.Client(timeout=30)
    for n in range(START_REPS):
        t0 = time.perf_counter()
        server = start_server(root / f"start{n}", env=env)
        try:
            response = client.get(server.url + "/api/health")
            starts.append((time.perf_counter() - t0) * 1000)
            assert response.status_code == 200, response.text
            cpu.append(cpu_ms(server.proc.pid))
            rss.append(rss_mib(server.proc.pid))
        finally:
            server.stop()
    client.close()
    return starts, cpu, rss


async def load_rows(root: Path, llm: Loopback) -> list[dict[str, float]]:
    runs = []
    for n in range(LOAD_REPS):
        env = isolated_env(root / f"load{n}")
        write_global_config(env["XDG_CONFIG_HOME"], load_config(llm.base_url))
        server = start_server(root / f"load{n}", env=env)
        try:
            result = await run_load(server.url, sessions=50, prompts=4, instance_subscribers=20)
            floor = await burst_p99(server.url, 50 * 4)
        finally:
            server.stop()
        assert not result.missing(), result.missing()[:3]
        runs.append({"prompts_per_s": result.prompts / result.elapsed,
                     "admission_p50_ms": percentile(result.admission_ms, 50),
                     "admission_p99_ms": percentile(result.admission_ms, 99),
                     "burst_health_p99_ms": floor})
    return runs


async def burst_p99(url: str, n: int) -> float:
    """p99 of `n` `GET /api/health` sent at once by one fresh client to an idle server: what the client and the HTTP
    stack alone need for a burst that size, the floor under the load's admission latency."""
    async with OpenCodeClient(url, timeout=60) as client:
        took: list[float] = []

        async def one() -> None:
            t0 = time.perf_counter()
            await client.health.get()
            took.append((time.perf_counter() - t0) * 1000)

        async with anyio.create_task_group() as tg:
            for _ in range(n):
                tg.start_soon(one)
    return percentile(took, 99)


def start_table(starts: list[float], cpu: list[float], rss: list[float]) -> list[list[Any]]:
    return [
        ["start -> first healthy GET /api/health (ms)", f"{median(starts):.0f}", spread(starts), "<= 400"],
        ["  the server's CPU time until then (ms)", f"{median(cpu):.0f}", spread(cpu), ""],
        ["idle RSS after start (MiB)", f"{median(rss):.1f}", spread(rss), "<= 60"],
    ]


async def main() -> None:
    reference = [reference_ms()]
    print(f"load average before: {os.getloadavg()}; reference loop {reference[0]:.0f} ms")
    llm = Loopback()
    llm.start()
    out: list[list[Any]] = []
    result: dict[str, Any] = {}
    try:
        with tempfile.TemporaryDirectory(prefix="bench-http-", dir=os.environ.get("BENCH_TMPDIR")) as tmp:
            root = Path(tmp)
            env = isolated_env(root)
            write_global_config(env["XDG_CONFIG_HOME"], load_config(llm.base_url))
            if "latency" in ONLY:
                out += await latency_group(root, env, llm, result)
            if "start" in ONLY:
                starts, cpu, rss = start_rows(root, env)
                out += start_table(starts, cpu, rss)
                result |= {"start_ms": median(starts), "start_cpu_ms": median(cpu), "rss_mib": median(rss),
                           "raw_start": {"start": starts, "start_cpu": cpu, "rss": rss}}
            if "load" in ONLY:
                load = await load_rows(root, llm)
                for key, target in (("prompts_per_s", ">= 70"), ("admission_p50_ms", ""),
                                    ("admission_p99_ms", "<= 50"), ("burst_health_p99_ms", "floor")):
                    xs = [r[key] for r in load]
                    out.append([f"load 50x4, 200 subscribers: {key}", f"{median(xs):.1f}", spread(xs), target])
                result |= {"load": {k: median([r[k] for r in load]) for k in load[0]}, "raw_load": load}
    finally:
        llm.stop()
    print(table(["row", "median", "min..max", "target"], out))
    reference.append(reference_ms())
    print(f"load average after: {os.getloadavg()}; reference loop {reference[1]:.0f} ms")
    emit("http", result | {"reference_loop_ms": reference})


async def latency_group(root: Path, env: dict[str, str], llm: Loopback, result: dict[str, Any]) -> list[list[Any]]:
    workdir = root / "work"
    workdir.mkdir()
    t0 = time.perf_counter()
    history = await build_history(root / "db.sqlite", workdir, env, HISTORY)
    print(f"(history built in {time.perf_counter() - t0:.1f}s)")
    server = start_server(root, env=env)
    try:
        rows = await latency_rows(server, llm, history)
    finally:
        server.stop()
    small = median(rows["history"][HISTORY[0]])
    out: list[list[Any]] = [
        ["plain prompt -> idle (ms)", f"{median(rows['plain']):.1f}", spread(rows["plain"]), "<= 9"],
        ["LLM stream end -> next LLM request (ms)", f"{median(rows['gap']):.1f}", spread(rows["gap"]), "<= 8"],
        [f"{CONCURRENT} sessions at once, wall (ms)", f"{median(rows['together']):.1f}", spread(rows["together"]),
         "<= 110"],
    ]
    for size, xs in rows["history"].items():
        ratio = median(xs) / small
        out.append([f"prompt -> idle @ {size:,} history (ms)", f"{median(xs):.1f}", spread(xs),
                    f"ratio {ratio:.2f}x" + (" (<= 1.2x @1,000)" if size == 1000 else "")])
    result |= {"plain_ms": median(rows["plain"]), "gap_ms": median(rows["gap"]),
               "together_ms": median(rows["together"]),
               "history_ms": {str(k): median(v) for k, v in rows["history"].items()}, "raw": rows}
    return out


if __name__ == "__main__":
    asyncio.run(main())
