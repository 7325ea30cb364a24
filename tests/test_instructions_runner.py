"""Instructions through the runner, asserting the exact requests a scripted provider received: one stable
baseline prefix, chronological updates before newly promoted input, entries, dates, blocked first steps, and
nearby AGENTS.md injection."""

from __future__ import annotations

import json
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from opencode_session.core.execution.runner import Runner, RunnerDeps
from opencode_session.core.instructions.algebra import Source, make
from opencode_session.core.instructions.checkpoint import CheckpointPreparer
from opencode_session.core.instructions.composition import InstructionSources
from opencode_session.core.instructions.nearby import NearbyInstructions
from opencode_session.core.llm import model as llm
from opencode_session.core.llm.errors import ProviderInternalError
from opencode_session.core.runtime import Runtime, RuntimeOptions
from opencode_session.schema.prompt import PromptInput
from tests.support.scripted import ScriptedProvider, text, tool_call

pytestmark = pytest.mark.anyio


class _Clock:
    def now_ms(self) -> int:
        return 1_000_000

    async def sleep_ms(self, ms: float) -> None:
        return None


@dataclass
class _Harness:
    """The runtime under test, the scripted provider it calls, the project it runs in and the test's clock state."""

    runtime: Runtime
    provider: ScriptedProvider
    project: Path
    state: dict[str, Any]

    def __getattr__(self, name: str) -> Any:  # the runtime's parts: `rt.sessions`, `rt.execution`, ...
        return getattr(self.runtime, name)


@asynccontextmanager
async def harness(tmp_path: Path, today=lambda: date(2026, 11, 30), sources: InstructionSources | None = None):
    home = tmp_path / "home"
    cfg = tmp_path / "config"
    (cfg / "opencode").mkdir(parents=True)
    (cfg / "opencode" / "opencode.json").write_text(json.dumps({
        "model": "local/m",
        "provider": {"local": {"npm": "@ai-sdk/openai-compatible",
                               "options": {"baseURL": "http://127.0.0.1:9/v1", "apiKey": "k"}, "models": {"m": {}}}},
    }))
    project = tmp_path / "project"
    (project / ".git").mkdir(parents=True)
    env = {"XDG_CONFIG_HOME": str(cfg), "HOME": str(home)}
    provider = ScriptedProvider()
    state = {"today": today}

    def factory(rt):
        deps = RunnerDeps(store=rt.store, env=env, provider_for=lambda _m: provider, clock=_Clock(),
                          instructions=CheckpointPreparer(rt.store, env, today=lambda: state["today"](),
                                                          platform="linux", sources=sources),
                          on_read=NearbyInstructions(rt.store).hook)
        return Runner(deps).drain

    async with Runtime(RuntimeOptions(db_path=tmp_path / "db.sqlite", directory=project, env=env,
                                      drain_factory=factory)) as rt:
        yield _Harness(rt, provider, project, state)


async def _prompt(rt, sid: str, words: str) -> None:
    await rt.sessions.admit(sid, PromptInput(text=words))
    await rt.execution.wait(sid)


def _updates(request: llm.LLMRequest) -> list[str]:
    return [m.text for m in request.messages if isinstance(m, llm.SystemUpdate)]


async def _log_types(rt, sid):
    return [e.type async for e in await rt.sessions.log(sid, -1, follow=False)]


async def test_first_step_sends_the_baseline_and_no_update(tmp_path):
    async with harness(tmp_path) as rt:
        (rt.project / "AGENTS.md").write_text("Use tabs.")
        sid = (await rt.sessions.create()).id
        rt.provider.push(text("ok"))
        await _prompt(rt, sid, "hi")
        request = rt.provider.requests[0]
        baseline = request.system[-1]
        assert "<env>" in baseline and "Use tabs." in baseline and "2026-11-30" in baseline
        assert _updates(request) == []
        assert "session.instructions.updated" not in await _log_types(rt, sid)


async def test_agents_md_edit_produces_one_chronological_update_and_keeps_the_prefix(tmp_path):
    async with harness(tmp_path) as rt:
        agents = rt.project / "AGENTS.md"
        agents.write_text("Use tabs.")
        sid = (await rt.sessions.create()).id
        rt.provider.push(text("ok"), text("ok again"), text("third"))
        await _prompt(rt, sid, "first")
        agents.write_text("Use spaces.")
        await _prompt(rt, sid, "second")
        await _prompt(rt, sid, "third")
        first, second, third = rt.provider.requests
        assert second.system == first.system  # the provider-cache prefix is never rewritten
        updates = _updates(second)
        assert len(updates) == 1 and "Use spaces." in updates[0] and "Use tabs." not in updates[0]
        # the update sits before the newly promoted prompt, after the earlier exchange
        kinds = [type(m).__name__ for m in second.messages]
        assert kinds == ["UserMessage", "AssistantMessage", "SystemUpdate", "UserMessage"]
        assert _updates(third) == updates  # replayed from history, not re-emitted
        assert (await _log_types(rt, sid)).count("session.instructions.updated") == 1


