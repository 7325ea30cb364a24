"""Python plugins in a real runtime (store, runner, scripted provider): what a loaded plugin contributes reaches
sessions (its tool is offered and runs, its instructions enter the baseline and change chronologically, its
adapter answers, its hooks see and change requests and results and observe durable events), and every failure
touches only what it must: an import or setup failure leaves the plugin out (recorded, logged), a before-request hook
that raises fails its Step, an after-tool-result hook its tool call, an event hook nothing but a log line."""

from __future__ import annotations

import dataclasses
import json
import logging
import sys
from collections.abc import Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from opencode_session.core.llm import model as llm
from opencode_session.core.plugins import PLUGIN_POSITION, load_plugins
from opencode_session.core.runtime import Runtime, RuntimeOptions
from opencode_session.core.wiring import make_drain_factory
from opencode_session.schema import session_errors
from opencode_session.schema.events import EventRecord
from opencode_session.sdk import (
    AdapterSpec,
    Plugin,
    PluginInstructionsUnavailable,
    PluginRegistry,
    ProviderRequest,
    ToolCallRequest,
    ToolOutput,
    ToolResult,
    ToolVerdict,
)
from tests.support.plugins import Reverse
from tests.support.scripted import ScriptedProvider, text, tool_call
from tests.test_runner import FakeClock, config, of_type, types
from tests.test_tool_sources import run

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def runtime(tmp_path: Path, plugins: Sequence[Plugin] = (), scripts: Sequence[Any] = (), *,
                  plugin_entries: Sequence[Any] = (), discover: bool = False, scripted: bool = True):
    env = config(tmp_path / "home")
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    if plugin_entries:
        (work / "opencode.json").write_text(json.dumps({"plugin": list(plugin_entries)}))
    provider = ScriptedProvider()
    provider.push(*scripts)
    factory = make_drain_factory(provider=(lambda _m: provider) if scripted else None, clock=FakeClock(),
                                 titles=False)
    async with Runtime(RuntimeOptions(db_path=tmp_path / "db.sqlite", directory=work, env=env, drain_factory=factory,
                                      plugins=plugins, discover_plugins=discover)) as rt:
        yield rt, provider


def offered(request: llm.LLMRequest) -> list[str]:
    return [t.name for t in request.tools]


def success_text(records: list[EventRecord]) -> list[str]:
    return ["".join(part["text"] for part in s["content"]) for s in of_type(records, "session.tool.success")]


# --- what a plugin contributes ------------------------------------------------------------------------


async def test_a_plugins_tool_instructions_and_hooks_reach_the_session(tmp_path):
    seen_requests: list[ProviderRequest] = []
    seen_results: list[ToolResult] = []
    seen_events: list[EventRecord] = []

    def before(hooked: ProviderRequest) -> llm.LLMRequest:
        seen_requests.append(hooked)
        return dataclasses.replace(hooked.request, system=[*hooked.request.system, "Answer in French."])

    async def after(result: ToolResult) -> ToolOutput:
        seen_results.append(result)
        return ToolOutput.of_text(result.output.text() + " (checked)")

    def setup(registry: PluginRegistry) -> None:
        registry.tool(Reverse())
        registry.instructions("style", lambda asked: f"Reverse texts with the reverse tool ({asked.agent}).")
        registry.before_request(before)
        registry.after_tool_result(after)
        registry.on_event(seen_events.append)

    scripts = [tool_call("c1", "reverse", {"text": "abc"}), text("done")]
    async with runtime(tmp_path, [Plugin("helper", setup)], scripts) as (rt, provider):
        records = await run(rt, "reverse abc")
        with anyio.fail_after(10):  # the event hook follows the commits: it sees the execution end too
            while not any(e.type == "session.execution.succeeded" for e in seen_events):
                await anyio.sleep(0.01)
    first = provider.requests[0]
    assert offered(first)[-1] == "reverse" and "read" in offered(first)  # after the built-ins
    assert any("Reverse texts with the reverse tool (build)." in part for part in first.system)
    assert [r.system[-1] for r in provider.requests] == ["Answer in French."] * 2  # what the hook sent instead
    assert [(h.session_id, h.agent, h.provider_id, h.model_id) for h in seen_requests][0][1:] == ("build", "local",
                                                                                                 "m")
    assert success_text(records) == ["cba (checked)"]  # the hook's output is the durable result the model reads
    assert [(r.tool, dict(r.input), r.output.text()) for r in seen_results] == [("reverse", {"text": "abc"}, "cba")]
    durable = [e for e in seen_events if e.aggregate_id == records[0].aggregate_id]
    # every durable event of the session, in commit order
    assert [e.seq for e in durable] == list(range(len(durable))) and durable[-1].seq == records[-1].seq


