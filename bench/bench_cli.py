"""The commands that should answer at once (issue 56): wall and CPU time of a fresh `ocs` process for `--version`,
`--help`, `sessions`, `show` and `stats`, on a database without sessions and on one of 10,000 (seeded through the
store: each a prompt and an answer with usage), and of `ocs run "…"` until the first byte of the answer of an
instant loopback model (`bench_http`'s) reaches its stdout.

CPU is the process's user + system time (wait4), steadier than the wall clock on a shared machine. Each row is the
median over BENCH_CLI_REPS (5) runs. With BENCH_CLI_BEFORE=DIR, a source tree (`git archive main src | tar -x -C
DIR`), every row is also run with DIR on PYTHONPATH, interleaved with this tree's runs, for a before/after measured
side by side. BENCH_CLI_SESSIONS (10000) sizes the big database."""

from __future__ import annotations

import asyncio
import compileall
import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from _common import emit, median, reference_ms, table, workspace
from bench_http import Loopback

import opencode_session
from opencode_session.core.session.projector import project
from opencode_session.core.store import Store, open_backend

REPS = int(os.environ.get("BENCH_CLI_REPS", 5))
SESSIONS = int(os.environ.get("BENCH_CLI_SESSIONS", 10_000))
BEFORE = os.environ.get("BENCH_CLI_BEFORE")
NOW = 1_780_000_000_000
SHOWN = "ses_00000000"  # the session `ocs show` prints (on the empty database: a missing one)
# the code that answers: the entry point's own words, so both trees start the same way
ENTRY = "import sys; sys.argv[0] = 'ocs'; from opencode_session.cli.main import main; main()"
TARGETS = {"sessions": 0.3, "show": 0.3, "stats": 0.3}  # seconds on the empty database; 0.5 with 10,000 sessions


def _seed(tx: Any, first: int, last: int) -> None:
    """Sessions as the projector leaves them: a prompt and an answer with usage each, a minute apart."""
    for n in range(first, last):
        sid = f"ses_{n:08d}"
        at = NOW - n * 60_000
        tx.sessions.insert({"id": sid, "projectID": "prj", "title": f"session {n}", "location": {"directory": "/w"},
                            "time": {"created": at, "updated": at}, "agent": "build",
                            "model": {"id": "m", "providerID": "loop"}})
        tx.messages.insert(sid, 1, {"id": f"msg_{n:08d}_1", "time": {"created": at}, "type": "user",
                                    "text": "make the change"})
        tx.messages.insert(sid, 2, {
            "id": f"msg_{n:08d}_2", "time": {"created": at + 1, "completed": at + 900}, "type": "assistant",
            "agent": "build", "model": {"id": "m", "providerID": "loop"},
            "content": [{"type": "text", "id": "t", "text": "Done: the change is made."}],
            "finish": "stop", "cost": 0.001,
            "tokens": {"input": 1200, "output": 300, "reasoning": 0, "cache": {"read": 800, "write": 10}}})


async def make_database(path: Path, sessions: int) -> None:
    async with Store(open_backend(str(path)), project=project) as store:
        for first in range(0, sessions, 500):
            await store.write(lambda tx, first=first: _seed(tx, first, min(first + 500, sessions)))


def _environment(env: dict[str, str], tree: str | None) -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if not k.startswith(("OPENCODE_", "OPENAI_", "ANTHROPIC_", "OTEL_"))}
    out.update(env)
    out.pop("PYTHONPATH", None)
    out.pop("PYTHONDONTWRITEBYTECODE", None)
    if tree is not None:
        out["PYTHONPATH"] = tree
    return out


def measure(args: list[str], env: dict[str, str], cwd: Path, *, first_byte: bool = False) -> tuple[float, float, str]:
    """(seconds until exit, or until the first stdout byte with `first_byte`; CPU seconds; stdout) of one process."""
    began = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", ENTRY, *args], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    first = None
    out = b""
    streams = [proc.stdout, proc.stderr]
    err = b""
    while streams:
        ready, _, _ = select.select(streams, [], [], 60)
        if not ready:
            proc.kill()
            raise TimeoutError(f"ocs {' '.join(args)} gave nothing for 60 s")
        for stream in ready:
            chunk = os.read(stream.fileno(), 65536)
            if not chunk:
                streams.remove(stream)
            elif stream is proc.stdout:
                first = first or time.perf_counter()
                out += chunk
            else:
                err += chunk
    _, status, usage = os.wait4(proc.pid, 0)
    ended = time.perf_counter()
    proc.returncode = os.waitstatus_to_exitcode(status)
    if first_byte and (proc.returncode != 0 or first is None):
        raise RuntimeError(f"ocs {' '.join(args)} failed ({proc.returncode}): {err.decode()[-2000:]}")
    wall = (first if first_byte and first is not None else ended) - began
    return wall, usage.ru_utime + usage.ru_stime, out.decode()


