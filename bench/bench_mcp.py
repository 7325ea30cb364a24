"""What offering MCP tools costs a Step: 50 tools from 3 real MCP servers (the SDK-written test server under
tests/support, over stdio) against the built-ins alone.

(a) End to end: a prompt on a runtime whose Location configures the 3 servers, interleaved with one on a runtime
without any, each a one-Step turn with an instant in-process provider; median of `admit -> wait` minus the
provider's own time, and of `admit returned -> provider entered` (the boundary: instructions with the MCP guidance,
promotion, history, the Model Context with its tools), and their differences. The servers are started (and their
tools listed) by an unmeasured first prompt.
(b) The MCP share of that boundary alone, in a loop: the registry readying and listing the Location's tools (one
ToolSet, definitions of those offered) and the MCP guidance source, with and without the servers.

Run: .venv/bin/python bench/bench_mcp.py   (BENCH_PROMPTS, default 60 per side)
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from _common import ROOT, emit, median, spread, table, workspace
from bench_step_overhead import InstantProvider

from opencode_session.core.boundary import Boundary
from opencode_session.core.execution.sampling import BoundarySampler
from opencode_session.core.instructions.algebra import initialize
from opencode_session.core.mcp.guidance import McpGuidance
from opencode_session.core.mcp.source import McpToolSource
from opencode_session.core.runtime import Runtime, RuntimeOptions
from opencode_session.core.tools.registry import default_registry
from opencode_session.core.wiring import make_drain_factory
from opencode_session.schema.prompt import PromptInput

PROMPTS = int(os.environ.get("BENCH_PROMPTS", 60))
LOOPS = 2000
SERVER = ROOT / "tests" / "support" / "mcp_server.py"
BASE_TOOLS = 12  # the test server's own tools; MCP_TEST_TOOLS adds numbered ones
RESOURCE_TOOLS = 2  # list_mcp_resources and read_mcp_resource: the test server offers resources
SERVERS = {"alpha": 17, "beta": 17, "gamma": 16}  # 50 tools


def mcp_config() -> dict[str, Any]:
    return {name: {"type": "local", "command": [sys.executable, str(SERVER), name], "environment": {
        "MCP_TEST_TOOLS": str(count - BASE_TOOLS), "MCP_TEST_INSTRUCTIONS": f"How to use {name}."}}
        for name, count in SERVERS.items()}


class Side:
    def __init__(self, rt: Runtime, provider: InstantProvider, sessions: list[str]) -> None:
        self.rt, self.provider, self.sessions = rt, provider, sessions
        self.total: list[float] = []
        self.boundary: list[float] = []
        self.tools = 0

    async def prompt(self, sid: str) -> tuple[float, float]:
        p = self.provider
        own = p.own
        t0 = time.perf_counter()
        await self.rt.sessions.admit(sid, PromptInput(text="Summarise the project."))
        t1 = time.perf_counter()
        assert self.rt.execution is not None
        await self.rt.execution.wait(sid)
        t2 = time.perf_counter()
        return (t2 - t0 - (p.own - own)) * 1000, (p.entered - t1) * 1000


class CountingProvider(InstantProvider):
    tools = 0

    async def stream(self, request: Any):  # type: ignore[override]
        self.tools = len(request.tools)
        async for item in super().stream(request):
            yield item


async def open_side(ws: dict[str, Any], mcp: dict[str, Any] | None) -> tuple[Runtime, CountingProvider]:
    if mcp is not None:
        (ws["workdir"] / "opencode.json").write_text(json.dumps({"mcp": mcp}))
    provider = CountingProvider()
    env = {**ws["env"], "PATH": os.environ.get("PATH", os.defpath)}
    factory = make_drain_factory(provider=lambda _m: provider, titles=False)
    rt = await Runtime(RuntimeOptions(db_path=ws["db"], directory=ws["workdir"], env=env,
                                      drain_factory=factory)).open()
    return rt, provider


async def boundary_loop(rt: Runtime, sid: str, with_mcp: bool) -> float:
    """µs per Step of the MCP-dependent boundary work: tools readied, listed and defined, guidance produced."""
    sampler = BoundarySampler(rt.store, rt.config, rt.options.env, _NoFiles())
    b: Boundary = await sampler.sample(sid)
    registry = default_registry()
    if with_mcp:
        registry.add_source(McpToolSource(rt.mcp))
    guidance = McpGuidance(rt.mcp, rt.options.env)
    rules = b.rules(rt.options.env)
    del rules
    t0 = time.perf_counter()
    for _ in range(LOOPS):
        await registry.prepare(b)
        toolset = registry.snapshot(b)
        toolset.definitions(toolset.offered(b.config))
        await initialize(await guidance(b))
    return (time.perf_counter() - t0) / LOOPS * 1e6


class _NoFiles:
    def read_files(self, boundary: Boundary) -> None:
        return None


async def main() -> None:
    with workspace("ocs-bench-mcp-a-") as plain_ws, workspace("ocs-bench-mcp-b-") as mcp_ws:
        plain_rt, plain_provider = await open_side(plain_ws, None)
        mcp_rt, mcp_provider = await open_side(mcp_ws, mcp_config())
        try:
            sides = {}
            for label, rt, provider in (("built-ins only", plain_rt, plain_provider),
                                        ("+ 50 MCP tools (3 servers)", mcp_rt, mcp_provider)):
                sessions = [(await rt.sessions.create()).id for _ in range(4)]
                side = Side(rt, provider, sessions)
                for sid in sessions:  # unmeasured: the checkpoint, and on the MCP side the servers' start
                    await side.prompt(sid)
                side.tools = provider.tools
                sides[label] = side
            plain, with_mcp = sides.values()
            assert with_mcp.tools - plain.tools == sum(SERVERS.values()) + RESOURCE_TOOLS, (plain.tools, with_mcp.tools)
            for i in range(PROMPTS):
                for side in (plain, with_mcp) if i % 2 == 0 else (with_mcp, plain):
                    total, boundary = await side.prompt(side.sessions[i % len(side.sessions)])
                    side.total.append(total)
                    side.boundary.append(boundary)
            loop_plain = await boundary_loop(plain_rt, plain.sessions[0], False)
            loop_mcp = await boundary_loop(mcp_rt, with_mcp.sessions[0], True)
        finally:
            await plain_rt.close()
            await mcp_rt.close()
    rows = [[label, side.tools, f"{median(side.total):.2f}", spread(side.total), f"{median(side.boundary):.2f}"]
            for label, side in sides.items()]
    extra_total = median(with_mcp.total) - median(plain.total)
    extra_boundary = median(with_mcp.boundary) - median(plain.boundary)
    print(f"one-Step prompts, {PROMPTS} per side, interleaved (ms)")
    print(table(["side", "tools offered", "prompt->idle", "min..max", "admit->provider"], rows))
    print(f"extra per Step with 50 MCP tools: {extra_total:+.2f} ms end to end, {extra_boundary:+.2f} ms before the "
          f"provider (target: <= 2 ms)")
    print(f"boundary work alone (tools readied + listed + defined, MCP guidance): {loop_plain:.0f} us without, "
          f"{loop_mcp:.0f} us with the servers ({(loop_mcp - loop_plain) / 1000:+.3f} ms)")
    emit("mcp", {"prompts": PROMPTS, "tools": {"plain": plain.tools, "mcp": with_mcp.tools},
                 "prompt_to_idle_ms": {"plain": median(plain.total), "mcp": median(with_mcp.total)},
                 "before_provider_ms": {"plain": median(plain.boundary), "mcp": median(with_mcp.boundary)},
                 "extra_ms": {"end_to_end": extra_total, "before_provider": extra_boundary},
                 "boundary_loop_us": {"plain": loop_plain, "mcp": loop_mcp}})


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    asyncio.run(main())
