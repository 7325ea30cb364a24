"""Shared helpers for the benchmarks: temp dirs, the isolated config, medians and a small table printer.

Not a benchmark itself (run.py only picks up `bench_*.py`)."""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT / "src") not in sys.path:
    sys.path.insert(0, str(ROOT / "src"))  # harmless with the editable install; helps a bare checkout

# The one model the runtime resolves; the URL is never dialled (the benchmarks inject their own provider).
CONFIG: dict[str, Any] = {
    "model": "local/m",
    "provider": {"local": {
        "npm": "@ai-sdk/openai-compatible",
        "options": {"baseURL": "http://127.0.0.1:9/v1", "apiKey": "x"},
        "models": {"m": {}},
    }},
}


@contextmanager
def workspace(prefix: str) -> Iterator[dict[str, Any]]:
    """A fresh temp dir with `db` (SQLite file path), `workdir` and an isolated `env` (config, home, data).

    BENCH_TMPDIR chooses the parent directory (default: the system temp dir); put it on the disk you care about,
    since durable-append numbers are bounded by that file system's fsync."""
    with tempfile.TemporaryDirectory(prefix=prefix, dir=os.environ.get("BENCH_TMPDIR")) as tmp:
        root = Path(tmp)
        cfg = root / "config" / "opencode"
        cfg.mkdir(parents=True)
        (cfg / "opencode.json").write_text(json.dumps(CONFIG))
        (root / "home").mkdir()
        (root / "data").mkdir()
        workdir = root / "work"
        workdir.mkdir()
        env = {"XDG_CONFIG_HOME": str(root / "config"), "HOME": str(root / "home"),
               "XDG_DATA_HOME": str(root / "data")}
        yield {"root": root, "db": root / "db.sqlite", "workdir": workdir, "env": env}


def median(xs: list[float]) -> float:
    return statistics.median(xs)


def spread(xs: list[float]) -> str:
    """min..max, to show how noisy the repetitions were."""
    return f"{min(xs):,.0f}..{max(xs):,.0f}" if max(xs) >= 100 else f"{min(xs):.3f}..{max(xs):.3f}"


def table(headers: list[str], rows: list[list[Any]]) -> str:
    cells = [[str(h) for h in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = []
    for n, row in enumerate(cells):
        pairs = enumerate(zip(row, widths, strict=True))
        lines.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in pairs))
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def machine() -> dict[str, Any]:
    return {"python": platform.python_version(), "cpus": os.cpu_count(), "platform": platform.platform(),
            "tmp": os.environ.get("BENCH_TMPDIR") or tempfile.gettempdir()}


def reference_ms() -> float:
    """How long a fixed pure-Python loop takes right now (best of three): the machine's speed of the moment, which
    on a shared machine drifts by half within the hour. Runs taken at different times compare after dividing by it."""
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        total = 0
        for i in range(1_000_000):
            total += i
        best = min(best, time.perf_counter() - t0)
    return best * 1000


def emit(name: str, results: dict[str, Any]) -> None:
    """The machine-readable last line of every benchmark."""
    print(json.dumps({"bench": name, "machine": machine(), **results}, separators=(",", ":")), flush=True)


class ToolTurns:
    """A provider whose every turn is two Steps: odd calls ask for `tool` with `arguments`, even calls answer "done"."""

    def __init__(self, tool: str, arguments: dict[str, Any]) -> None:
        self.tool = tool
        self.arguments = arguments
        self.calls = 0

    async def stream(self, request: Any):
        from opencode_session.core.llm import model as llm

        self.calls += 1
        if self.calls % 2:
            yield llm.ToolCall(f"call_{self.calls}", self.tool, dict(self.arguments))
            yield llm.Finish("tool-calls", llm.Usage(10, 5))
        else:
            yield llm.TextStart("t")
            yield llm.TextDelta("t", "done")
            yield llm.TextEnd("t")
            yield llm.Finish("stop", llm.Usage(10, 5))