async def test_instructions_that_change_reach_the_model_as_an_update_and_none_removes_them(tmp_path):
    said: list[str | None] = ["Use tabs."]

    def setup(registry: PluginRegistry) -> None:
        registry.instructions("indent", lambda _asked: said[0])

    async with runtime(tmp_path, [Plugin("style", setup)], [text("one"), text("two"), text("three")]) as (rt, _p):
        sid = (await rt.sessions.create()).id
        await run(rt, "first", sid)
        said[0] = "Use spaces."
        await run(rt, "second", sid)
        said[0] = None
        records = await run(rt, "third", sid)
    updates = [u["text"] for u in of_type(records, "session.instructions.updated")]
    assert len(updates) == 2
    assert "replace the ones given earlier" in updates[0] and "Use spaces." in updates[0]
    assert "plugin/style/indent" in updates[1] and "no longer apply" in updates[1]


async def test_a_plugin_instruction_source_that_raises_counts_as_unavailable_and_names_its_key(tmp_path, caplog):
    def setup(registry: PluginRegistry) -> None:
        registry.instructions("flaky", lambda _asked: 1 / 0)
        registry.instructions("later", _unavailable)

    async with runtime(tmp_path, [Plugin("flaky", setup)]) as (rt, provider):
        records = await run(rt, "hello")
    failed = of_type(records, "session.execution.failed")[0]["error"]
    assert failed["type"] == session_errors.INSTRUCTIONS_UNAVAILABLE
    assert "plugin/flaky/flaky" in failed["message"] and "plugin/flaky/later" in failed["message"]
    assert provider.requests == []
    assert "instruction source plugin/flaky/flaky of a plugin failed" in caplog.text


def _unavailable(_asked: Any) -> str:
    raise PluginInstructionsUnavailable("the style server is down")


async def test_a_plugins_adapter_answers_the_models_of_its_package(tmp_path):
    sys.modules.pop("tests.support.echo_adapter", None)
    spec = AdapterSpec("plugin-echo", "tests.support.echo_adapter", "EchoProvider", ("@example/plugin-echo",))
    env = config(tmp_path / "home")
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "opencode.json").write_text(json.dumps({
        "model": "ex/parrot",
        "provider": {"ex": {"npm": "@example/plugin-echo", "options": {"baseURL": "http://127.0.0.1:9/v1"},
                            "models": {"parrot": {}}}}}))
    from opencode_session.core.llm.providers import unregister_adapter
    try:
        options = RuntimeOptions(db_path=tmp_path / "db.sqlite", directory=tmp_path / "work", env=env,
                                 drain_factory=make_drain_factory(titles=False),
                                 plugins=[Plugin("parrot", lambda registry: registry.adapter(spec))])
        async with Runtime(options) as rt:
            assert rt.plugins is not None and rt.plugins.describe()[0]["contributes"]["adapters"] == ["plugin-echo"]
            records = await run(rt, "hello")
            # a second runtime of the process loading the same plugin shares the registered adapter
            again = load_plugins(given=[Plugin("parrot", lambda registry: registry.adapter(spec))])
            assert [r.status for r in again.records] == ["loaded"]
    finally:
        unregister_adapter("plugin-echo")
    assert [t["text"] for t in of_type(records, "session.text.ended")] == ["echo: hello"]