async def test_removed_agents_md_says_earlier_instructions_no_longer_apply(tmp_path):
    async with harness(tmp_path) as rt:
        agents = rt.project / "AGENTS.md"
        agents.write_text("Use tabs.")
        sid = (await rt.sessions.create()).id
        rt.provider.push(text("ok"), text("ok"))
        await _prompt(rt, sid, "first")
        agents.unlink()
        await _prompt(rt, sid, "second")
        [removal] = _updates(rt.provider.requests[1])
        assert "disregard" in removal.lower() and "Use tabs." not in removal


async def test_a_new_date_is_announced_with_only_the_new_date(tmp_path):
    async with harness(tmp_path) as rt:
        sid = (await rt.sessions.create()).id
        rt.provider.push(text("ok"), text("ok"))
        await _prompt(rt, sid, "today")
        rt.state["today"] = lambda: date(2026, 12, 1)
        await _prompt(rt, sid, "tomorrow")
        [update] = _updates(rt.provider.requests[1])
        assert "2026-12-01" in update and "2026-11-30" not in update
        assert rt.provider.requests[1].system == rt.provider.requests[0].system


async def test_instruction_entries_added_replaced_removed(tmp_path):
    async with harness(tmp_path) as rt:
        sid = (await rt.sessions.create()).id
        rt.provider.push(*(text("ok") for _ in range(4)))
        await _prompt(rt, sid, "one")
        await rt.entries.put(sid, "ticket", {"id": 42})
        await _prompt(rt, sid, "two")
        await rt.entries.put(sid, "ticket", {"id": 43})
        await _prompt(rt, sid, "three")
        await rt.entries.remove(sid, "ticket")
        await _prompt(rt, sid, "four")
        requests = rt.provider.requests
        added = _updates(requests[1])[-1]
        assert added.startswith('<context key="ticket">') and '"id": 42' in added
        replaced = _updates(requests[2])[-1]
        assert '"id": 43' in replaced and "ticket" in replaced and replaced != added
        removed = _updates(requests[3])[-1]
        assert "ticket" in removed and "43" not in removed
        assert "api" not in added.lower()  # mechanism-neutral: the model sees context, not how it was attached
        assert all(r.system == requests[0].system for r in requests)


async def test_unavailable_source_at_first_step_keeps_the_prompt_pending(tmp_path):
    async with harness(tmp_path) as rt:
        agents = rt.project / "AGENTS.md"
        agents.write_bytes(b"\xff\xfe not utf-8")
        sid = (await rt.sessions.create()).id
        await _prompt(rt, sid, "blocked")
        assert rt.provider.requests == []
        assert [p.prompt.text for p in await rt.sessions.pending(sid)] == ["blocked"]
        types = await _log_types(rt, sid)
        assert "session.input.promoted" not in types and types[-1] == "session.execution.failed"
        agents.write_text("Readable now.")
        rt.provider.push(text("ok"))
        rt.sessions.wake(sid)  # the next wake retries; nothing was lost
        await rt.execution.wait(sid)
        assert await rt.sessions.pending(sid) == []
        assert "Readable now." in rt.provider.requests[0].system[-1]


async def test_update_stays_durable_and_is_replayed_unchanged_on_retry(tmp_path):
    async with harness(tmp_path) as rt:
        sid = (await rt.sessions.create()).id
        rt.provider.push(text("ok"), [ProviderInternalError("boom", status=500)], text("after retry"))
        await _prompt(rt, sid, "one")
        await rt.entries.put(sid, "note", "remember this")
        await _prompt(rt, sid, "two")
        failed_attempt, retried = rt.provider.requests[1], rt.provider.requests[2]
        assert _updates(failed_attempt) == _updates(retried) and len(_updates(retried)) == 1
        assert (await _log_types(rt, sid)).count("session.instructions.updated") == 1


async def test_nearby_agents_md_is_injected_once_after_a_read(tmp_path):
    async with harness(tmp_path) as rt:
        pkg = rt.project / "pkg" / "inner"
        pkg.mkdir(parents=True)
        (rt.project / "pkg" / "AGENTS.md").write_text("Package rules.")
        (pkg / "code.py").write_text("print(1)\n")
        sid = (await rt.sessions.create()).id
        rt.provider.push(tool_call("c1", "read", {"path": "pkg/inner/code.py"}),
                         tool_call("c2", "read", {"path": "pkg/inner/code.py"}), text("done"))
        await _prompt(rt, sid, "read it twice")
        synthetic = [m for m in await rt.sessions.context(sid) if m.type == "synthetic"]
        assert len(synthetic) == 1 and "Package rules." in synthetic[0].text
        assert synthetic[0].metadata == {"instruction": {"paths": [str(rt.project / "pkg" / "AGENTS.md")]}}
        last = rt.provider.requests[-1]
        assert any(isinstance(m, llm.UserMessage) and "Package rules." in m.parts[0].text for m in last.messages)


