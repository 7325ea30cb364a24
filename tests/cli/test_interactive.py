"""Interactive mode's built-in commands, driven on a pseudo-terminal as a user types them: `/help`, Tab cycling
the agents, `/agent`, `/models`, `/compact`, `/new` and `/sessions`, each acting on the session it names."""

from __future__ import annotations

import pytest

from tests.cli.test_terminal import finish, held
from tests.support import fake_openai as fake
from tests.support.cli import Home, session_state

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(240)]


async def test_help_lists_every_builtin_and_a_custom_command(home: Home, provider):
    (home.work / ".opencode" / "command").mkdir(parents=True)
    (home.work / ".opencode" / "command" / "review.md").write_text(
        "---\ndescription: Review the changes\n---\nReview $ARGUMENTS\n")
    child = home.spawn("run", "-i")
    child.expect("Enter sends")
    child.send("/help\r")
    for listed in ("/models", "/agent", "/sessions", "/new", "/compact", "/undo", "/redo", "/review",
                   "Review the changes", "Tab queues while a turn runs, cycles agents between turns"):
        child.expect_exact(listed)
    child.send("\x04")
    assert finish(child) == 0
    assert provider.requests == []  # nothing was sent to the model


async def test_tab_agent_and_models_switch_the_session(home: Home, provider):
    provider.enqueue(fake.completion(fake.text_deltas("Hi there.")))
    child = home.spawn("run", "-i", "hello")
    child.expect("Hi there.")
    child.expect("Enter sends")
    child.send("\t")  # an empty line between turns: the next primary agent
    child.expect_exact("agent: plan")
    child.send("\t")
    child.expect_exact("agent: build")
    child.send("\t")
    child.expect_exact("agent: plan")
    child.send("/agent\r")
    child.expect_exact("● plan")
    child.send("/agent nope\r")
    child.expect_exact("no agent named 'nope'")
    child.send("/models\r")
    child.expect_exact("  loop/fake-model")
    child.expect_exact("  loop/other-model")
    child.expect_exact("no model chosen: the session uses the configured default")
    child.send("/models loop/other-model\r")
    child.expect_exact("model: loop/other-model")
    child.send("/models\r")
    child.expect_exact("● loop/other-model")
    child.send("/models nowhere/none\r")
    child.expect("nowhere/none")  # a model the configuration does not declare is refused, said in one line
    provider.enqueue(fake.completion(fake.text_deltas("Planned.")))
    child.send("make a plan\r")
    child.expect("Planned.")
    child.expect("Enter sends")
    child.send("\x04")
    assert finish(child) == 0
    sessions, _, _ = await session_state(home.db)
    assert len(sessions) == 1 and sessions[0].agent == "plan" and sessions[0].model.id == "other-model"
    planned = [r for r in provider.requests if "make a plan" in r.raw.decode()]
    assert [r.json["model"] for r in planned] == ["other-model"]  # the prompt after the switch used it


async def test_compact_new_and_sessions(home: Home, provider):
    # a known window and a recent tail of one token: a single turn is enough to summarise
    limit = {"limit": {"context": 32000, "output": 4000}}
    options = {"baseURL": provider.base_url, "apiKey": "test-key"}
    home.configure(provider, compaction={"tokens": 1}, provider={"loop": {
        "npm": "@ai-sdk/openai-compatible", "options": options, "models": {"fake-model": limit}}})
    provider.enqueue(fake.completion(fake.text_deltas("First answer.")))
    child = home.spawn("run", "-i", "first")
    child.expect("First answer.")
    child.expect("Enter sends")
    # the loopback provider answers the summary request with a valid summary of its own
    child.send("/compact\r")
    child.expect_exact("compacted: the session goes on from the summary")
    child.send("/new\r")
    child.expect(r"new session (ses_\w+)")
    fresh = child.match.group(1)
    child.send("/compact\r")  # a new session has nothing to summarise
    child.expect_exact("not compacted: nothing older than the recent turns")
    child.send("/sessions\r")
    child.expect_exact("● 1. ")
    child.expect(r"2\. .*\((ses_\w+)\)")
    first = child.match.group(1)
    child.send("/sessions nope\r")
    child.expect("nope")  # an unknown session is said, and the current one stays
    child.send("/sessions 2\r")
    child.expect_exact(f"({first})")
    provider.enqueue(fake.completion(fake.text_deltas("Carried on.")))
    child.send("carry on\r")
    child.expect("Carried on.")
    child.expect("Enter sends")
    child.send("\x04")
    assert finish(child) == 0
    _, events, messages = await session_state(home.db, first)
    assert "session.compaction.ended" in [e.type for e in events]
    assert [m.text for m in messages if m.type == "user"] == ["first", "carry on"]
    _, _, fresh_messages = await session_state(home.db, fresh)
    assert [m.type for m in fresh_messages] == []


async def test_builtins_wait_for_the_turn_to_end(home: Home, provider):
    script = fake.completion(fake.text_deltas("Working", " on it."), hold_after=1)
    provider.enqueue(script)
    child = home.spawn("run", "-i", "a long task")
    await held(script)
    child.send("/new\r")
    child.expect_exact("/new works between turns")
    script.release.set()
    child.expect("on it.")
    child.expect("Enter sends")
    child.send("\x04")
    assert finish(child) == 0
    sessions, _, _ = await session_state(home.db)
    assert len(sessions) == 1
