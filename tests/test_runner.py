"""The runner and SessionExecution end to end over a real SQLite store, with a scripted provider.

Everything asserted here is what a user would notice: the durable log, the projected messages and pending
input, and the requests the provider received. Synchronisation uses Gates, events and `execution.wait`."""

from __future__ import annotations

import asyncio
import errno
import json
import math
import os
import shlex
import sys
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest

from opencode_session.core.execution.model_context import MAX_STEPS_NOTICE
from opencode_session.core.execution.orphans import LOST_CALL, LOST_INPUT
from opencode_session.core.execution.runner import Runner, RunnerDeps
from opencode_session.core.execution.step import TOOLS_DISABLED
from opencode_session.core.instructions.checkpoint import CheckpointPreparer
from opencode_session.core.llm import model as llm
from opencode_session.core.llm.errors import (
    AuthenticationError,
    ProviderInternalError,
    RateLimitError,
    TransportError,
)
from opencode_session.core.llm.retry import Clock, base_delay_ms, retry_delay_ms
from opencode_session.core.plugins import PluginHooks
from opencode_session.core.plugins.api import Hooked, ToolCallRequest, ToolResult
from opencode_session.core.runtime import Runtime, RuntimeOptions
from opencode_session.core.tools.builtin import BashTool, WebSearchTool
from opencode_session.core.tools.managed import ManagedOutputs
from opencode_session.core.tools.registry import ToolRegistry
from opencode_session.core.tools.tool import ToolContext, ToolOutput
from opencode_session.core.userhooks import ToolVerdict, UserHooks
from opencode_session.schema import events as ev
from opencode_session.schema.common import ModelRef
from opencode_session.schema.prompt import PromptInput
from tests.support.scripted import Gate, ScriptedProvider, text, tool_call
from tests.support.tools import process_alive

pytestmark = pytest.mark.anyio

TIMEOUT = 10  # seconds; a guard against hangs, never a synchronisation device
NOW = 1_700_000_000_000
USAGE = llm.Usage(10, 5)
TERMINALS = ("session.execution.succeeded", "session.execution.failed", "session.execution.interrupted")


# --- test doubles ------------------------------------------------------------------------------------


class FakeClock(Clock):
    """A fixed `now` and retry waits that are recorded and return at once (unless a test holds them)."""

    def __init__(self) -> None:
        self.sleeps: list[float] = []
        self.sleeping = asyncio.Event()
        self.hold: asyncio.Event | None = None

    def now_ms(self) -> int:
        return NOW

    async def sleep_ms(self, ms: float) -> None:
        self.sleeps.append(ms)
        self.sleeping.set()
        if self.hold is not None:
            await self.hold.wait()