# --- failures: each touches only what it must -------------------------------------------------------------


async def test_a_before_request_hook_that_raises_fails_its_step_naming_plugin_and_hook(tmp_path):
    def setup(registry: PluginRegistry) -> None:
        registry.before_request(lambda _hooked: {}["missing"])

    async with runtime(tmp_path, [Plugin("gatekeeper", setup)]) as (rt, provider):
        records = await run(rt, "hello")
    assert provider.requests == []  # nothing was sent
    step = of_type(records, "session.step.failed")[0]["error"]
    assert step["type"] == session_errors.PLUGIN_HOOK == "plugin.hook"
    assert step["message"] == "plugin gatekeeper: its before-request hook failed: KeyError: 'missing'"
    assert of_type(records, "session.execution.failed")[0]["error"] == step
    assert "session.step.started" in types(records)  # the failed Step has its assistant message


async def test_a_before_request_hook_answering_something_else_fails_its_step(tmp_path):
    def setup(registry: PluginRegistry) -> None:
        registry.before_request(lambda _hooked: "a string")

    async with runtime(tmp_path, [Plugin("odd", setup)]) as (rt, provider):
        records = await run(rt, "hello")
    error = of_type(records, "session.step.failed")[0]["error"]
    assert error["type"] == "plugin.hook" and "it returned str, not LLMRequest or None" in error["message"]


async def test_an_after_tool_result_hook_that_raises_fails_that_call_only(tmp_path):
    def setup(registry: PluginRegistry) -> None:
        registry.tool(Reverse())

        async def after(result: ToolResult) -> None:
            if result.input.get("text") == "bad":
                raise ValueError("cannot check this one")

        registry.after_tool_result(after)

    calls = [llm.ToolCall("c1", "reverse", {"text": "bad"}), llm.ToolCall("c2", "reverse", {"text": "good"}),
             llm.Finish("tool-calls", llm.Usage(10, 5))]
    async with runtime(tmp_path, [Plugin("checker", setup)], [calls, text("done")]) as (rt, provider):
        records = await run(rt, "reverse both")
    failed = of_type(records, "session.tool.failed")
    assert [(f["callID"], f["error"]["type"]) for f in failed] == [("c1", "plugin.hook")]
    assert failed[0]["error"]["message"] == ("plugin checker: its after-tool-result hook failed: ValueError: cannot"
                                             " check this one")
    assert success_text(records) == ["doog"]
    assert "session.execution.succeeded" in types(records)  # the model read the failure and answered
    assert len(provider.requests) == 2


async def test_a_before_tool_hook_refuses_rewrites_or_fails_a_call_before_it_runs(tmp_path):
    shown: list[tuple[str, dict]] = []

    def setup(registry: PluginRegistry) -> None:
        registry.tool(Reverse())

        async def before(call: ToolCallRequest) -> ToolVerdict | None:
            shown.append((call.tool, dict(call.input)))
            if call.input.get("text") == "secret":
                return ToolVerdict("deny", "secrets are not reversed here")
            if call.input.get("text") == "typo":
                return ToolVerdict(input={"text": "fixed"})
            if call.input.get("text") == "odd":
                return "yes"  # type: ignore[return-value]  # not a verdict: the call fails, naming the plugin
            return None

        registry.before_tool(before)

    calls = [llm.ToolCall("c1", "reverse", {"text": "secret"}), llm.ToolCall("c2", "reverse", {"text": "typo"}),
             llm.ToolCall("c3", "reverse", {"text": "odd"}), llm.ToolCall("c4", "reverse", {"text": "abc"}),
             llm.Finish("tool-calls", llm.Usage(10, 5))]
    async with runtime(tmp_path, [Plugin("guard", setup)], [calls, text("done")]) as (rt, _provider):
        records = await run(rt, "reverse them")
    failed = {f["callID"]: f["error"] for f in of_type(records, "session.tool.failed")}
    assert failed["c1"] == {"type": "hook.blocked", "message": "secrets are not reversed here"}
    assert failed["c3"]["type"] == "plugin.hook" and \
        "plugin guard: its before-tool hook failed: it returned str, not ToolVerdict or None" in failed["c3"]["message"]
    assert sorted(success_text(records)) == ["cba", "dexif"]  # c2 ran with the input the hook gave
    assert sorted(text for _tool, i in shown for text in i.values()) == ["abc", "odd", "secret", "typo"]


