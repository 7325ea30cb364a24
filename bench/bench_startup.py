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
`BENCH_STARTUP_BEFORE=DIR/src` (another tree's sources, e.g. a `git worktree` of main) starts that tree's server (its
sources first on PYTHONPATH) beside every start of this one, interleaved, for a before/after measured side by side.

Run: .venv/bin/python bench/bench_startup.py
"""

from __future__ import annotations

import compileall
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
BEFORE = os.environ.get("BENCH_STARTUP_BEFORE")
# what a feature needs, loaded only when first used (a fresh server with SQLite and no MCP config needs none)
OPTIONAL = ("mcp", "psycopg", "psycopg_pool", "tree_sitter", "tree_sitter_bash", "rapidfuzz", "pathspec", "jsonschema",
            "html2text", "opentelemetry", "prometheus_client", "openai", "anthropic", "httpx2", "rich", "regex",
            "wcmatch", "websockets", "jinja2", "markdown_it", "pygments",
            "opencode_session.core.snapshot", "opencode_session.core.mcp", "opencode_session.core.store.postgres",
            "opencode_session.core.execution.runner")


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def start(ws: dict, extra: list[str], python_flags: list[str],
          tree: str | None = None) -> tuple[subprocess.Popen, float, str]:
    """Spawn the server (with `tree`'s sources first on PYTHONPATH, if given); returns it, the seconds until its
    health check answered, and its URL."""
    env = {**os.environ, **ws["env"]}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # a user's installed package has its bytecode
    if tree is not None:
        env["PYTHONPATH"] = tree
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
    trees: dict[str, str | None] = {"before": BEFORE, "after": None} if BEFORE else {"after": None}
    if BEFORE:
        compileall.compile_dir(Path(BEFORE) / "opencode_session", quiet=1)
    compileall.compile_dir(Path(__file__).resolve().parent.parent / "src" / "opencode_session", quiet=1)
    rows: dict[str, dict[str, list[float]]] = {side: defaultdict(list) for side in trees}
    for _ in range(STARTS):
        for side, tree in trees.items():
            with workspace("ocs-bench-startup-") as ws:
                if os.environ.get("BENCH_MCP") == "1":
                    configure_mcp(ws)
                proc, seconds, _url = start(ws, extra, [], tree)
                rows[side]["healthy"].append(seconds * 1000)
                rows[side]["cpu_healthy"].append(cpu_ms(proc.pid))
                rows[side]["rss"].append(settle(proc.pid) / 1024)
                rows[side]["cpu_idle"].append(cpu_ms(proc.pid))
                stop(proc)
    loaded: dict[str, dict[str, float]] = {}
    slowest: list[tuple[float, str]] = []
    for side, tree in trees.items():
        with workspace("ocs-bench-startup-") as ws:
            if os.environ.get("BENCH_MCP") == "1":
                configure_mcp(ws)
            proc, _, _url = start(ws, extra, ["-X", "importtime"], tree)
            settle(proc.pid)
            loaded[side], slowest = imports(stop(proc))
    measures = [("start->healthy (ms)", "healthy", "{:.0f}"), ("CPU until healthy (ms)", "cpu_healthy", "{:.0f}"),
                ("CPU until idle, runner loaded (ms)", "cpu_idle", "{:.0f}"), ("idle RSS (MiB)", "rss", "{:.1f}")]
    headers = ["measure"] + [f"{side} median" if BEFORE else "median" for side in trees]
    headers += [f"{side} min..max" if BEFORE else "min..max" for side in trees]
    print(table(headers, [[label, *(fmt.format(median(rows[side][key])) for side in trees),
                           *(spread(rows[side][key]) for side in trees)] for label, key, fmt in measures]))
    print(f"(reference loop {ref:.0f} ms; {STARTS} starts{' of each tree, interleaved' if BEFORE else ''})\n")
    print(table(["optional module", *(f"loaded at idle ({side})" if BEFORE else "loaded at idle" for side in trees),
                 "import ms (cumulative)"],
                [[name, *("yes" if name in loaded[side] else "no" for side in trees),
                  f"{loaded['after'][name]:.1f}" if name in loaded["after"] else "-"] for name in OPTIONAL]))
    print()
    print(table(["slowest import (self)", "ms"], [[name, f"{ms:.1f}"] for ms, name in slowest]))
    result: dict[str, object] = {"starts": STARTS, "reference_ms": round(ref, 1),
                                 "mcp_configured": os.environ.get("BENCH_MCP") == "1"}
    for side in trees:
        prefix = f"{side}_" if BEFORE else ""
        result.update({f"{prefix}healthy_ms": round(median(rows[side]["healthy"]), 1),
                       f"{prefix}cpu_healthy_ms": round(median(rows[side]["cpu_healthy"]), 1),
                       f"{prefix}cpu_idle_ms": round(median(rows[side]["cpu_idle"]), 1),
                       f"{prefix}idle_rss_mib": round(median(rows[side]["rss"]), 1),
                       f"{prefix}loaded_at_idle": sorted(loaded[side])})
    emit("startup", result)


if __name__ == "__main__":
    main()
