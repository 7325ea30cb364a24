"""Issue 38's targets side by side: `ocs serve` and OpenCode 1.18.33's `opencode serve` on the same instant loopback
Chat Completions mock (`bench_http`'s, TCP_NODELAY), both driven over their V2 HTTP API by one raw HTTP client.

Per run and server: prompt -> idle, the server's CPU per prompt, the tool-step gap (LLM stream end -> next LLM
request), 10 sessions prompted at once, start -> healthy, idle RSS, the first prompt after start; for ocs alone
also prompt -> idle at 1,000 against 10 history messages. Prints every row's median over the runs, OpenCode's,
their ratio and the target, then one JSON line. With BENCH_TARGETS_PG=1 it adds `bench_cluster`'s PostgreSQL rows.

Knobs: BENCH_TARGETS_RUNS (3), BENCH_TARGETS_REPS (20 prompts per latency row), BENCH_TARGETS_STARTS (3 starts
per kind per run), BENCH_TARGETS_PG (0), BENCH_OPENCODE (path of an `opencode` binary; default the tests' npm
install under ~/.cache/ocs-tests)."""

from __future__ import annotations

import asyncio
import compileall
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2
from _common import ROOT, emit, median, reference_ms, table
from bench_http import PROMPT, TEXT, TOOL, Loopback, build_history, cpu_ms

sys.path.insert(0, str(ROOT))

import opencode_session  # noqa: E402
from tests.support.server import OCS, isolated_env  # noqa: E402

RUNS = int(os.environ.get("BENCH_TARGETS_RUNS", 3))
REPS = int(os.environ.get("BENCH_TARGETS_REPS", 20))
STARTS = int(os.environ.get("BENCH_TARGETS_STARTS", 3))
PG = os.environ.get("BENCH_TARGETS_PG", "0") == "1"
CLI_VERSION = "1.18.33"
CONCURRENT = 10
# OpenCode 1.18.33's V2 `wait` answers 503 ("Session wait is not available yet") and its V2 runner's Steps end in
# "HTTP transport failed" against an OpenAI-compatible endpoint, so its side takes V1's blocking
# `POST /session/{id}/message` (the path its own CLI takes); base URLs served that way are kept here.
V1: dict[str, bool] = {}
TITLE_MODEL = b'"model":"t"'  # both servers get a separate small model, so title requests are told apart

# (key, label, target ratio ocs/OpenCode or None, unit)
ROWS = [
    ("plain", "prompt -> idle (ms)", 0.05),
    ("cpu", "server CPU per prompt (ms)", 0.03),
    ("gap", "tool-step gap: stream end -> next request (ms)", 0.05),
    ("together", f"{CONCURRENT} sessions at once, wall (ms)", 0.08),
    ("start", "start -> healthy (ms)", 0.10),
    ("rss", "idle RSS (MiB)", 0.15),
    ("first", "first prompt after start (ms)", 0.15),
]


class Mock(Loopback):
    """`bench_http`'s loopback; a request for the small model is a title request whatever its prompt says."""

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        messages: list[dict[str, Any]] = []

        async def replay() -> dict[str, Any]:
            return messages.pop(0)

        while True:
            message = await receive()
            messages.append(message)
            if not message.get("more_body"):
                break
        body = b"".join(m.get("body", b"") for m in messages)
        if TITLE_MODEL in body.replace(b" ", b""):
            from bench_http import TITLE
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", b"text/event-stream")]})
            await send({"type": "http.response.body", "body": TITLE, "more_body": False})
            return
        await super().__call__(scope, replay, send)


def config(base_url: str) -> dict[str, Any]:
    return {"model": "loop/m", "small_model": "loop/t", "autoupdate": False, "share": "disabled",
            "provider": {"loop": {"npm": "@ai-sdk/openai-compatible", "name": "loop",
                                  "options": {"baseURL": base_url, "apiKey": "k"},
                                  "models": {"m": {"name": "m"}, "t": {"name": "t"}}}}}