async def test_an_event_hook_that_raises_is_logged_and_disturbs_nothing(tmp_path, caplog):
    after_it: list[str] = []

    def setup(registry: PluginRegistry) -> None:
        registry.on_event(lambda record: 1 / 0)

    def second(registry: PluginRegistry) -> None:
        registry.on_event(lambda record: after_it.append(record.type))

    with caplog.at_level(logging.ERROR, logger="opencode_session.core.plugins"):
        async with runtime(tmp_path, [Plugin("noisy", setup), Plugin("quiet", second)], [text("hi")]) as (rt, _p):
            records = await run(rt, "hello")
            with anyio.fail_after(10):
                while "session.execution.succeeded" not in after_it:
                    await anyio.sleep(0.01)
    assert "session.execution.succeeded" in types(records)
    assert "plugin noisy: its on-event hook failed on session.created (ignored)" in caplog.text
    assert after_it[:1] == ["session.created"]  # the next plugin's hook still saw every event


async def test_plugins_that_cannot_load_are_recorded_and_the_others_work(tmp_path, caplog):
    entries = ["opencode-wakatime", "python:tests.support.no_such_module", "python:tests.support.plugins:broken",
               "python:tests.support.plugins:not_a_plugin", "python:tests.support.plugins:reverser",
               ["@scope/with-options", {"x": 1}], ["python:tests.support.plugins:configured", {"greeting": "ahoy"}]]
    with caplog.at_level(logging.INFO, logger="opencode_session.core.plugins"):
        async with runtime(tmp_path, scripts=[tool_call("c1", "reverse", {"text": "ab"}), text("ok")],
                           plugin_entries=entries, discover=True) as (rt, provider):
            records = await run(rt, "go")
            assert rt.plugins is not None
            listed = {d["name"]: d for d in rt.plugins.describe()}
    assert success_text(records) == ["ba"]  # the plugin that loaded works
    assert "reverse" in offered(provider.requests[0])
    assert listed["reverser"]["status"] == "loaded" and listed["reverser"]["contributes"]["tools"] == ["reverse"]
    assert listed["reverser"]["origin"].endswith("`plugin`: python:tests.support.plugins:reverser")
    assert listed["opencode-wakatime"]["status"] == "skipped" and "JavaScript" in listed["opencode-wakatime"]["error"]
    assert listed["@scope/with-options"]["status"] == "skipped"
    assert listed["configured"]["status"] == "loaded"  # with the options its entry gave it
    assert any("Greet with 'ahoy'." in part for part in provider.requests[0].system)
    missing = listed["tests.support.no_such_module"]
    assert missing["status"] == "failed" and "ModuleNotFoundError" in missing["error"]
    broken = listed["broken"]
    assert broken["status"] == "failed" and broken["contributes"] == {}
    assert broken["error"] == "its setup failed: RuntimeError: the plugin's settings file is missing"
    assert "not a Plugin or a setup function" in listed["tests.support.plugins"]["error"]
    assert "plugin reverser loaded from" in caplog.text and "plugin broken (" in caplog.text


async def test_a_second_plugin_of_a_taken_name_and_an_async_setup_are_refused(tmp_path):
    async def later(registry: PluginRegistry) -> None:
        registry.tool(Reverse())

    loaded = load_plugins(given=[Plugin("twin", lambda r: r.tool(Reverse())), Plugin("twin", lambda r: None),
                                 Plugin("eager", later)])
    assert [(r.name, r.status) for r in loaded.records] == [("twin", "loaded"), ("twin", "failed"),
                                                            ("eager", "failed")]
    assert "a plugin named twin is loaded already" in (loaded.records[1].error or "")
    assert "setup must be a plain function" in (loaded.records[2].error or "")


