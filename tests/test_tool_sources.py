"""Tool sources: the registry is composed of them (the built-ins are one), starts each before the first Step, offers
and runs their tools, keeps one Step's list stable while a source changes it, leaves out a source that fails to start
and stops them all when the runtime closes. A real runtime, store and runner, with a scripted provider."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from opencode_session.core.llm import model as llm
from opencode_session.core.runtime import Runtime, RuntimeOptions
from opencode_session.core.tools import StaticTools, Tool, ToolContext, ToolOutput, ToolRegistry, ToolSource
from opencode_session.core.tools.builtin import ReadTool
from opencode_session.core.wiring import make_drain_factory
from opencode_session.schema.prompt import PromptInput
from tests.support.scripted import ScriptedProvider, text, tool_call
from tests.test_runner import USAGE, FakeClock, config, of_type

pytestmark = pytest.mark.anyio


class Named:
    """A tool that answers with its own name; `then` runs while it executes."""

    parameters: dict[str, Any] = {"type": "object"}

    def __init__(self, name: str, then: Any = None) -> None:
        self.name = name
        self.description = f"The {name} tool"
        self.then = then

    async def execute(self, input: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        if self.then is not None:
            self.then()
        return ToolOutput.of_text(f"{self.name} ran")


class RecordingSource:
    """A source whose tools the test changes, recording its lifecycle (what a server-backed source would do)."""

    def __init__(self, tools: Sequence[Tool], *, fail: bool = False) -> None:
        self.tools = list(tools)
        self.fail = fail
        self.events: list[str] = []

    @property
    def name(self) -> str:
        return "recording"

    async def start(self) -> None:
        self.events.append("start")
        if self.fail:
            raise ConnectionError("the server is not there")

    def list_tools(self) -> Sequence[Tool]:
        self.events.append("list")
        return tuple(self.tools)

    async def stop(self) -> None:
        self.events.append("stop")


@asynccontextmanager
async def runtime(tmp_path: Path, registry: ToolRegistry, scripts: list[Any]):
    home = tmp_path / "home"
    (tmp_path / "work").mkdir()
    env = config(home)
    provider = ScriptedProvider()
    provider.push(*scripts)
    factory = make_drain_factory(tools=registry, provider=lambda _m: provider, clock=FakeClock(), titles=False)
    async with Runtime(RuntimeOptions(db_path=tmp_path / "db.sqlite", directory=tmp_path / "work", env=env,
                                      drain_factory=factory)) as rt:
        yield rt, provider


async def run(rt: Runtime, prompt: str, sid: str | None = None) -> list[Any]:
    """Admit `prompt` to session `sid` (a new one by default), wait for its execution, and return its log."""
    sid = sid or (await rt.sessions.create()).id
    await rt.sessions.admit(sid, PromptInput(text=prompt))
    with anyio.fail_after(10):
        assert rt.execution is not None
        await rt.execution.wait(sid)
    stream = await rt.sessions.log(sid, -1, follow=False)
    return [record async for record in stream]


def offered(request: Any) -> list[str]:
    return [t.name for t in request.tools]


async def test_an_extra_source_is_started_offered_run_and_stopped(tmp_path):
    source = RecordingSource([Named("lookup")])
    registry = ToolRegistry([StaticTools("built-in", [ReadTool()]), source])
    async with runtime(tmp_path, registry, [tool_call("c1", "lookup", {}), text("done")]) as (rt, provider):
        records = await run(rt, "look it up")
        assert source.events[0] == "start" and "stop" not in source.events
    assert source.events[-1] == "stop"
    assert source.events.count("start") == 1
    assert offered(provider.requests[0]) == ["read", "lookup"]
    success = of_type(records, "session.tool.success")
    assert [part["text"] for part in success[0]["content"]] == ["lookup ran"]


async def test_a_list_changed_during_a_step_reaches_the_next_step_only(tmp_path):
    source = RecordingSource([])

    def swap() -> None:  # while `first` runs, the source stops offering it and offers `second`
        source.tools = [Named("second")]

    source.tools = [Named("first", then=swap)]
    # two calls of `first` in one Step: the second one runs after the first changed the list
    calls = [llm.ToolCall("c1", "first", {}), llm.ToolCall("c2", "first", {}), llm.Finish("tool-calls", USAGE)]
    async with runtime(tmp_path, ToolRegistry([source]), [calls, text("done")]) as (rt, provider):
        records = await run(rt, "go")
    assert [s["callID"] for s in of_type(records, "session.tool.success")] == ["c1", "c2"]
    assert [offered(r) for r in provider.requests] == [["first"], ["second"]]


async def test_a_source_that_fails_to_start_is_left_out_and_the_others_still_serve(tmp_path):
    broken = RecordingSource([Named("remote")], fail=True)
    registry = ToolRegistry([broken, StaticTools("local", [Named("local")])])
    async with runtime(tmp_path, registry, [tool_call("c1", "remote", {}), text("done")]) as (rt, provider):
        records = await run(rt, "go")
    assert offered(provider.requests[0]) == ["local"]
    failed = of_type(records, "session.tool.failed")
    assert failed[0]["error"]["type"] == "tool.unknown"
    assert "list" not in broken.events


def test_the_first_source_that_offers_a_name_keeps_it():
    first, second = Named("read"), Named("read")
    registry = ToolRegistry([StaticTools("a", [first]), StaticTools("b", [second, Named("other")])])
    snapshot = registry.snapshot()
    assert snapshot.get("read") is first and snapshot.names() == ["read", "other"]
    assert isinstance(StaticTools("x"), ToolSource)


def test_register_adds_after_the_sources_and_refuses_a_name_a_source_offers():
    registry = ToolRegistry([StaticTools("a", [Named("one")])])
    registry.register(Named("two"))
    assert registry.names() == ["one", "two"]
    with pytest.raises(ValueError):
        registry.register(Named("one"))


async def test_a_source_added_later_starts_with_the_next_start_and_stops_with_the_others():
    first, later = RecordingSource([Named("one")]), RecordingSource([Named("two")])
    registry = ToolRegistry([first])
    await registry.start()
    registry.add_source(later)
    assert registry.names() == ["one", "two"] and later.events == ["list"]
    await registry.start()
    assert (first.events.count("start"), later.events.count("start")) == (1, 1)
    await registry.stop()
    assert first.events[-1] == later.events[-1] == "stop"