def _write_skill(root: Path, name: str, description: str, body: str) -> None:
    folder = root / ".opencode" / "skill" / name
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {description}\n---\n{body}\n")


async def test_skill_guidance_lists_permitted_skills_and_bodies_load_only_through_the_tool(tmp_path):
    async with harness(tmp_path) as rt:
        _write_skill(rt.project, "deploy", "Ship a release", "SECRET-DEPLOY-STEPS")
        _write_skill(rt.project, "wipe", "Dangerous cleanup", "SECRET-WIPE-STEPS")
        cfg = tmp_path / "config" / "opencode" / "opencode.json"
        config = json.loads(cfg.read_text())
        config["agent"] = {"careful": {"permission": {"skill": {"wipe": "deny"}}}}
        cfg.write_text(json.dumps(config))
        sid = (await rt.sessions.create(agent="careful")).id
        rt.provider.push(tool_call("s1", "skill", {"name": "deploy"}), tool_call("s2", "skill", {"name": "wipe"}),
                         text("ok"), text("ok"))
        await _prompt(rt, sid, "deploy it")
        baseline = rt.provider.requests[0].system[-1]
        assert "<available_skills>" in baseline and "deploy" in baseline and "Ship a release" in baseline
        assert "wipe" not in baseline and "SECRET" not in baseline
        tools = {p.id: p.state for m in await rt.sessions.context(sid) if m.type == "assistant"
                 for p in m.content if p.type == "tool"}
        assert "SECRET-DEPLOY-STEPS" in tools["s1"].content[0].text
        assert tools["s2"].status == "error" and "SECRET" not in tools["s2"].error.message
        await rt.sessions.switch_agent(sid, "build")  # build may use every skill: the guidance changes
        await _prompt(rt, sid, "again")
        [update] = _updates(rt.provider.requests[-1])
        assert "wipe" in update and "deploy" in update
        assert rt.provider.requests[-1].system[-1] == baseline  # the switch updates; the baseline stays


async def test_instruction_changes_never_wake_an_idle_session(tmp_path):
    async with harness(tmp_path) as rt:
        sid = (await rt.sessions.create()).id
        rt.provider.push(text("ok"))
        await _prompt(rt, sid, "one")
        before = await _log_types(rt, sid)
        await rt.entries.put(sid, "later", "only at the next boundary")
        (rt.project / "AGENTS.md").write_text("changed while idle")
        assert rt.execution.active() == [] and await _log_types(rt, sid) == before


async def test_moving_a_session_resets_the_checkpoint_to_a_fresh_baseline(tmp_path):
    from opencode_session.schema import events as ev
    from opencode_session.schema.common import LocationRef

    async with harness(tmp_path) as rt:
        other = tmp_path / "other"
        other.mkdir()
        (other / "AGENTS.md").write_text("Destination rules.")
        sid = (await rt.sessions.create()).id
        rt.provider.push(text("ok"), text("ok"))
        await _prompt(rt, sid, "here")
        await rt.store.append(ev.Moved(sessionID=sid, location=LocationRef(directory=str(other))))
        await _prompt(rt, sid, "there")
        first, second = rt.provider.requests
        assert _updates(second) == []  # a fresh baseline, not an update on top of the old one
        assert "Destination rules." in second.system[-1] and str(other) in second.system[-1]
        assert second.system[-1] != first.system[-1]


def _guidance(key: str, value: dict[str, str]):
    """A producer an extension adds: one source under `key` whose text the test changes between Steps."""

    async def produce(_boundary):
        async def load() -> str:
            return value["text"]

        return make(Source(key=key, encode=lambda v: v, decode=lambda v: v, load=load, baseline=lambda v: v,
                           update=lambda _prev, v: f"Changed: {v}"))

    return produce


async def test_added_sources_take_their_declared_positions_and_update_like_built_ins(tmp_path):
    mcp = {"text": "MCP guidance one."}
    sources = InstructionSources()
    sources.add("mcp", _guidance("mcp/github", mcp))
    sources.add("references", _guidance("references/docs", {"text": "Reference guidance."}))  # added later, earlier
    with pytest.raises(ValueError):
        sources.add("nowhere", _guidance("x/y", mcp))
    async with harness(tmp_path, sources=sources) as rt:
        sid = (await rt.sessions.create()).id
        await rt.entries.put(sid, "note", "an entry")
        rt.provider.push(text("ok"), text("ok"))
        await _prompt(rt, sid, "first")
        mcp["text"] = "MCP guidance two."
        await _prompt(rt, sid, "second")
    baseline = rt.provider.requests[0].system[-1]
    order = [baseline.index(part) for part in ("<env>", "Reference guidance.", "MCP guidance one.", "an entry")]
    assert order == sorted(order)
    assert _updates(rt.provider.requests[1]) == ["Changed: MCP guidance two."]
    assert rt.provider.requests[1].system == rt.provider.requests[0].system