def find_opencode() -> tuple[Path | None, str]:
    given = os.environ.get("BENCH_OPENCODE")
    if given:
        candidates = [Path(given)]
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
        candidates = sorted((base / "ocs-tests" / f"opencode-cli-{CLI_VERSION}" / "node_modules").glob(
            "opencode-*/bin/opencode"))
    for binary in candidates:
        try:
            out = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=60).stdout
        except (OSError, subprocess.TimeoutExpired):
            continue
        if out.strip() == CLI_VERSION:
            return binary, ""
    return None, (f"no runnable opencode {CLI_VERSION} (install it with `npm install --prefix "
                  f"~/.cache/ocs-tests/opencode-cli-{CLI_VERSION} opencode-ai@{CLI_VERSION}` or run "
                  "tests/api/test_opencode_run_attach.py once, or set BENCH_OPENCODE)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def tree(pid: int) -> list[int]:
    """`pid` and its descendants (a server may run helpers in child processes)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += children.get(p, [])
    return out


def tree_cpu_ms(pid: int) -> float:
    total = 0.0
    for p in tree(pid):
        try:
            total += cpu_ms(p)
        except OSError:
            pass
    return total


def tree_rss_mib(pid: int) -> float:
    total = 0.0
    for p in tree(pid):
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) / 1024
        except OSError:
            pass
    return total


@dataclass
class Side:
    """One server under test: how to spawn it on a port in its scratch root."""

    name: str
    root: Path
    argv: list[str]
    env: dict[str, str]
    work: Path
    proc: subprocess.Popen[bytes] | None = None
    url: str = ""
    samples: dict[str, list[float]] = field(default_factory=dict)

    def spawn(self) -> float:
        """Start the server and poll `GET /api/health` until it answers 200; returns the ms that took."""
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        V1[self.url] = self.name == "opencode"
        argv = [a.replace("{port}", str(port)) for a in self.argv]
        with httpx2.Client(timeout=5) as client:
            t0 = time.perf_counter()
            self.proc = subprocess.Popen(argv, cwd=self.work, env=self.env, stdout=subprocess.DEVNULL,
                                         stderr=(self.root / "stderr.log").open("ab"))
            while True:
                try:
                    if client.get(self.url + "/api/health").status_code == 200:
                        return (time.perf_counter() - t0) * 1000
                except httpx2.TransportError:
                    pass
                if self.proc.poll() is not None:
                    raise RuntimeError(f"{self.name} exited with {self.proc.returncode}")
                if time.perf_counter() - t0 > 180:  # a first start under load (migrations) can take a minute
                    raise RuntimeError(f"{self.name} not healthy within 180 s")
                time.sleep(0.002)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc = None

    def add(self, key: str, *values: float) -> None:
        self.samples.setdefault(key, []).extend(values)


def wait_idle(pid: int, quiet_ms: float = 400, limit_s: float = 20) -> None:
    """Until the process tree used no CPU for `quiet_ms` (a background load after start has finished)."""
    end = time.monotonic() + limit_s
    last = tree_cpu_ms(pid)
    while time.monotonic() < end:
        time.sleep(quiet_ms / 1000)
        now = tree_cpu_ms(pid)
        if now - last < 1:
            return
        last = now


async def create(client: httpx2.AsyncClient) -> str:
    if V1.get(str(client.base_url).rstrip("/")):
        r = await client.post("/session", json={})
        r.raise_for_status()
        return str(r.json()["id"])
    r = await client.post("/api/session", json={})
    r.raise_for_status()
    return str(r.json()["data"]["id"])


async def prompt_idle(client: httpx2.AsyncClient, sid: str) -> float:
    """One prompt until its session is idle: V2 prompt + wait, or for OpenCode V1's blocking message call."""
    t0 = time.perf_counter()
    if V1.get(str(client.base_url).rstrip("/")):
        r = await client.post(f"/session/{sid}/message", json={"parts": [{"type": "text", "text": PROMPT}]})
        if r.status_code >= 400:
            raise RuntimeError(f"{client.base_url} message: {r.status_code} {r.text[:400]}")
        return (time.perf_counter() - t0) * 1000
    r = await client.post(f"/api/session/{sid}/prompt", json={"prompt": {"text": PROMPT}})
    r.raise_for_status()
    r = await client.post(f"/api/session/{sid}/wait")
    if r.status_code >= 400:
        raise RuntimeError(f"{client.base_url} wait: {r.status_code} {r.text[:400]}")
    return (time.perf_counter() - t0) * 1000


async def latency(side: Side, llm: Mock, history: dict[int, str] | None) -> None:
    assert side.proc is not None
    pid = side.proc.pid
    async with httpx2.AsyncClient(base_url=side.url, timeout=120) as client:
        warm = await create(client)
        for _ in range(3):
            await prompt_idle(client, warm)
        sids = [await create(client) for _ in range(REPS)]
        for sid in sids:  # each session's first prompt (and its title) is not measured
            await prompt_idle(client, sid)
        c0 = tree_cpu_ms(pid)
        plain = [await prompt_idle(client, sid) for sid in sids]
        side.add("cpu", (tree_cpu_ms(pid) - c0) / REPS)
        side.add("plain", median(plain))

        gaps = []
        for _ in range(REPS):
            llm.script.extend([TOOL, TEXT])
            n = len(llm.arrived)
            await prompt_idle(client, warm)
            if len(llm.arrived) != n + 2:
                raise RuntimeError(f"{side.name}: expected a tool Step and a text Step, "
                                   f"got {len(llm.arrived) - n} requests")
            gaps.append((llm.arrived[n + 1] - llm.finished[n]) * 1000)
        side.add("gap", median(gaps))

        together = []
        for _ in range(max(3, REPS // 4)):
            group = [await create(client) for _ in range(CONCURRENT)]
            for sid in group:
                await prompt_idle(client, sid)
            t0 = time.perf_counter()
            async with anyio.create_task_group() as tg:
                for sid in group:
                    tg.start_soon(prompt_idle, client, sid)
            together.append((time.perf_counter() - t0) * 1000)
        side.add("together", median(together))

        if history:
            by_size: dict[int, list[float]] = {size: [] for size in history}
            for _ in range(REPS):
                for size, sid in history.items():
                    by_size[size].append(await prompt_idle(client, sid))
            sizes = sorted(history)
            side.add("history", median(by_size[sizes[-1]]) / median(by_size[sizes[0]]))


async def starts(side: Side) -> None:
    """STARTS starts whose first prompt follows health at once, and STARTS that idle for the RSS."""
    for kind in ("first", "rss") * STARTS:
        side.add("start", side.spawn())
        assert side.proc is not None
        try:
            if kind == "first":
                async with httpx2.AsyncClient(base_url=side.url, timeout=120) as client:
                    t0 = time.perf_counter()
                    await prompt_idle(client, await create(client))
                    side.add("first", (time.perf_counter() - t0) * 1000)
            else:
                wait_idle(side.proc.pid)
                side.add("rss", tree_rss_mib(side.proc.pid))
        finally:
            side.stop()


def make_sides(root: Path, llm: Mock, opencode: Path | None) -> list[Side]:
    sides = []
    env = isolated_env(root / "ocs")
    (root / "ocs" / "config" / "opencode").mkdir(parents=True)
    (root / "ocs" / "config" / "opencode" / "opencode.json").write_text(json.dumps(config(llm.base_url)))
    work = root / "ocs" / "work"
    work.mkdir()
    sides.append(Side("ocs", root / "ocs", [OCS, "serve", "--port", "{port}", "--db", str(root / "ocs" / "db.sqlite"),
                                             "--directory", str(work)], env, work))
    if opencode is not None:
        oc = root / "opencode"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENCODE_", "OPENAI_", "ANTHROPIC_"))}
        for name in ("home", "config/opencode", "data", "cache", "state", "work"):
            (oc / name).mkdir(parents=True, exist_ok=True)
        env.update(HOME=str(oc / "home"), XDG_CONFIG_HOME=str(oc / "config"), XDG_DATA_HOME=str(oc / "data"),
                   XDG_CACHE_HOME=str(oc / "cache"), XDG_STATE_HOME=str(oc / "state"))
        (oc / "config" / "opencode" / "opencode.json").write_text(json.dumps(config(llm.base_url)))
        sides.append(Side("opencode", oc, [str(opencode), "serve", "--port", "{port}", "--hostname", "127.0.0.1"],
                          env, oc / "work"))
    return sides


async def postgres_rows() -> dict[str, float]:
    import bench_cluster

    from tests.support.tool_model import ToolModel

    model = ToolModel()
    model.start()
    try:
        with tempfile.TemporaryDirectory(prefix="bench-targets-pg-") as tmp:
            steps = await bench_cluster.per_step(Path(tmp), model)
            rates, _cpu = await bench_cluster.throughput(Path(tmp), model)
    finally:
        model.stop()
    return {"pg_over_sqlite": steps["postgres"] / steps["sqlite"],
            "two_over_one": median(rates["2 hosts"]) / median(rates["1 host"]),
            "sqlite_ms": steps["sqlite"], "postgres_ms": steps["postgres"]}


async def main() -> None:
    reference = [reference_ms()]
    print(f"load average before: {os.getloadavg()}; reference loop {reference[0]:.0f} ms")
    compileall.compile_dir(Path(opencode_session.__file__).parent, quiet=1)
    opencode, why = find_opencode()
    if opencode is None:
        print(f"OpenCode not measured: {why}; ocs alone")
    llm = Mock()
    llm.start()
    try:
        with tempfile.TemporaryDirectory(prefix="bench-targets-", dir=os.environ.get("BENCH_TMPDIR")) as tmp:
            root = Path(tmp)
            sides = make_sides(root, llm, opencode)
            ocs = sides[0]
            history = await build_history(root / "ocs" / "db.sqlite", ocs.work, ocs.env, [10, 1000])
            for side in sides:  # first starts (migrations, caches, OpenCode's first-run set-up) are not measured
                side.spawn()
                side.stop()
            for run in range(RUNS):
                order = sides if run % 2 == 0 else sides[::-1]
                for side in order:
                    side.spawn()
                    try:
                        await latency(side, llm, history if side is ocs else None)
                    finally:
                        side.stop()
                for side in order:
                    await starts(side)
                print(f"(run {run + 1} of {RUNS} done)", flush=True)
    finally:
        llm.stop()
    result: dict[str, Any] = {"opencode": str(opencode) if opencode else None, "why_not": why or None,
                              "runs": RUNS, "reps": REPS}
    other = sides[1] if len(sides) > 1 else None
    rows = []
    for key, label, target in ROWS:
        mine = median(ocs.samples[key])
        theirs = median(other.samples[key]) if other else None
        ratio = mine / theirs if theirs else None
        rows.append([label, f"{mine:.2f}", f"{theirs:.1f}" if theirs else "-",
                     f"{ratio:.3f}" if ratio is not None else "-", f"<= {target}",
                     "" if ratio is None else ("met" if ratio <= target else "missed")])
        result[key] = {"ocs": mine, "opencode": theirs, "ratio": ratio, "target": target,
                       "raw": {"ocs": ocs.samples[key], "opencode": other.samples[key] if other else None}}
    growth = median(ocs.samples["history"])
    rows.append(["history growth, prompt -> idle @1,000 / @10 (ocs)", f"{growth:.2f}x", "-", "-", "<= 1.1x",
                 "met" if growth <= 1.1 else "missed"])
    result["history_growth"] = {"ocs": growth, "target": 1.1, "raw": ocs.samples["history"]}
    if PG:
        pg = await postgres_rows()
        rows.append(["PostgreSQL / SQLite per Step (ocs)", f"{pg['pg_over_sqlite']:.2f}x", "-", "-", "<= 2x",
                     "met" if pg["pg_over_sqlite"] <= 2 else "missed"])
        rows.append(["2 pinned hosts / 1 host (ocs, PostgreSQL)", f"{pg['two_over_one']:.2f}x", "-", "-", ">= 1.5x",
                     "met" if pg["two_over_one"] >= 1.5 else "missed"])
        result["postgres"] = pg
    else:
        print("PostgreSQL rows: BENCH_TARGETS_PG=1 adds bench_cluster's (about 90 s more)")
    print(table(["row (median of run medians)", "ocs", "OpenCode", "ratio", "target", ""], rows))
    reference.append(reference_ms())
    print(f"load average after: {os.getloadavg()}; reference loop {reference[1]:.0f} ms")
    emit("targets", result | {"reference_loop_ms": reference})


if __name__ == "__main__":
    asyncio.run(main())
