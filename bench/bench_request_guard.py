"""What the request guard costs per request, and how the tools it protects behave on hostile input.

(a) The Host/Origin guard and the body guard (content type, size counted while streaming) around a do-nothing ASGI
app, against that app alone: microseconds per request for a GET and for JSON POSTs of 1 KiB and 1 MiB arriving in
64 KiB messages, as uvicorn delivers them. (b) The request-JSON depth check on a 1 MiB prompt body and on a body of
10,000 small objects. (c) `glob` with a pattern that backtracks catastrophically in a naive regex translation, over
a directory of long names, and `read` of a 64 MiB file with no newline: seconds and the process's peak RSS.
"""

from __future__ import annotations

import asyncio
import json
import resource
import time
from typing import Any

from _common import emit, median, spread, table, workspace

from opencode_session.core.tools import ToolContext, default_registry
from opencode_session.server.body import MAX_JSON_DEPTH, _nested_deeper_than
from opencode_session.server.guard import BodyGuard, OriginGuard

REPS = 5
REQUESTS = 2000
CHUNK = 64 * 1024


async def _noop(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["method"] == "POST":
        while (await receive()).get("more_body"):
            pass
    await send({"type": "http.response.start", "status": 204, "headers": []})
    await send({"type": "http.response.body", "body": b""})


def _request(body: bytes) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    headers = [(b"host", b"127.0.0.1:4096"), (b"user-agent", b"bench")]
    if body:
        headers += [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    scope = {"type": "http", "method": "POST" if body else "GET", "path": "/api/x", "headers": headers}
    chunks = [body[i:i + CHUNK] for i in range(0, len(body), CHUNK)] or [b""]
    messages = [{"type": "http.request", "body": c, "more_body": i < len(chunks) - 1} for i, c in enumerate(chunks)]
    return scope, messages


async def _per_request_us(app: Any, body: bytes, n: int) -> float:
    scope, messages = _request(body)

    async def send(_message: dict[str, Any]) -> None:
        return None

    started = time.perf_counter()
    for _ in range(n):
        pending = iter(messages)

        async def receive(pending: Any = pending) -> dict[str, Any]:
            return next(pending, {"type": "http.disconnect"})

        await app(scope, receive, send)
    return (time.perf_counter() - started) / n * 1e6


async def guard_overhead() -> tuple[list[list[Any]], dict[str, float]]:
    guarded = OriginGuard(BodyGuard(_noop))
    rows, results = [], {}
    for label, body, n in (("GET", b"", REQUESTS), ("POST 1 KiB", b'{"a":"' + b"x" * 1012 + b'"}', REQUESTS),
                           ("POST 1 MiB", b'{"a":"' + b"x" * (1 << 20) + b'"}', REQUESTS // 20)):
        bare, guard = [], []
        for _ in range(REPS):  # interleaved, so machine drift hits both alike
            bare.append(await _per_request_us(_noop, body, n))
            guard.append(await _per_request_us(guarded, body, n))
        added = median(guard) - median(bare)
        rows.append([label, f"{median(bare):.1f}", f"{median(guard):.1f}", f"{added:.1f}", spread(guard)])
        results[label.replace(" ", "_").lower() + "_added_us"] = round(added, 2)
    return rows, results


def depth_check() -> tuple[list[list[Any]], dict[str, float]]:
    bodies = {"1 MiB prompt": {"prompt": {"text": "x" * (1 << 20)}},
              "10k small objects": {"value": [{"k": i, "v": [i, {"w": str(i)}]} for i in range(10_000)]}}
    rows, results = [], {}
    for label, payload in bodies.items():
        times = []
        for _ in range(REPS):
            started = time.perf_counter()
            assert not _nested_deeper_than(payload, MAX_JSON_DEPTH)
            times.append((time.perf_counter() - started) * 1e3)
        parse = []
        raw = json.dumps(payload)
        for _ in range(REPS):
            started = time.perf_counter()
            json.loads(raw)
            parse.append((time.perf_counter() - started) * 1e3)
        rows.append([label, f"{median(times):.3f}", f"{median(parse):.3f}"])
        results[label.replace(" ", "_") + "_depth_ms"] = round(median(times), 3)
    return rows, results


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def hostile_tools() -> tuple[list[list[Any]], dict[str, float]]:
    rows, results = [], {}
    with workspace("ocs-bench-guard-") as ws:
        work = ws["workdir"]
        for n in range(200):
            (work / ("a" * 60 + str(n))).write_text("x")
        with open(work / "one-line.txt", "wb") as huge:
            for _ in range(64):
                huge.write(b"a" * (1 << 20))
        ctx = ToolContext(session_id="ses_b", message_id="msg_b", call_id="c", agent="build", directory=work,
                          project_root=work)
        registry = default_registry()
        for label, name, args in (("glob '*' x31 + 'x' over 200 long names", "glob", {"pattern": "*" * 31 + "x"}),
                                  ("read 64 MiB without a newline", "read", {"path": "one-line.txt"})):
            before = _peak_rss_mb()
            started = time.perf_counter()
            await registry.settle(name, args, ctx)
            seconds = time.perf_counter() - started
            rows.append([label, f"{seconds:.3f}", f"{_peak_rss_mb() - before:.1f}"])
            results[name + "_seconds"] = round(seconds, 3)
    return rows, results


async def main() -> None:
    overhead_rows, overhead = await guard_overhead()
    print(f"(a) guard overhead, median of {REPS} x {REQUESTS} requests (1 MiB: x {REQUESTS // 20}), µs/request")
    print(table(["request", "bare app", "guarded", "added", "guarded min..max"], overhead_rows))
    depth_rows, depth = depth_check()
    print(f"\n(b) request JSON depth check (limit {MAX_JSON_DEPTH}), median ms; json.loads of the same body for scale")
    print(table(["body", "depth check", "json.loads"], depth_rows))
    tool_rows, tools = await hostile_tools()
    print("\n(c) hostile tool input: seconds, and growth of this process's peak RSS in MiB")
    print(table(["call", "seconds", "peak RSS growth"], tool_rows))
    emit("request_guard", {**overhead, **depth, **tools})


if __name__ == "__main__":
    asyncio.run(main())
