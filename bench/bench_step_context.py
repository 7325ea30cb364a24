"""What recording a Step's Model Context costs on the hot path, next to encoding its request: per Step of a growing
conversation (each Step adds a prompt), the CPU of the adapter's `encode_request` (which the Step pays anyway) and of
the record (`ContextRecorder.fields`, the sections by source, plus `encode`, the change from the previous record),
and how many bytes the record stores against the body it keeps. No network and no database: the write itself joins
the Step's first commit (it is lazy), so what is measured is what the event loop pays.

Knobs: BENCH_SIZES (default "10,1000,10000" history messages), BENCH_CONTEXT_STEPS (default 20 Steps per size)."""

from __future__ import annotations

import os
import time
from typing import Any

from _common import emit, median, table
from bench_adapter_request import ADAPTERS, TOOLS, history

from opencode_session.core.execution.context_record import ContextRecorder, StepSources
from opencode_session.core.llm.model import LLMRequest, ResolvedModel, TextPart, UserMessage
from opencode_session.core.session.history import HistoryEntry

SIZES = [int(s) for s in os.environ.get("BENCH_SIZES", "10,1000,10000").split(",")]
STEPS = int(os.environ.get("BENCH_CONTEXT_STEPS", "20"))
SYSTEM = "You are a benchmark. " * 200  # ~4 KB: an agent text and a baseline of realistic size


def _entries(n: int) -> list[HistoryEntry]:
    return [HistoryEntry(f"msg_{i:020d}", i, 0, {"type": "user" if i % 2 == 0 else "assistant"})  # type: ignore[arg-type]
            for i in range(n)]


def measure(protocol: str, size: int) -> list[Any]:
    adapter = ADAPTERS[protocol]("http://127.0.0.1:9", api_key="sk-bench")
    model = ResolvedModel("bench", "m", "http://127.0.0.1:9", api_key="sk-bench", output_limit=1000,
                          protocol=protocol)  # type: ignore[arg-type]
    grown, entries = history(size), _entries(size)
    recorder = ContextRecorder()
    encode_s, record_s, stored, bodies = [], [], 0, 0
    for step in range(STEPS + 1):
        grown.append(UserMessage([TextPart(f"And then {step}?")]))
        entries.append(HistoryEntry(f"msg_{size + step:020d}", size + step, 0, {"type": "user"}))  # type: ignore[arg-type]
        request = LLMRequest(model=model, system=[SYSTEM, SYSTEM], messages=list(grown), tools=TOOLS,
                             prompt_cache_key="bench")
        sources = StepSources("build", SYSTEM, SYSTEM, list(entries), [], request)
        t0 = time.process_time()
        body = adapter.encode_request(request)
        t1 = time.process_time()
        fields = recorder.fields("ses_bench", sources, request, {"providerID": "bench", "id": "m"}, body)
        _root, _base, data = recorder.encode("ses_bench", f"msg_{size + step:020d}", fields)
        t2 = time.process_time()
        if step:  # the first Step is a full record and warms the adapter's history
            encode_s.append(t1 - t0)
            record_s.append(t2 - t1)
            stored += len(data)
            bodies += len(body)
    enc, rec = median(encode_s) * 1000, median(record_s) * 1000
    return [protocol, f"{size:,}", f"{enc:.3f}", f"{rec:.3f}", f"{stored // STEPS:,}", f"{bodies // STEPS:,}"]


def main() -> None:
    rows = [measure(protocol, size) for protocol in ADAPTERS for size in SIZES]
    print(table(["adapter", "history", "encode ms/Step", "record ms/Step", "stored B/Step", "body B/Step"], rows))
    emit("step_context", {"rows": rows, "steps": STEPS})


if __name__ == "__main__":
    main()