def test_a_bad_contribution_fails_the_setup_that_made_it():
    def setup(registry: PluginRegistry) -> None:
        registry.instructions("x", lambda _asked: "text", position="nowhere")

    def bad_tool(registry: PluginRegistry) -> None:
        registry.tool(object())  # type: ignore[arg-type]

    loaded = load_plugins(given=[Plugin("misplaced", setup), Plugin("toolless", bad_tool),
                                 Plugin("Upper", lambda r: r.instructions("k", lambda _a: "t"))])
    errors = [r.error or "" for r in loaded.records]
    assert "not a declared instruction position: 'nowhere'" in errors[0] and PLUGIN_POSITION in errors[0]
    assert "a tool needs 'name'" in errors[1]
    assert "invalid instruction source key: 'plugin/Upper/k'" in errors[2]


async def test_a_plugins_tool_source_is_started_offered_and_stopped_with_the_runtime(tmp_path):
    from tests.test_tool_sources import Named, RecordingSource

    source = RecordingSource([Named("lookup")])
    async with runtime(tmp_path, [Plugin("finder", lambda registry: registry.tool_source(source))],
                       [tool_call("c1", "lookup", {}), text("done")]) as (rt, provider):
        records = await run(rt, "look it up")
        assert rt.plugins is not None and rt.plugins.describe()[0]["contributes"]["tool_sources"] == ["recording"]
        assert "stop" not in source.events
    assert source.events[0] == "start" and source.events[-1] == "stop"
    assert success_text(records) == ["lookup ran"] and "lookup" in offered(provider.requests[0])
    refused = load_plugins(given=[Plugin("sourceless", lambda registry: registry.tool_source(object()))])  # type: ignore[arg-type]
    assert "is not a ToolSource" in (refused.records[0].error or "")


async def test_a_plugins_pty_environment_reaches_new_terminals_under_the_hosts_overlay(tmp_path, caplog):
    from opencode_session.sdk import OpenCode, TerminalRequest
    from tests.api.test_pty import read_to_end

    work = tmp_path / "work"
    (work / "sub").mkdir(parents=True)
    asked: list[TerminalRequest] = []

    def adds(request: TerminalRequest) -> dict[str, str]:
        asked.append(request)
        return {"A": "plugin", "B": "plugin"}

    plugins = [Plugin("shell-env", lambda registry: registry.pty_environment(adds)),
               Plugin("broken-env", lambda registry: registry.pty_environment(lambda _request: {}["x"]))]
    async with OpenCode(directory=work, env={**config(tmp_path / "home"), "PATH": "/usr/bin:/bin"}, plugins=plugins,
                        pty_environment=lambda _location, _cwd: {"B": "host"}) as oc:
        info = (await oc.pty.create(command="sh", args=["-c", 'echo "[$A $B]"'], cwd="sub")).data
        async with oc.pty.connect(info.id) as ws:
            output = await read_to_end(ws)
    assert "[plugin host]" in output  # the plugin's additions, the host's overlay over them
    assert [(r.directory, r.cwd) for r in asked] == [(work.resolve(), (work / "sub").resolve())]
    assert "plugin broken-env: its pty-environment hook failed" in caplog.text  # the terminal started anyway


def test_plugin_instruction_sources_extend_a_given_set_without_changing_it():
    from opencode_session.core.instructions.composition import InstructionSources

    async def host_source(_boundary: Any) -> Any:
        raise AssertionError("not loaded here")

    given = InstructionSources()
    given.add("references", host_source)
    loaded = load_plugins(given=[Plugin("style", lambda r: r.instructions("k", lambda _a: "text"))])
    extended = loaded.instruction_sources(given)
    assert extended is not given and extended is not None
    assert {p: len(v) for p, v in extended._added.items()} == {"references": 1, "plugins": 1}
    assert {p: len(v) for p, v in given._added.items()} == {"references": 1}  # a second runtime starts afresh
    assert load_plugins().instruction_sources(given) is given
