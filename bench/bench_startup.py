"""Start-up and idle memory of `ocs serve`, as a user starts it.

start->healthy: from spawning `ocs serve --port 0` (a fresh SQLite file, an isolated config with one model) until
its first `GET /api/health` answers 200, measured from outside the process. idle RSS: the process's resident set
once it is idle (after `ocs serve` has warmed the runner: VmRSS unchanged for 1 s, polled every 50 ms, at most 15 s
after healthy). CPU until healthy / idle: the process's user + system time at those two points (steadier than wall
time on a loaded machine). Medians over BENCH_STARTS runs (default 7), with `min..max`.

Then one more start under `python -X importtime`, left until idle, shows what an idle server has imported: the
optional features' packages (each loaded or not, with its import time) and the ten slowest imports by self time.
`BENCH_MCP=1` adds a configured stdio MCP server (so `mcp` is expected to load); BENCH_OCS names another `ocs`
(default the one beside this interpreter), e.g. a worktree of an older commit run with its own PYTHONPATH.

Run: .venv/bin/python bench/bench_startup.py
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from collections import defaultdict
from pathlib import Path

from _common import emit, median, reference_ms, spread, table, workspace

OCS = os.environ.get("BENCH_OCS") or str(Path(sys.executable).parent / "ocs")
STARTS = int(os.environ.get("BENCH_STARTS", "7"))
# what a feature needs, loaded only when first used (a fresh server with SQLite and no MCP config needs none)
OPTIONAL = ("mcp", "psycopg", "psycopg_pool", "tree_sitter", "tree_sitter_bash", "rapidfuzz", "pathspec", "jsonschema",
            "html2text", "opentelemetry", "prometheus_client", "openai", "anthropic", "httpx2", "rich", "regex",
            "wcmatch", "websockets",
            "opencode_session.core.snapshot", "opencode_session.core.mcp", "opencode_session.core.store.postgres",
            "opencode_session.core.execution.runner")


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def start(ws: dict, extra: list[str], python_flags: list[str]) -> tuple[subprocess.Popen, float, str]:
    """Spawn the server; returns it, the seconds until its health check answered, and its URL."""
    env = {**os.environ, **ws["env"]}
    cmd = [sys.executable, *python_flags, OCS] if python_flags else [OCS]
    t0 = time.perf_counter()
    proc = subprocess.Popen([*cmd, "serve", "--port", "0", "--db", str(ws["db"]), "--directory", str(ws["workdir"]),
                             *extra], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    found = re.search(r"listening on (\S+)", line)
    if not found:
        proc.kill()
        raise SystemExit(f"ocs serve did not start: {line!r} {proc.stderr.read() if proc.stderr else ''}")
    url = found.group(1)
    with urllib.request.urlopen(url + "/api/health", timeout=30) as answer:
        assert answer.status == 200
    return proc, time.perf_counter() - t0, url


def cpu_ms(pid: int) -> float:
    """The process's CPU time so far (user + system, every thread), which load on a shared machine inflates far less
    than it does wall time."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


def settle(pid: int, quiet: float = 1.0, limit: float = 15.0) -> int:
    """The RSS once it stopped changing for `quiet` seconds (or after `limit`)."""
    last, since, t_end = rss_kib(pid), time.monotonic(), time.monotonic() + limit
    while time.monotonic() < t_end:
        time.sleep(0.05)
        now = rss_kib(pid)
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet:
            break
    return last


def stop(proc: subprocess.Popen) -> str:
    proc.terminate()
    try:
        _, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
    return err or ""


def configure_mcp(ws: dict) -> None:
    server = Path(__file__).resolve().parent.parent / "tests" / "support" / "mcp_server.py"
    config_file = ws["root"] / "config" / "opencode" / "opencode.json"
    config = json.loads(config_file.read_text())
    config["mcp"] = {"docs": {"type": "local", "command": [sys.executable, str(server), "docs"]}}
    config_file.write_text(json.dumps(config))


def imports(stderr: str) -> tuple[dict[str, float], list[tuple[float, str]]]:
    """From `-X importtime` output: each optional package's cumulative ms (when loaded) and the slowest self times."""
    loaded: dict[str, float] = {}
    selfs: list[tuple[float, str]] = []
    for line in stderr.splitlines():
        m = re.match(r"import time:\s+(\d+) \|\s+(\d+) \| ( *)(\S+)", line)
        if not m:
            continue
        self_us, cumulative_us, name = int(m.group(1)), int(m.group(2)), m.group(4)
        selfs.append((self_us / 1000, name))
        if name in OPTIONAL:
            loaded[name] = max(loaded.get(name, 0.0), cumulative_us / 1000)
    return loaded, sorted(selfs, reverse=True)[:10]


def main() -> None:
    extra: list[str] = []
    ref = reference_ms()
    healthy: list[float] = []
    cpu_healthy: list[float] = []
    cpu_idle: list[float] = []
    rss: list[float] = []
    for _ in range(STARTS):
        with workspace("ocs-bench-startup-") as ws:
            if os.environ.get("BENCH_MCP") == "1":
                configure_mcp(ws)
            proc, seconds, _url = start(ws, extra, [])
            cpu_healthy.append(cpu_ms(proc.pid))
            rss.append(settle(proc.pid) / 1024)
            cpu_idle.append(cpu_ms(proc.pid))
            stop(proc)
            healthy.append(seconds * 1000)
    with workspace("ocs-bench-startup-") as ws:
        if os.environ.get("BENCH_MCP") == "1":
            configure_mcp(ws)
        proc, _, _url = start(ws, extra, ["-X", "importtime"])
        settle(proc.pid)
        loaded, slowest = imports(stop(proc))
    by_package: dict[str, float] = defaultdict(float)
    print(table(["measure", "median", "min..max"],
                [["start->healthy (ms)", f"{median(healthy):.0f}", spread(healthy)],
                 ["CPU until healthy (ms)", f"{median(cpu_healthy):.0f}", spread(cpu_healthy)],
                 ["CPU until idle, runner loaded (ms)", f"{median(cpu_idle):.0f}", spread(cpu_idle)],
                 ["idle RSS (MiB)", f"{median(rss):.1f}", spread(rss)]]))
    print(f"(reference loop {ref:.0f} ms; {STARTS} starts)\n")
    print(table(["optional module", "loaded at idle", "import ms (cumulative)"],
                [[name, "yes" if name in loaded else "no", f"{loaded[name]:.1f}" if name in loaded else "-"]
                 for name in OPTIONAL]))
    print()
    print(table(["slowest import (self)", "ms"], [[name, f"{ms:.1f}"] for ms, name in slowest]))
    for ms, name in slowest:
        by_package[name.split(".")[0]] += ms
    emit("startup", {"starts": STARTS, "reference_ms": round(ref, 1), "healthy_ms": round(median(healthy), 1),
                     "cpu_healthy_ms": round(median(cpu_healthy), 1), "cpu_idle_ms": round(median(cpu_idle), 1),
                     "idle_rss_mib": round(median(rss), 1), "loaded_at_idle": sorted(loaded),
                     "mcp_configured": os.environ.get("BENCH_MCP") == "1"})


if __name__ == "__main__":
    main()
