"""What a Python plugin costs a session turn: the same two-Step turn (a tool call, then an answer) with the tool
registered on the host and no plugin, and with the tool contributed by a plugin that also adds an instruction source
and one no-op hook of each kind (before-request, after-tool-result, on-event).

A turn is timed from `Sessions.admit` until `SessionExecution.wait` returns, on a real SQLite file with an instant
scripted provider; the two variants' turns are interleaved so background load hits both alike. The difference is the
plugin machinery: loading the instruction source at each boundary, threading each request and each tool output
through the hooks, and the event feed following every durable commit.

Run: .venv/bin/python bench/bench_plugin_hooks.py   (BENCH_PROMPTS turns per variant, default 50)
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

from _common import ToolTurns, emit, median, spread, table, workspace

from opencode_session.core.runtime import Runtime, RuntimeOptions
from opencode_session.core.tools import default_registry
from opencode_session.core.wiring import make_drain_factory
from opencode_session.schema.prompt import PromptInput
from opencode_session.sdk import Plugin, PluginRegistry, ToolContext, ToolOutput

PROMPTS = int(os.environ.get("BENCH_PROMPTS", 50))
WARMUP = 3


class Noop:
    name = "noop"
    description = "Does nothing."
    parameters: dict[str, Any] = {"type": "object"}
    changes_files = False

    async def execute(self, input: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        return ToolOutput.of_text("ok")


def _setup(registry: PluginRegistry) -> None:
    registry.tool(Noop())
    registry.instructions("bench", lambda _asked: "Call noop when asked to.")
    registry.before_request(lambda _hooked: None)
    registry.after_tool_result(lambda _result: None)
    registry.on_event(lambda _record: None)


async def _runtime(ws: dict[str, Any], plugin: bool) -> Runtime:
    provider = ToolTurns("noop", {})
    tools = default_registry()
    if not plugin:
        tools.register(Noop())
    factory = make_drain_factory(tools=tools, provider=lambda _m: provider, titles=False)
    options = RuntimeOptions(db_path=ws["db"], directory=ws["workdir"], env=ws["env"], drain_factory=factory,
                             plugins=[Plugin("bench", _setup)] if plugin else ())
    return await Runtime(options).open()


async def _turn(rt: Runtime, sid: str) -> float:
    assert rt.execution is not None
    t0 = time.perf_counter()
    await rt.sessions.admit(sid, PromptInput(text="call noop"), resume=True)
    await rt.execution.wait(sid)
    return (time.perf_counter() - t0) * 1000


async def main() -> None:
    with workspace("bench-plugins-none-") as plain_ws, workspace("bench-plugins-hooked-") as hooked_ws:
        plain, hooked = await _runtime(plain_ws, False), await _runtime(hooked_ws, True)
        try:
            times: dict[str, list[float]] = {"no plugin": [], "plugin with hooks": []}
            for n in range(WARMUP + PROMPTS):
                for name, rt in (("no plugin", plain), ("plugin with hooks", hooked)):
                    sid = (await rt.sessions.create()).id
                    took = await _turn(rt, sid)
                    if n >= WARMUP:
                        times[name].append(took)
        finally:
            await plain.close()
            await hooked.close()
    base, with_hooks = median(times["no plugin"]), median(times["plugin with hooks"])
    print(f"a two-Step turn (tool call, answer), {PROMPTS} turns per variant, new session each, interleaved\n")
    print(table(["variant", "median ms/turn", "min..max"],
                [[name, f"{median(xs):.2f}", spread(xs)] for name, xs in times.items()]))
    print(f"\nplugin overhead: {with_hooks - base:+.2f} ms per turn ({with_hooks / base:.3f}x)")
    emit("plugin_hooks", {"prompts": PROMPTS, "no_plugin_ms": round(base, 3), "plugin_ms": round(with_hooks, 3),
                          "overhead_ms": round(with_hooks - base, 3), "ratio": round(with_hooks / base, 3)})


if __name__ == "__main__":
    asyncio.run(main())