class EchoTool:
    """A quick local tool that counts its executions."""

    parameters: dict[str, Any] = {"type": "object"}

    def __init__(self, name: str = "echo") -> None:
        self.name = name
        self.description = f"The {name} test tool"
        self.calls: list[dict[str, Any]] = []

    async def execute(self, input: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        self.calls.append(input)
        return ToolOutput.of_text(f"{self.name} ran {len(self.calls)}")


class SlowTool:
    """A local tool that runs until the test releases it (or it is cancelled)."""

    name = "slow"
    description = "A tool that waits for the test"
    parameters: dict[str, Any] = {"type": "object"}

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.release = asyncio.Event()
        self.cancelled = False
        self.on_cancel = lambda: None

    async def execute(self, input: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        self.started.set()
        try:
            await self.release.wait()
        except asyncio.CancelledError:
            self.cancelled = True
            self.on_cancel()
            raise
        return ToolOutput.of_text("slow done")


@dataclass
class Harness:
    rt: Runtime
    provider: ScriptedProvider
    clock: FakeClock
    tools: dict[str, Any]
    drains: list[tuple[str, bool]] = field(default_factory=list)

    @property
    def execution(self):
        return self.rt.execution

    async def session(self) -> str:
        return (await self.rt.sessions.create()).id

    async def admit(self, sid: str, prompt: str, delivery: ev.Delivery = "steer", **kw) -> str:
        return (await self.rt.sessions.admit(sid, PromptInput(text=prompt), delivery=delivery, **kw)).id

    async def wait(self, sid: str) -> None:
        with anyio.fail_after(TIMEOUT):
            await self.rt.execution.wait(sid)

    async def log(self, sid: str) -> list[ev.EventRecord]:
        stream = await self.rt.sessions.log(sid, -1, follow=False)
        return [record async for record in stream]

    async def messages(self, sid: str) -> list[dict[str, Any]]:
        page, _ = await self.rt.sessions.messages(sid, order="asc", limit=200)
        return [m.wire() for m in page]

    async def settled_log(self, sid: str) -> list[ev.EventRecord]:
        """The durable log once idle, after checking that every busy period has exactly one terminal."""
        await self.wait(sid)
        records = await self.log(sid)
        assert_one_terminal_per_execution(records)
        return records


def config(home: Path, *, agent_steps: int | None = None, hooks: dict[str, Any] | None = None) -> dict[str, str]:
    cfg: dict[str, Any] = {
        "model": "local/m",
        "provider": {"local": {
            "npm": "@ai-sdk/openai-compatible",
            "options": {"baseURL": "http://127.0.0.1:9/v1"},  # never dialled: the scripted provider answers
            "models": {"m": {"limit": {"context": 100_000, "output": 4096}, "cost": {"input": 1, "output": 2}}},
        }},
    }
    if agent_steps is not None:
        cfg["agent"] = {"build": {"steps": agent_steps}}
    if hooks is not None:
        cfg["hooks"] = hooks
    cfgdir = home / "config"
    (cfgdir / "opencode").mkdir(parents=True, exist_ok=True)
    (cfgdir / "opencode" / "opencode.json").write_text(json.dumps(cfg))
    # the suite's repositories are its own (tests/conftest.py): their configuration has authority untrusted
    return {"XDG_CONFIG_HOME": str(cfgdir), "HOME": str(home), "XDG_DATA_HOME": str(home / "data"),
            "OCS_TRUST_ALL": "1"}


@asynccontextmanager
async def harness(tmp_path: Path, scripts: list[list[Any]] | None = None, *, tools: list[Any] = (),
                  agent_steps: int | None = None, provider: ScriptedProvider | None = None, asking: bool = False,
                  outputs: ManagedOutputs | None = None, hooks: dict[str, Any] | None = None,
                  plugin_hooks: PluginHooks | None = None):
    """`asking`: a permission the rules `ask` for waits for a reply to `rt.permissions` (else the call fails);
    `outputs`: where oversized tool outputs are kept (none by default: previews only); `hooks`: the user's config's
    `hooks` section (run as the runtime runs them); `plugin_hooks`: the plugins' hooks."""
    home = tmp_path / "home"
    workdir = tmp_path / "work"
    workdir.mkdir(exist_ok=True)
    env = config(home, agent_steps=agent_steps, hooks=hooks)
    provider = provider or ScriptedProvider()
    provider.push(*(scripts or []))
    clock = FakeClock()
    registry = ToolRegistry(outputs=outputs)
    for tool in tools:
        registry.register(tool)
    drains: list[tuple[str, bool]] = []

    def factory(rt: Runtime):
        runner = Runner(RunnerDeps(store=rt.store, env=env, provider_for=lambda _model: provider, tools=registry,
                                   clock=clock, instructions=CheckpointPreparer(rt.store, env),
                                   permissions=rt.permissions if asking else None,
                                   user_hooks=UserHooks(store=rt.store) if hooks is not None else None,
                                   hooks=plugin_hooks))

        async def drain(session_id: str, force: bool) -> None:
            drains.append((session_id, force))
            await runner.drain(session_id, force)

        return drain

    async with Runtime(RuntimeOptions(db_path=tmp_path / "db.sqlite", directory=workdir, env=env,
                                      drain_factory=factory)) as rt:
        yield Harness(rt, provider, clock, {t.name: t for t in tools}, drains)


# --- assertions over the durable log -----------------------------------------------------------------


def assert_one_terminal_per_execution(records: list[ev.EventRecord]) -> None:
    """Each `session.execution.started` is followed by exactly one terminal before the next start."""
    open_period = False
    started = terminals = 0
    for record in records:
        if record.type == "session.execution.started":
            assert not open_period, "an execution started before the previous one settled"
            open_period = True
            started += 1
        elif record.type in TERMINALS:
            assert open_period, f"{record.type} without a running execution"
            open_period = False
            terminals += 1
    assert not open_period, "the last execution never settled"
    assert started == terminals


def of_type(records: list[ev.EventRecord], type_: str) -> list[dict[str, Any]]:
    return [r.data.wire() for r in records if r.type == type_]


def types(records: list[ev.EventRecord]) -> list[str]:
    return [r.type for r in records]


def index(records: list[ev.EventRecord], type_: str, **match: Any) -> int:
    for i, r in enumerate(records):
        if r.type == type_ and all(r.data.wire().get(k) == v for k, v in match.items()):
            return i
    raise AssertionError(f"no {type_} {match} in {types(records)}")


def user_texts(request: llm.LLMRequest) -> list[str]:
    return [p.text for m in request.messages if isinstance(m, llm.UserMessage) for p in m.parts
            if isinstance(p, llm.TextPart)]


def tool_events(call_id: str, name: str, *, gate: Gate | None = None) -> list[Any]:
    """A tool call script, optionally held at a Gate after the input started streaming."""
    head = [llm.ToolInputStart(call_id, name), llm.ToolInputDelta(call_id, "{}")]
    tail = [llm.ToolInputEnd(call_id), llm.ToolCall(call_id, name, {}), llm.Finish("tool-calls", USAGE)]
    return head + ([gate] if gate else []) + tail


async def reached(gate: Gate) -> None:
    with anyio.fail_after(TIMEOUT):
        await gate.reached.wait()


# --- 1. steer vs queue ------------------------------------------------------------------------------------


async def test_queued_input_waits_for_idle_and_promotes_one_at_a_time(tmp_path):
    gate = Gate()
    echo = EchoTool()
    scripts = [tool_events("c1", "echo", gate=gate), text("after tool"), text("answer q1"), text("answer q2")]
    async with harness(tmp_path, scripts, tools=[echo]) as h:
        sid = await h.session()
        p1 = await h.admit(sid, "p1")
        await reached(gate)
        q1 = await h.admit(sid, "q1", "queue")
        q2 = await h.admit(sid, "q2", "queue")
        gate.open()
        records = await h.settled_log(sid)

        reqs = h.provider.requests
        assert [user_texts(r) for r in reqs] == [["p1"], ["p1"], ["p1", "q1"], ["p1", "q1", "q2"]]
        # the continuation after the tool ran with both queued inputs still pending
        promoted = [d["inputID"] for d in of_type(records, "session.input.promoted")]
        assert promoted == [p1, q1, q2]
        ended = [i for i, r in enumerate(records) if r.type == "session.step.ended"]
        assert len(ended) == 4
        assert ended[1] < index(records, "session.input.promoted", inputID=q1) < ended[2]
        assert ended[2] < index(records, "session.input.promoted", inputID=q2) < ended[3]
        assert len(echo.calls) == 1
        assert await h.rt.sessions.pending(sid) == []
        assert len(of_type(records, "session.execution.started")) == 1


async def test_steers_admitted_mid_step_promote_together_at_next_boundary(tmp_path):
    gate = Gate()
    echo = EchoTool()
    scripts = [tool_events("c1", "echo", gate=gate), text("saw steers"), text("answer q")]
    async with harness(tmp_path, scripts, tools=[echo]) as h:
        sid = await h.session()
        p1 = await h.admit(sid, "p1")
        await reached(gate)
        q = await h.admit(sid, "queued", "queue")  # admitted first, but queued: it waits for idle
        s1 = await h.admit(sid, "steer one")
        s2 = await h.admit(sid, "steer two")
        # still pending while the step is held
        assert [p.id for p in await h.rt.sessions.pending(sid)] == [q, s1, s2]
        gate.open()
        records = await h.settled_log(sid)

        promoted = [(r.seq, r.data.inputID) for r in records if r.type == "session.input.promoted"]
        assert [i for _, i in promoted] == [p1, s1, s2, q]
        # both steers promote in one boundary: adjacent in the log, after step 1's tool settled
        assert promoted[2][0] == promoted[1][0] + 1
        assert index(records, "session.tool.success", callID="c1") < index(records, "session.input.promoted",
                                                                            inputID=s1)
        second = h.provider.requests[1]
        assert user_texts(second) == ["p1", "steer one", "steer two"]
        # the steers follow the settled tool result in the continuation request
        kinds = [type(m).__name__ for m in second.messages]
        assert kinds == ["UserMessage", "AssistantMessage", "ToolResultMessage", "UserMessage", "UserMessage"]
        assert user_texts(h.provider.requests[2]) == ["p1", "steer one", "steer two", "queued"]


# --- 2. step allowance ---------------------------------------------------------------------------------------


async def test_promotion_resets_allowance_and_last_step_disables_tools(tmp_path):
    gate = Gate()
    echo = EchoTool()
    scripts = [
        tool_events("c1", "echo", gate=gate),   # step 1 of 2
        tool_call("c2", "echo", {}),             # steers promoted at this boundary: step 1 of 2 again
        tool_call("c3", "echo", {}),             # step 2 of 2: tools are off, but the model calls one anyway
    ]
    async with harness(tmp_path, scripts, tools=[echo], agent_steps=2) as h:
        sid = await h.session()
        await h.admit(sid, "p1")
        await reached(gate)
        await h.admit(sid, "steer a")
        await h.admit(sid, "steer b")
        gate.open()
        records = await h.settled_log(sid)

        reqs = h.provider.requests
        assert len(reqs) == 3, "the drain ends after the last step"
        assert [r.tool_choice for r in reqs] == ["auto", "auto", "none"]
        assert [len(r.tools) for r in reqs] == [1, 1, 0]
        assert not any(MAX_STEPS_NOTICE in t for r in reqs[:2] for t in user_texts(r))
        last = reqs[2].messages[-1]
        assert isinstance(last, llm.UserMessage) and last.parts[0].text == MAX_STEPS_NOTICE
        assert len(echo.calls) == 2, "the call on the last step never ran"
        failed = of_type(records, "session.tool.failed")
        assert [(f["callID"], f["error"]["type"], f["error"]["message"]) for f in failed] == [
            ("c3", "tool.execution", TOOLS_DISABLED)]
        assert index(records, "session.tool.called", callID="c3") < index(records, "session.tool.failed",
                                                                          callID="c3")
        assert types(records)[-1] == "session.execution.succeeded"
        tool_parts = [p for m in await h.messages(sid) if m["type"] == "assistant" for p in m["content"]
                      if p["type"] == "tool"]
        assert [p["state"]["status"] for p in tool_parts] == ["completed", "completed", "error"]


async def test_allowance_without_new_input_ends_after_the_limit(tmp_path):
    echo = EchoTool()
    scripts = [tool_call("c1", "echo", {}), text("summary only")]
    async with harness(tmp_path, scripts, tools=[echo], agent_steps=2) as h:
        sid = await h.session()
        await h.admit(sid, "p1")
        records = await h.settled_log(sid)
        assert [r.tool_choice for r in h.provider.requests] == ["auto", "none"]
        assert h.provider.requests[1].tools == []
        assert of_type(records, "session.step.ended")[-1]["finish"] == "stop"
        assert types(records)[-1] == "session.execution.succeeded"


# --- 3. interruption ----------------------------------------------------------------------------------------


async def test_interrupt_mid_stream_keeps_partial_text_and_pending_input(tmp_path):
    gate = Gate()
    script = [llm.TextStart("t"), llm.TextDelta("t", "hel"), gate, llm.TextDelta("t", "lo"), llm.TextEnd("t"),
              llm.Finish("stop", USAGE)]
    async with harness(tmp_path, [script]) as h:
        sid = await h.session()
        await h.admit(sid, "p1")
        await reached(gate)
        queued = await h.admit(sid, "later", "queue")
        assert h.execution.active() == [sid]
        with anyio.fail_after(TIMEOUT):
            assert await h.execution.interrupt(sid) is True
        records = await h.settled_log(sid)

        assert of_type(records, "session.text.ended")[0]["text"] == "hel"
        failed = of_type(records, "session.step.failed")
        assert len(failed) == 1 and failed[0]["error"]["type"] == "aborted"
        assert of_type(records, "session.execution.interrupted") == [{"sessionID": sid, "reason": "user"}]
        assert types(records)[-1] == "session.execution.interrupted"
        assert [p.id for p in await h.rt.sessions.pending(sid)] == [queued]
        assistant = [m for m in await h.messages(sid) if m["type"] == "assistant"][0]
        assert assistant["content"][0]["text"] == "hel" and assistant["error"]["type"] == "aborted"
        assert h.execution.active() == [] and len(h.drains) == 1, "the interrupted wake started nothing more"
        # interrupting an idle session is a no-op
        assert await h.execution.interrupt(sid) is False
        assert len(await h.log(sid)) == len(records)


async def test_interrupt_mid_tool_fails_unsettled_calls_as_aborted(tmp_path):
    slow, echo = SlowTool(), EchoTool()
    script = [llm.ToolCall("c1", "echo", {}), llm.ToolCall("c2", "slow", {}), llm.Finish("tool-calls", USAGE)]
    async with harness(tmp_path, [script], tools=[slow, echo]) as h:
        sid = await h.session()
        await h.admit(sid, "p1")
        with anyio.fail_after(TIMEOUT):
            await slow.started.wait()
        queued = await h.admit(sid, "queued", "queue")
        with anyio.fail_after(TIMEOUT):
            assert await h.execution.interrupt(sid) is True
        records = await h.settled_log(sid)

        assert slow.cancelled
        assert [d["callID"] for d in of_type(records, "session.tool.called")] == ["c1", "c2"]
        assert [d["callID"] for d in of_type(records, "session.tool.success")] == ["c1"]
        failed = of_type(records, "session.tool.failed")
        assert [(d["callID"], d["error"]["type"]) for d in failed] == [("c2", "aborted")]
        assert index(records, "session.tool.failed", callID="c2") < index(records, "session.step.failed")
        assert of_type(records, "session.step.failed")[0]["error"]["type"] == "aborted"
        assert of_type(records, "session.execution.interrupted") == [{"sessionID": sid, "reason": "user"}]
        assert [p.id for p in await h.rt.sessions.pending(sid)] == [queued]
        assert len(h.provider.requests) == 1
        assert await h.execution.interrupt(sid) is False


async def test_interrupt_idle_session_is_a_noop(tmp_path):
    async with harness(tmp_path) as h:
        sid = await h.session()
        assert await h.execution.interrupt(sid) is False
        await h.admit(sid, "parked", resume=False)
        assert await h.execution.interrupt(sid) is False
        records = await h.log(sid)
        assert types(records) == ["session.input.admitted"]
        assert_one_terminal_per_execution(records)


async def test_interrupt_before_the_drain_first_runs_releases_the_session(tmp_path):
    # the wake creates the execution task; interrupting before it ever ran must not hang or wedge the session
    async with harness(tmp_path, [text("later")]) as h:
        sid = await h.session()
        p1 = await h.admit(sid, "p1")
        with anyio.fail_after(TIMEOUT):
            assert await h.execution.interrupt(sid) is True
        await h.wait(sid)
        assert h.execution.active() == [] and h.provider.requests == []
        assert [p.id for p in await h.rt.sessions.pending(sid)] == [p1], "pending input survives"
        assert_one_terminal_per_execution(await h.log(sid))
        # the session is not wedged: the next wake drains normally
        h.execution.wake(sid)
        records = await h.settled_log(sid)
        assert types(records)[-1] == "session.execution.succeeded"
        assert len(h.provider.requests) == 1


async def test_wake_during_interrupt_cleanup_starts_a_successor(tmp_path):
    slow = SlowTool()
    scripts = [[llm.ToolCall("c1", "slow", {}), llm.Finish("tool-calls", USAGE)], text("successor answer")]
    async with harness(tmp_path, scripts, tools=[slow]) as h:
        sid = await h.session()
        await h.admit(sid, "p1")
        with anyio.fail_after(TIMEOUT):
            await slow.started.wait()
        q = await h.admit(sid, "follow-up", "queue", resume=False)
        slow.on_cancel = lambda: h.execution.wake(sid)  # a wake while the interrupt cleans up
        with anyio.fail_after(TIMEOUT):
            assert await h.execution.interrupt(sid) is True
        records = await h.settled_log(sid)

        periods = [r.type for r in records if r.type.startswith("session.execution.")]
        assert periods == ["session.execution.started", "session.execution.interrupted",
                           "session.execution.started", "session.execution.succeeded"]
        assert of_type(records, "session.tool.failed")[0]["error"]["type"] == "aborted"
        assert index(records, "session.execution.interrupted") < index(records, "session.input.promoted",
                                                                         inputID=q)
        assert user_texts(h.provider.requests[1]) == ["p1", "follow-up"]


async def test_interrupt_during_retry_wait(tmp_path):
    async with harness(tmp_path, [[TransportError("down")]]) as h:
        h.clock.hold = asyncio.Event()
        sid = await h.session()
        await h.admit(sid, "p1")
        with anyio.fail_after(TIMEOUT):
            await h.clock.sleeping.wait()
            assert await h.execution.interrupt(sid) is True
        records = await h.settled_log(sid)
        assert [d["attempt"] for d in of_type(records, "session.retry.scheduled")] == [2]
        # the assistant that waited for its retry is closed: no Step is left without its terminal event
        assert [d["error"]["type"] for d in of_type(records, "session.step.failed")] == ["aborted"]
        assert types(records)[-1] == "session.execution.interrupted"
        assert len(h.provider.requests) == 1
        assistant = [m for m in await h.messages(sid) if m["type"] == "assistant"]
        assert len(assistant) == 1 and "retry" not in assistant[0] and "completed" in assistant[0]["time"]


async def test_provider_defect_still_settles_tools_and_the_step(tmp_path):
    slow = SlowTool()

    class BrokenAdapter(ScriptedProvider):
        async def stream(self, request):
            async for item in super().stream(request):
                yield item
            with anyio.fail_after(TIMEOUT):
                await slow.started.wait()
            raise RuntimeError("adapter bug")

    script = [llm.TextStart("t"), llm.TextDelta("t", "let me look"), llm.ToolCall("c1", "slow", {})]
    async with harness(tmp_path, [script], tools=[slow], provider=BrokenAdapter()) as h:
        sid = await h.session()
        await h.admit(sid, "p1")
        records = await h.settled_log(sid)

        assert slow.cancelled, "the local tool does not outlive its step"
        assert of_type(records, "session.tool.failed")[0]["error"]["type"] == "aborted"
        step_failed = of_type(records, "session.step.failed")
        assert len(step_failed) == 1 and step_failed[0]["error"] == {"type": "unknown",
                                                                     "message": "RuntimeError: adapter bug"}
        assert of_type(records, "session.execution.failed")[0]["error"]["type"] == "unknown"
        assistant = [m for m in await h.messages(sid) if m["type"] == "assistant"][0]
        assert assistant["content"][0]["text"] == "let me look"
        assert assistant["content"][1]["state"]["status"] == "error" and "completed" in assistant["time"]


class PeerTool:
    """Waits until its peer has started too (so it only finishes when both run concurrently) and records
    what the durable store said about its own call when it began."""

    parameters: dict[str, Any] = {"type": "object"}

    def __init__(self, name: str, runtime_of) -> None:
        self.name = name
        self.description = f"peer {name}"
        self.started = asyncio.Event()
        self.peer: PeerTool | None = None
        self.runtime_of = runtime_of
        self.status_at_start: str | None = None

    async def execute(self, input: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        message = await self.runtime_of().sessions.message(ctx.session_id, ctx.message_id)
        part = next(p for p in message.content if p.type == "tool" and p.id == ctx.call_id)
        self.status_at_start = part.state.status
        self.started.set()
        with anyio.fail_after(TIMEOUT):
            await self.peer.started.wait()
        return ToolOutput.of_text(f"{self.name} saw its peer")


async def test_local_tools_are_durable_before_running_and_run_concurrently(tmp_path):
    holder: dict[str, Runtime] = {}
    a, b = PeerTool("a", lambda: holder["rt"]), PeerTool("b", lambda: holder["rt"])
    a.peer, b.peer = b, a
    script = [llm.ToolCall("ca", "a", {}), llm.ToolCall("cb", "b", {}), llm.Finish("tool-calls", USAGE)]
    async with harness(tmp_path, [script, text("both done")], tools=[a, b]) as h:
        holder["rt"] = h.rt
        sid = await h.session()
        await h.admit(sid, "p1")
        records = await h.settled_log(sid)

        assert a.status_at_start == b.status_at_start == "running", "tool.called is durable before execution"
        assert sorted(d["callID"] for d in of_type(records, "session.tool.success")) == ["ca", "cb"]
        step_ended = index(records, "session.step.ended")
        assert all(index(records, "session.tool.success", callID=c) < step_ended for c in ("ca", "cb"))
        results = [m for m in h.provider.requests[1].messages if isinstance(m, llm.ToolResultMessage)]
        assert [(r.call_id, r.text) for r in results] == [("ca", "a saw its peer"), ("cb", "b saw its peer")]


class FullDisk(ManagedOutputs):
    """Where oversized outputs are kept, on a disk that is full: keeping one raises ENOSPC."""

    def keep(self, text: str) -> Path | None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self.root))


class BigTool(EchoTool):
    """A tool whose output is over the Model Tool Output bounds, so bounding it keeps the whole of it."""

    async def execute(self, input: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        self.calls.append(input)
        return ToolOutput.of_text("line\n" * 10_000)


async def test_a_failure_recording_a_tools_output_settles_the_call_with_its_cause(tmp_path, caplog):
    big = BigTool("big")
    script = [llm.ToolCall("c1", "big", {}), llm.Finish("tool-calls", USAGE)]
    async with harness(tmp_path, [script, text("seen")], tools=[big], outputs=FullDisk(tmp_path / "out")) as h:
        sid = await h.session()
        await h.admit(sid, "p1")
        records = await h.settled_log(sid)
    assert len(big.calls) == 1  # the tool ran, once
    [failed] = of_type(records, "session.tool.failed")
    assert failed["error"]["type"] == "tool.execution"
    assert "No space left on device" in failed["error"]["message"] and "big" in failed["error"]["message"]
    assert "did not return a result" not in failed["error"]["message"]
    results = [m for m in h.provider.requests[1].messages if isinstance(m, llm.ToolResultMessage)]
    assert [r.call_id for r in results] == ["c1"] and "No space left on device" in results[0].text
    assert "its output could not be recorded" in caplog.text and "big" in caplog.text  # the operator is told


# --- 4. coalesced wakes --------------------------------------------------------------------------------------


async def test_many_admits_while_a_step_is_held_coalesce_into_one_follow_up(tmp_path):
    gate = Gate()
    scripts = [[gate, *text("first")], text("second")]
    async with harness(tmp_path, scripts) as h:
        sid = await h.session()
        await h.admit(sid, "p0")
        await reached(gate)
        for i in range(5):
            await h.admit(sid, f"s{i}")
        gate.open()
        records = await h.settled_log(sid)

        assert h.drains == [(sid, False), (sid, False)], "one drain, then exactly one coalesced follow-up"
        assert len(of_type(records, "session.execution.started")) == 1
        assert len(h.provider.requests) == 2
        assert user_texts(h.provider.requests[1]) == ["p0", "s0", "s1", "s2", "s3", "s4"]


# --- 5. sessions run concurrently -----------------------------------------------------------------------------


async def test_two_sessions_drain_in_parallel(tmp_path):
    g1, g2 = Gate(), Gate()
    scripts = [[g1, *text("one")], [g2, *text("two")]]
    async with harness(tmp_path, scripts) as h:
        a, b = await h.session(), await h.session()
        await h.admit(a, "to a")
        await h.admit(b, "to b")
        # both are held inside their provider streams at the same time
        await reached(g1)
        await reached(g2)
        assert sorted(h.execution.active()) == sorted([a, b])
        g2.open()
        g1.open()
        for sid in (a, b):
            records = await h.settled_log(sid)
            assert types(records)[-1] == "session.execution.succeeded"
            assistant = [m for m in await h.messages(sid) if m["type"] == "assistant"]
            assert len(assistant) == 1 and assistant[0]["finish"] == "stop"
        answers = {m["content"][0]["text"] for sid in (a, b) for m in await h.messages(sid)
                   if m["type"] == "assistant"}
        assert answers == {"one", "two"}


# --- 6. retries ------------------------------------------------------------------------------------------------


async def test_retry_schedule_exhausts_after_four_retries_with_the_last_error(tmp_path):
    scripts = [
        [RateLimitError("slow down", status=429, retry_after_ms=500)],   # shorter than the backoff
        [ProviderInternalError("oops", status=500)],
        [TransportError("reset")],
        [RateLimitError("slow down more", status=429, retry_after_ms=30_000)],  # longer: stretches the wait
        [TransportError("reset again")],
    ]
    async with harness(tmp_path, scripts) as h:
        sid = await h.session()
        await h.admit(sid, "p1")
        records = await h.settled_log(sid)

        assert h.clock.sleeps == [2000, 4000, 8000, 30_000]
        scheduled = of_type(records, "session.retry.scheduled")
        assert [d["attempt"] for d in scheduled] == [2, 3, 4, 5]
        assert [d["at"] for d in scheduled] == [NOW + 2000, NOW + 4000, NOW + 8000, NOW + 30_000]
        assert [d["error"]["type"] for d in scheduled] == [
            "provider.rate-limit", "provider.internal", "provider.transport", "provider.rate-limit"]
        assistant_id = scheduled[0]["assistantMessageID"]
        assert {d["assistantMessageID"] for d in scheduled} == {assistant_id}
        assert len(h.provider.requests) == 5
        # every attempt is a Step on the same assistant message; only the last one ends it, with its own error
        step_types = [r.type for r in records if r.type.startswith(("session.step.", "session.retry."))]
        assert step_types == ["session.step.started", "session.retry.scheduled"] * 4 + [
            "session.step.started", "session.step.failed"]
        assert {d["assistantMessageID"] for d in of_type(records, "session.step.started")} == {assistant_id}
        last = {"type": "provider.transport", "message": "reset again"}
        assert of_type(records, "session.step.failed")[0]["error"] == last
        failed = of_type(records, "session.execution.failed")
        assert len(failed) == 1 and failed[0]["error"] == last
        assert types(records)[-1] == "session.execution.failed"
        # input was promoted once, not again on every attempt
        assert len(of_type(records, "session.input.promoted")) == 1
        assert all(user_texts(r) == ["p1"] for r in h.provider.requests)
        assistant = [m for m in await h.messages(sid) if m["type"] == "assistant"]
        assert len(assistant) == 1 and assistant[0]["id"] == assistant_id
        assert assistant[0]["finish"] == "error" and assistant[0]["error"] == last and "retry" not in assistant[0]


async def test_a_retry_is_visible_on_its_assistant_until_the_next_attempt_starts(tmp_path):
    async with harness(tmp_path, [[RateLimitError("busy", status=429)], text("later")]) as h:
        h.clock.hold = asyncio.Event()
        sid = await h.session()
        await h.admit(sid, "p1")
        with anyio.fail_after(TIMEOUT):
            await h.clock.sleeping.wait()
        waiting = [m for m in await h.messages(sid) if m["type"] == "assistant"]
        assert len(waiting) == 1 and "completed" not in waiting[0]["time"]
        assert waiting[0]["retry"] == {"attempt": 2, "at": NOW + 2000,
                                       "error": {"type": "provider.rate-limit", "message": "busy", "status": 429}}
        h.clock.hold.set()
        await h.settled_log(sid)
        done = [m for m in await h.messages(sid) if m["type"] == "assistant"]
        assert [m["id"] for m in done] == [waiting[0]["id"]]
        assert "retry" not in done[0] and done[0]["finish"] == "stop" and done[0]["content"][0]["text"] == "later"


async def test_a_provider_retry_after_stretches_only_rate_limits_and_internal_errors(tmp_path):
    scripts = [[TransportError("reset", retry_after_ms=60_000)], [ProviderInternalError("oops", retry_after_ms=9000)],
               text("ok")]
    async with harness(tmp_path, scripts) as h:
        sid = await h.session()
        await h.admit(sid, "p1")
        await h.settled_log(sid)
        assert h.clock.sleeps == [2000, 9000]


async def test_a_bare_finish_is_no_output_evidence(tmp_path):
    async with harness(tmp_path, [[llm.Finish("stop", USAGE), TransportError("cut")], text("second try")]) as h:
        sid = await h.session()
        await h.admit(sid, "p1")
        records = await h.settled_log(sid)
        assert len(of_type(records, "session.retry.scheduled")) == 1 and len(h.provider.requests) == 2
        assert types(records)[-1] == "session.execution.succeeded"


async def test_default_backoff_doubles_from_two_seconds(tmp_path):
    scripts = [[TransportError("t")] for _ in range(5)]
    async with harness(tmp_path, scripts) as h:
        sid = await h.session()
        await h.admit(sid, "p1")
        records = await h.settled_log(sid)
        assert h.clock.sleeps == [2000, 4000, 8000, 16000]
        assert [d["at"] - NOW for d in of_type(records, "session.retry.scheduled")] == [2000, 4000, 8000, 16000]
        assert of_type(records, "session.execution.failed")[0]["error"]["type"] == "provider.transport"


def test_the_retry_base_delay_comes_from_the_environment_when_it_is_a_usable_number():
    assert base_delay_ms({}) == 2000
    assert base_delay_ms({"OCS_RETRY_BASE_DELAY_MS": "25"}) == 25
    assert [base_delay_ms({"OCS_RETRY_BASE_DELAY_MS": bad}) for bad in ("-1", "soon", "nan", "inf")] == [2000] * 4
    assert retry_delay_ms(3, TransportError("t"), base_ms=25) == 100


async def test_retry_then_success_reuses_the_assistant_message(tmp_path):
    scripts = [[RateLimitError("busy", retry_after_ms=100)], text("finally")]
    async with harness(tmp_path, scripts) as h:
        sid = await h.session()
        await h.admit(sid, "p1")
        records = await h.settled_log(sid)

        scheduled = of_type(records, "session.retry.scheduled")
        assert len(scheduled) == 1 and scheduled[0]["attempt"] == 2 and scheduled[0]["at"] == NOW + 2000
        started = of_type(records, "session.step.started")
        assert [d["assistantMessageID"] for d in started] == [scheduled[0]["assistantMessageID"]] * 2
        assert of_type(records, "session.step.failed") == []
        assert types(records)[-1] == "session.execution.succeeded"
        assistant = [m for m in await h.messages(sid) if m["type"] == "assistant"]
        assert len(assistant) == 1 and assistant[0]["id"] == scheduled[0]["assistantMessageID"]
        assert assistant[0]["content"][0]["text"] == "finally" and "retry" not in assistant[0]
        assert "error" not in assistant[0]


async def test_no_retry_after_output(tmp_path):
    script = [llm.TextStart("t"), llm.TextDelta("t", "partial "), TransportError("connection reset")]
    async with harness(tmp_path, [script]) as h:
        sid = await h.session()
        await h.admit(sid, "p1")
        records = await h.settled_log(sid)

        assert h.clock.sleeps == [] and of_type(records, "session.retry.scheduled") == []
        assert len(h.provider.requests) == 1
        step_failed = of_type(records, "session.step.failed")
        assert len(step_failed) == 1 and step_failed[0]["error"]["type"] == "provider.transport"
        assert of_type(records, "session.execution.failed")[0]["error"]["type"] == "provider.transport"
        assistant = [m for m in await h.messages(sid) if m["type"] == "assistant"][0]
        assert assistant["content"][0]["text"] == "partial " and assistant["error"]["type"] == "provider.transport"


async def test_non_retryable_error_fails_at_once(tmp_path):
    async with harness(tmp_path, [[AuthenticationError("bad key", status=401)]]) as h:
        sid = await h.session()
        await h.admit(sid, "p1")
        records = await h.settled_log(sid)

        assert h.clock.sleeps == [] and of_type(records, "session.retry.scheduled") == []
        assert len(h.provider.requests) == 1
        error = {"type": "provider.auth", "message": "bad key", "status": 401}
        failed = of_type(records, "session.execution.failed")
        assert failed == [{"sessionID": sid, "error": error}]
        # the failed Step is a Step in history: its assistant message says what went wrong
        assert [r.type for r in records if r.type.startswith("session.step.")] == [
            "session.step.started", "session.step.failed"]
        assistant = [m for m in await h.messages(sid) if m["type"] == "assistant"]
        assert len(assistant) == 1 and assistant[0]["finish"] == "error" and assistant[0]["error"] == error
        assert assistant[0]["content"] == [] and "completed" in assistant[0]["time"]


async def test_retry_consumes_the_step_allowance(tmp_path):
    # steps: 2 — the first attempt is step 1, its retry is step 2 (the last step: no tools), and a second
    # failure there is not retried because no allowance is left
    scripts = [[TransportError("t1")], [TransportError("t2")]]
    async with harness(tmp_path, scripts, tools=[EchoTool()], agent_steps=2) as h:
        sid = await h.session()
        await h.admit(sid, "p1")
        records = await h.settled_log(sid)
        assert [r.tool_choice for r in h.provider.requests] == ["auto", "none"]
        assert [d["attempt"] for d in of_type(records, "session.retry.scheduled")] == [2]
        assert of_type(records, "session.execution.failed")[0]["error"]["message"] == "t2"


# --- 7. content filter ---------------------------------------------------------------------------------------------


async def test_content_filter_fails_the_step_and_keeps_partial_text(tmp_path):
    script = [llm.TextStart("t"), llm.TextDelta("t", "Here is how"), llm.TextEnd("t"),
              llm.Finish("content-filter", USAGE)]
    async with harness(tmp_path, [script]) as h:
        sid = await h.session()
        await h.admit(sid, "p1")
        records = await h.settled_log(sid)

        failed = of_type(records, "session.step.failed")
        assert len(failed) == 1 and failed[0]["error"]["type"] == "provider.content-filter"
        assert of_type(records, "session.step.ended") == []
        assert of_type(records, "session.execution.failed")[0]["error"]["type"] == "provider.content-filter"
        assert h.clock.sleeps == []
        assistant = [m for m in await h.messages(sid) if m["type"] == "assistant"][0]
        assert assistant["content"][0]["text"] == "Here is how"
        assert assistant["finish"] == "error" and assistant["error"]["type"] == "provider.content-filter"


# --- 8. orphan reconciliation ------------------------------------------------------------------------------------


async def test_orphaned_tool_calls_fail_stale_and_never_rerun(tmp_path):
    counter = EchoTool("counter")
    async with harness(tmp_path, [text("carrying on")], tools=[counter]) as h:
        sid = await h.session()
        crashed = "msg_crashed_assistant_0001"
        ids = {"sessionID": sid, "assistantMessageID": crashed}

        def crash(tx):  # what a process that died mid-step leaves behind
            tx.append(ev.StepStarted(**ids, agent="build", model=ModelRef(id="m", providerID="local")))
            tx.append(ev.ToolInputStarted(**ids, callID="c1", name="counter"))
            tx.append(ev.ToolCalled(**ids, callID="c1", name="counter", input={"n": 1}))
            tx.append(ev.ToolInputStarted(**ids, callID="c2", name="counter"))  # still streaming its input

        await h.rt.store.write(crash)
        before = len(await h.log(sid))
        p1 = await h.admit(sid, "continue please")
        records = await h.settled_log(sid)
        fresh = records[before:]

        stale = of_type(fresh, "session.tool.failed")
        assert [(d["callID"], d["assistantMessageID"], d["error"]["type"]) for d in stale] == [
            ("c1", crashed, "tool.stale"), ("c2", crashed, "tool.stale")]
        assert stale[0]["error"]["message"] == LOST_CALL.format(name="counter")  # it may or may not have run
        assert stale[1]["error"]["message"] == LOST_INPUT.format(name="counter")  # it never ran
        assert of_type(fresh, "session.step.failed")[0]["error"]["type"] == "host.lost"
        assert index(fresh, "session.tool.failed", callID="c2") < index(fresh, "session.input.promoted",
                                                                        inputID=p1)
        assert counter.calls == [], "side effects are never replayed"
        assert types(fresh)[-1] == "session.execution.succeeded"
        messages = await h.messages(sid)
        old = next(m for m in messages if m["id"] == crashed)
        assert [p["state"]["status"] for p in old["content"]] == ["error", "error"]
        assert "completed" in old["time"]
        new = [m for m in messages if m["type"] == "assistant" and m["id"] != crashed]
        assert len(new) == 1 and new[0]["content"][0]["text"] == "carrying on"
        # the model sees the failed call paired with its error result
        request = h.provider.requests[0]
        results = [m for m in request.messages if isinstance(m, llm.ToolResultMessage)]
        assert [(r.call_id, r.is_error) for r in results] == [("c1", True), ("c2", True)]


async def _lost_mid_calls(h, sid: str, crashed: str, calls: list[tuple[str, str, int]]) -> None:
    """What a host lost mid-Step leaves: the Step `crashed` started, and each (call ID, tool, n) durable and running."""
    ids = {"sessionID": sid, "assistantMessageID": crashed}

    def crash(tx):
        tx.append(ev.StepStarted(**ids, agent="build", model=ModelRef(id="m", providerID="local")))
        for call_id, name, n in calls:
            tx.append(ev.ToolCalled(**ids, callID=call_id, name=name, input={"n": n}))

    await h.rt.store.write(crash)


async def test_an_idempotent_orphan_runs_again_and_its_result_is_recorded(tmp_path):
    again, once = EchoTool("again"), EchoTool("once")
    again.idempotent = True  # type: ignore[attr-defined]
    async with harness(tmp_path, [text("carrying on")], tools=[again, once]) as h:
        sid = await h.session()
        crashed = "msg_crashed_assistant_0002"
        await _lost_mid_calls(h, sid, crashed, [("c1", "again", 1), ("c2", "once", 2)])
        before = len(await h.log(sid))
        h.execution.wake(sid, force=True)  # what a continuation does: nothing pending, history awaits a reply
        records = (await h.settled_log(sid))[before:]
        assert again.calls == [{"n": 1}] and once.calls == []
        success = of_type(records, "session.tool.success")
        assert [(d["callID"], d["assistantMessageID"]) for d in success] == [("c1", crashed)]
        assert [d["callID"] for d in of_type(records, "session.tool.failed")] == ["c2"]
        assert types(records)[-1] == "session.execution.succeeded"
        # one new Step over durable history: it reads the re-run's result and the other call's failure
        results = [m for m in h.provider.requests[0].messages if isinstance(m, llm.ToolResultMessage)]
        assert [(r.call_id, r.is_error, r.text) for r in results] == [
            ("c1", False, "again ran 1"), ("c2", True, LOST_CALL.format(name="once"))]
        started = [d["assistantMessageID"] for d in of_type(records, "session.step.started")]
        assert len(started) == 1 and started[0] != crashed


# A PreToolUse hook on the `again` tool: refuses n == 1, rewrites n == 2 to n == 20 (and allows it)
VETO_OR_REWRITE = r"""
import json, sys
event = json.load(sys.stdin)
n = event["tool_input"].get("n")
if n == 1:
    print("not again: the hook says no", file=sys.stderr)
    sys.exit(2)
if n == 2:
    print(json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow",
                                             "updatedInput": {"n": 20}}}))
"""


async def test_an_orphan_run_again_goes_through_the_pre_tool_use_and_plugin_hooks_as_a_first_run_does(tmp_path):
    # item 6 of "safe by default, round four": a re-run is vetoed (by the user's hook or a plugin's), or runs with the
    # input a hook rewrote, and what it returns passes the plugins' after-tool-result hooks as a first run's does
    hook = tmp_path / "hook.py"
    hook.write_text(VETO_OR_REWRITE)
    command = shlex.join([sys.executable, str(hook)])
    hooks = {"PreToolUse": [{"matcher": "again", "hooks": [{"type": "command", "command": command}]}]}
    again = EchoTool("again")
    again.idempotent = True  # type: ignore[attr-defined]

    async def plugin_guard(call: ToolCallRequest) -> ToolVerdict | None:
        return ToolVerdict("deny", "the plugin says no") if call.input.get("n") == 3 else None

    async def plugin_checked(result: ToolResult) -> ToolOutput:
        return ToolOutput.of_text(result.output.text() + f" (checked {result.input})")

    plugins = PluginHooks(before_tool=[Hooked("guard", plugin_guard)],
                          after_tool_result=[Hooked("check", plugin_checked)])
    async with harness(tmp_path, [text("carrying on")], tools=[again], hooks=hooks, plugin_hooks=plugins) as h:
        sid = await h.session()
        crashed = "msg_crashed_assistant_0003"
        await _lost_mid_calls(h, sid, crashed, [("c1", "again", 1), ("c2", "again", 2), ("c3", "again", 3)])
        before = len(await h.log(sid))
        h.execution.wake(sid, force=True)
        records = (await h.settled_log(sid))[before:]
        assert again.calls == [{"n": 20}], "the vetoed calls never ran; the other ran as the hook rewrote it"
        failed = {d["callID"]: d["error"] for d in of_type(records, "session.tool.failed")}
        assert sorted(failed) == ["c1", "c3"] and {e["type"] for e in failed.values()} == {"hook.blocked"}, failed
        assert "the hook says no" in failed["c1"]["message"]
        assert failed["c3"]["message"] == "the plugin says no"
        assert [d["callID"] for d in of_type(records, "session.tool.success")] == ["c2"]
        results = {r.call_id: (r.is_error, r.text) for r in h.provider.requests[0].messages
                   if isinstance(r, llm.ToolResultMessage)}
        assert results["c2"] == (False, "again ran 1 (checked {'n': 20})") and results["c1"][0] is True


# --- 9. models ----------------------------------------------------------------------------------------------------


async def test_a_model_that_became_unknown_fails_the_step_before_any_provider_call(tmp_path):
    async with harness(tmp_path, [text("unused")]) as h:
        sid = await h.session()
        await h.rt.sessions.switch_model(sid, ModelRef(id="m", providerID="local"))
        cfg_file = tmp_path / "home" / "config" / "opencode" / "opencode.json"
        cfg = json.loads(cfg_file.read_text())
        cfg["provider"]["local"]["models"] = {"other": {}}  # the config is edited: "m" is no longer declared
        cfg_file.write_text(json.dumps(cfg))
        await h.admit(sid, "p1")
        records = await h.settled_log(sid)

        assert h.provider.requests == []
        error = of_type(records, "session.step.failed")[0]["error"]
        assert error["type"] == "model.not-found" and "local/m" in error["message"]
        assert of_type(records, "session.execution.failed")[0]["error"] == error
        assistant = [m for m in await h.messages(sid) if m["type"] == "assistant"]
        assert len(assistant) == 1 and assistant[0]["error"] == error and assistant[0]["finish"] == "error"
        assert assistant[0]["model"] == {"id": "m", "providerID": "local"}
        h.provider.scripts.clear()


async def test_provider_text_json_cannot_carry_is_stored_replaced(tmp_path):
    echo = EchoTool()
    script = [llm.TextStart("t"), llm.TextDelta("t", "bad \ud800 text"), llm.TextEnd("t"),
              llm.ToolCall("c1", "echo", {"n": math.nan, "s": "\udfff"}), llm.Finish("tool-calls", USAGE)]
    async with harness(tmp_path, [script, text("ok")], tools=[echo]) as h:
        sid = await h.session()
        await h.admit(sid, "p1")
        records = await h.settled_log(sid)
        assert types(records)[-1] == "session.execution.succeeded"
        assert of_type(records, "session.text.ended")[0]["text"] == "bad \ufffd text"
        assistant = [m for m in await h.messages(sid) if m["type"] == "assistant"][0]
        assert assistant["content"][0]["text"] == "bad \ufffd text"
        assert assistant["content"][1]["state"]["input"] == {"n": None, "s": "\ufffd"}


# --- 10. usage ----------------------------------------------------------------------------------------------------


async def test_usage_accumulates_across_steps_and_is_published_live(tmp_path):
    echo = EchoTool()
    scripts = [tool_call("c1", "echo", {}), text("done", usage=llm.Usage(100, 50, reasoning=10))]
    async with harness(tmp_path, scripts, tools=[echo]) as h:
        sid = await h.session()
        sub = h.rt.store.live.subscribe()
        await h.admit(sid, "p1")
        records = await h.settled_log(sid)
        expected_cost = ((10 * 1 + 5 * 2) + (100 * 1 + (50 + 10) * 2)) / 1_000_000
        updates, deltas = [], []
        with anyio.fail_after(TIMEOUT):
            while len(updates) < 2:
                for item in await sub.next():
                    if item.aggregate_id != sid:
                        continue
                    if item.type == "session.usage.updated":
                        updates.append(item.data.wire())
                    elif item.type == "session.text.delta":
                        deltas.append(item.data.delta)

        # live-only deltas reached the live stream and are absent from the durable log
        assert deltas == ["done"] and "session.text.delta" not in types(records)

        ended = of_type(records, "session.step.ended")
        assert [d["cost"] for d in ended] == pytest.approx([20 / 1e6, 220 / 1e6])
        assert updates[0]["cost"] == pytest.approx(20 / 1e6)
        assert updates[1]["cost"] == pytest.approx(expected_cost)
        assert updates[1]["tokens"] == {"input": 110, "output": 55, "reasoning": 10,
                                        "cache": {"read": 0, "write": 0}}
        info = await h.rt.sessions.get(sid)
        assert info.cost == pytest.approx(expected_cost)
        assert info.tokens.wire() == updates[1]["tokens"]


class TalkingTool:
    """A tool that reports output while running and finishes only once the test has seen it live."""

    name = "talk"
    description = "A tool with live output"
    parameters: dict[str, Any] = {"type": "object"}

    def __init__(self) -> None:
        self.release = asyncio.Event()

    async def execute(self, input: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        assert ctx.on_output is not None
        ctx.on_output("line 1\n")
        ctx.on_output("line 2\n")
        await self.release.wait()
        return ToolOutput.of_text("line 1\nline 2\n")


async def test_running_tool_output_is_published_live_as_tool_progress_before_it_settles(tmp_path):
    talk = TalkingTool()
    async with harness(tmp_path, [tool_call("c1", "talk", {}), text("done")], tools=[talk]) as h:
        sid = await h.session()
        sub = h.rt.store.live.subscribe()
        await h.admit(sid, "p1")
        progress = []
        with anyio.fail_after(TIMEOUT):
            while len(progress) < 2:
                for item in await sub.next():
                    if item.aggregate_id == sid and item.type == "session.tool.progress":
                        progress.append(item.data.wire())
        # each progress event carries everything so far, replacing the previous one
        assert [p["content"] for p in progress] == [[{"type": "text", "text": "line 1\n"}],
                                                    [{"type": "text", "text": "line 1\nline 2\n"}]]
        assert progress[0]["callID"] == "c1"
        talk.release.set()
        records = await h.settled_log(sid)
        assert "session.tool.progress" not in types(records), "progress is live only"
        assert of_type(records, "session.tool.success")[0]["callID"] == "c1"


async def test_websearch_is_offered_to_the_model_only_when_a_search_backend_is_configured(tmp_path):
    async with harness(tmp_path, [text("one"), text("two")], tools=[EchoTool(), WebSearchTool()]) as h:
        sid = await h.session()
        await h.admit(sid, "p1")
        await h.settled_log(sid)
        assert [t.name for t in h.provider.requests[0].tools] == ["echo"]

        # the user's own config (a project file changed while the runtime runs keeps `websearch` as first read)
        user = tmp_path / "home" / "config" / "opencode" / "opencode.json"
        user.write_text(json.dumps({**json.loads(user.read_text()), "websearch": {"url": "http://127.0.0.1:9/search"}}))
        await h.admit(sid, "p2")
        await h.wait(sid)
        assert [t.name for t in h.provider.requests[1].tools] == ["echo", "websearch"]


class ConfigProbe:
    """A tool that reports the configuration its context carries."""

    name = "probe"
    description = "Reports the configured websearch URL"
    parameters: dict[str, Any] = {"type": "object"}

    async def execute(self, input: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        return ToolOutput.of_text(str(ctx.config.websearch.url if ctx.config.websearch else None))


async def test_a_tool_is_handed_the_configuration_its_step_sampled(tmp_path):
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "opencode.json").write_text('{"websearch": {"url": "http://127.0.0.1:9/one"}}')
    async with harness(tmp_path, [tool_call("c1", "probe", {}), text("done")], tools=[ConfigProbe()]) as h:
        sid = await h.session()
        await h.admit(sid, "p1")
        records = await h.settled_log(sid)
    success = of_type(records, "session.tool.success")
    assert [c["text"] for c in success[0]["content"]] == ["http://127.0.0.1:9/one"]


async def test_interrupting_a_session_kills_the_whole_process_group_of_its_bash_call(tmp_path):
    pidfile = tmp_path / "work" / "child.pid"  # in the Location: writing it needs no asking
    command = f"sleep 300 & echo $! > {pidfile}; wait"
    script = [llm.ToolCall("c1", "bash", {"command": command}), llm.Finish("tool-calls", USAGE)]
    async with harness(tmp_path, [script], tools=[BashTool()]) as h:
        sid = await h.session()
        await h.admit(sid, "p1")
        with anyio.fail_after(TIMEOUT):
            while not (pidfile.exists() and pidfile.read_text().strip()):
                await anyio.sleep(0.02)  # polling for the file the command writes: a condition, not a delay
        child = int(pidfile.read_text())
        with anyio.fail_after(TIMEOUT):
            assert await h.execution.interrupt(sid) is True
        records = await h.settled_log(sid)
        failed = of_type(records, "session.tool.failed")
        assert [(d["callID"], d["error"]["type"]) for d in failed] == [("c1", "aborted")]
        with anyio.fail_after(TIMEOUT):
            while process_alive(child):
                await anyio.sleep(0.02)


# --- 11. refusals ---------------------------------------------------------------------------------------------------


class ReachTool:
    """A tool that reaches the directory it is given (outside the Location, that asks first), and counts its runs."""

    name = "reach"
    description = "Reaches a directory"
    parameters: dict[str, Any] = {"type": "object"}

    def __init__(self) -> None:
        self.ran: list[str] = []

    async def execute(self, input: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        await ctx.locate(input["path"])
        self.ran.append(input["path"])
        return ToolOutput.of_text("reached")


async def asked(sub: Any, sid: str, count: int) -> list[Any]:
    """The next `count` permission requests of the session, as they are published live."""
    found: list[Any] = []
    with anyio.fail_after(TIMEOUT):
        while len(found) < count:
            found += [item.data for item in await sub.next()
                      if item.aggregate_id == sid and item.type == "permission.v2.asked"]
    return found


def refusal_scripts(tmp_path: Path, gate: Gate) -> list[Any]:
    """Two calls that ask to leave the Location, then (once the test opens the gate) a call that needs nothing."""
    first = [llm.ToolCall("c1", "reach", {"path": str(tmp_path / "a")}),
             llm.ToolCall("c2", "reach", {"path": str(tmp_path / "b")}),
             gate, llm.ToolCall("c3", "echo", {}), llm.Finish("tool-calls", USAGE)]
    return [first, text("understood")]


async def test_a_refusal_with_feedback_fails_the_steps_calls_that_have_not_started(tmp_path):
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
    gate, reach, echo = Gate(), ReachTool(), EchoTool()
    async with harness(tmp_path, refusal_scripts(tmp_path, gate), tools=[reach, echo], asking=True) as h:
        sid = await h.session()
        sub = h.rt.store.live.subscribe()
        await h.admit(sid, "p1")
        first, second = await asked(sub, sid, 2)
        refused = first if first.source.callID == "c1" else second
        await h.rt.permissions.reply(sid, refused.id, "reject", "use the project's copy instead")
        # the other waiting call was answered with the same feedback: nobody has to refuse it again
        assert h.rt.permissions.pending(sid) == []
        await reached(gate)
        gate.open()  # the third call arrives after the refusal
        records = await h.settled_log(sid)

        failed = {d["callID"]: d["error"] for d in of_type(records, "session.tool.failed")}
        assert set(failed) == {"c1", "c2", "c3"}
        assert {e["type"] for e in failed.values()} == {"permission.rejected"}
        assert all("use the project's copy instead" in e["message"] for e in failed.values())
        assert failed["c2"]["message"].startswith("Not run") and failed["c3"]["message"].startswith("Not run")
        assert reach.ran == [] and echo.calls == []
        # the model reads the feedback and the session goes on
        assert len(h.provider.requests) == 2
        assert types(records)[-2:] == ["session.step.ended", "session.execution.succeeded"]


async def test_a_decline_stops_the_turn_and_runs_none_of_the_steps_later_calls(tmp_path):
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
    gate, reach, echo = Gate(), ReachTool(), EchoTool()
    async with harness(tmp_path, refusal_scripts(tmp_path, gate)[:1], tools=[reach, echo], asking=True) as h:
        sid = await h.session()
        sub = h.rt.store.live.subscribe()
        await h.admit(sid, "p1")
        first, _ = await asked(sub, sid, 2)
        await h.rt.permissions.reply(sid, first.id, "reject", None)
        assert h.rt.permissions.pending(sid) == []
        await reached(gate)
        gate.open()
        records = await h.settled_log(sid)

        failed = {d["callID"]: d["error"]["type"] for d in of_type(records, "session.tool.failed")}
        assert failed == {"c1": "permission.declined", "c2": "permission.declined", "c3": "aborted"}
        assert reach.ran == [] and echo.calls == []
        assert len(h.provider.requests) == 1  # the model was not asked to go on
        assert types(records)[-2:] == ["session.step.failed", "session.execution.interrupted"]


async def test_each_calls_wait_for_the_user_is_recorded_with_its_settlement(tmp_path):
    """When a call was asked and answered travels with its settlement (`resultState`, the tool part's
    `provider.resultMetadata`), so the trace can show the wait apart from the run; a call nobody was asked for has
    no record, and what the model reads is unchanged."""
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
    reach, echo = ReachTool(), EchoTool()
    scripts = [[llm.ToolCall("c1", "reach", {"path": str(tmp_path / "a")}),
                llm.ToolCall("c2", "reach", {"path": str(tmp_path / "b")}),
                llm.ToolCall("c3", "echo", {}), llm.Finish("tool-calls", USAGE)], text("understood")]
    async with harness(tmp_path, scripts, tools=[reach, echo], asking=True) as h:
        sid = await h.session()
        sub = h.rt.store.live.subscribe()
        await h.admit(sid, "p1")
        requests = {r.source.callID: r for r in await asked(sub, sid, 2)}
        await h.rt.permissions.reply(sid, requests["c1"].id, "once", None)
        await h.rt.permissions.reply(sid, requests["c2"].id, "reject", "not that one")
        records = await h.settled_log(sid)

        called = {r.data.callID: r.created for r in records if isinstance(r.data, ev.ToolCalled)}
        settled = {r.data.callID: r for r in records if isinstance(r.data, ev.ToolSuccess | ev.ToolFailed)}
        waits = {call: (r.data.resultState or {}).get("opencode-session", {}).get("permission")
                 for call, r in settled.items()}
        assert waits["c3"] is None and settled["c3"].data.resultState is None
        [once], [rejected] = waits["c1"], waits["c2"]
        assert (once["id"], once["reply"]) == (requests["c1"].id, "once")
        assert (rejected["id"], rejected["reply"]) == (requests["c2"].id, "reject")
        for call, wait in (("c1", once), ("c2", rejected)):
            assert called[call] <= wait["asked"] and wait["asked"] <= wait["replied"]
            assert wait["replied"] <= settled[call].created
        # the projection keeps it on the tool part; the model reads the same result as before
        message = (await h.rt.sessions.message(sid, settled["c1"].data.assistantMessageID)).model_dump(mode="json")
        parts = {p["id"]: p for p in message["content"] if p["type"] == "tool"}
        assert parts["c1"]["provider"]["resultMetadata"] == {"opencode-session": {"permission": [once]}}
        assert (parts["c3"].get("provider") or {}).get("resultMetadata") is None
        assert "opencode-session" not in json.dumps(h.provider.requests[-1], default=str)