def main() -> None:
    ref = reference_ms()
    trees: dict[str, str | None] = {"after": None}
    if BEFORE:
        trees = {"before": BEFORE, "after": None}
    # An installed package has its bytecode; without it (PYTHONDONTWRITEBYTECODE keeps imports from caching it) every
    # command would also compile each module it imports, which measures the compiler, not the command.
    for tree in (Path(opencode_session.__file__).parent.parent, *([Path(BEFORE)] if BEFORE else [])):
        compileall.compile_dir(tree / "opencode_session", quiet=1)
    llm = Loopback()
    llm.start()
    rows: dict[tuple[str, str], dict[str, list[float]]] = {}
    with workspace("ocs-bench-cli-") as empty, workspace("ocs-bench-cli-") as big:
        for ws in (empty, big):
            (ws["root"] / "config" / "opencode" / "opencode.json").write_text(json.dumps({
                "model": "loop/m", "autoupdate": False, "share": "disabled",
                "provider": {"loop": {"npm": "@ai-sdk/openai-compatible", "name": "loop",
                                      "options": {"baseURL": llm.base_url, "apiKey": "k"},
                                      "models": {"m": {"name": "m"}}}}}))
        asyncio.run(make_database(empty["db"], 0))
        began = time.perf_counter()
        asyncio.run(make_database(big["db"], SESSIONS))
        seeded = time.perf_counter() - began
        cases: list[tuple[str, str, dict[str, Any], list[str], bool]] = [
            ("--version", "-", empty, ["--version"], False),
            ("--help", "-", empty, ["--help"], False),
        ]
        for label, ws in (("empty", empty), (f"{SESSIONS:,}", big)):
            db = ["--db", str(ws["db"])]
            cases += [("sessions", label, ws, ["sessions", *db], False),
                      ("show", label, ws, ["show", SHOWN, *db], False),
                      ("stats", label, ws, ["stats", *db], False)]
        cases.append(("run: first token", "new db", empty, ["run", "hello"], True))
        for _ in range(REPS):
            for name, label, ws, args, first_byte in cases:
                for side, tree in trees.items():
                    if name == "run: first token":  # a new database each time: the first-run path
                        args = [*args[:2], "--db", str(ws["root"] / f"run-{side}-{time.monotonic_ns()}.db")]
                    wall, cpu, _out = measure(args, _environment(ws["env"], tree), ws["workdir"],
                                              first_byte=first_byte)
                    row = rows.setdefault((name, label), {})
                    row.setdefault(f"{side} wall", []).append(wall)
                    row.setdefault(f"{side} cpu", []).append(cpu)
    llm.stop()
    headers = ["command", "database"]
    for side in trees:
        headers += [f"{side} wall s", f"{side} CPU s"]
    headers.append("target s")
    lines = []
    for (name, label), row in rows.items():
        target = TARGETS.get(name)
        goal = "" if target is None else f"{target if label == 'empty' else 0.5:.1f}"
        if name.startswith("run"):
            goal = "0.6"
        cells = [name, label]
        for side in trees:
            cells += [f"{median(row[f'{side} wall']):.3f}", f"{median(row[f'{side} cpu']):.3f}"]
        lines.append([*cells, goal])
    print(f"`ocs` commands, fresh process each, median of {REPS} runs; {SESSIONS:,} sessions seeded in {seeded:.0f} s;"
          f" reference loop {ref:.0f} ms")
    print(table(headers, lines))
    emit("cli", {"reps": REPS, "sessions": SESSIONS, "reference_ms": round(ref, 1),
                 "rows": {f"{name} [{label}]": {k: round(median(v), 4) for k, v in row.items()}
                          for (name, label), row in rows.items()}})


if __name__ == "__main__":
    main()
