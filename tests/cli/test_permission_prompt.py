"""Permission asks and questions during `ocs run`: on a pseudo-terminal the user answers with single keys (allow
once, allow always, reject with or without feedback; pick an option, type an answer, Esc dismisses); without a
terminal `--yes`/`--no` answer, and by default both are declined."""

from __future__ import annotations

import json

import pexpect
import pytest

from tests.support import fake_openai as fake
from tests.support.cli import session_state

# each test starts `ocs` processes: slow on a busy machine
pytestmark = [pytest.mark.anyio, pytest.mark.timeout(240)]

PROMPT = "bash wants to run echo hi"


@pytest.fixture
def asking(home, provider):
    """A home whose configuration asks before every bash command."""
    home.configure(provider, permission={"bash": "ask"})
    return home


def bash_call(call_id: str = "call_1", command: str = "echo hi") -> fake.Script:
    arguments = json.dumps({"command": command})
    return fake.completion(fake.tool_call_deltas(0, call_id, "bash", arguments), finish_reason="tool_calls")


def finish(child: pexpect.spawn) -> int:
    child.expect(pexpect.EOF)
    child.close()
    return child.exitstatus if child.exitstatus is not None else 128 + (child.signalstatus or 0)


def tool_results(provider) -> list[str]:
    """The tool results the model was sent in its last request."""
    return [m["content"] for m in provider.requests[-1].json["messages"] if m["role"] == "tool"]


async def test_allow_once_runs_the_command(asking, provider):
    provider.enqueue(bash_call(), fake.completion(fake.text_deltas("It printed hi.")))
    child = asking.spawn("run", "say hi")
    child.expect(PROMPT)
    child.expect(r"\[o\] allow once")
    child.send("o")
    assert finish(child) == 0
    screen = child.logfile_read.getvalue()
    assert "allowed once" in screen and "It printed hi." in screen
    assert "hi" in tool_results(provider)[0]
    _, events, _ = await session_state(asking.db)
    assert [e.type for e in events if e.type in ("session.tool.success", "session.tool.failed")] == [
        "session.tool.success"]


async def test_allow_always_is_not_asked_again(asking, provider):
    provider.enqueue(bash_call("call_1"), bash_call("call_2"), fake.completion(fake.text_deltas("Twice.")))
    child = asking.spawn("run", "say hi twice")
    child.expect(PROMPT)
    child.send("a")
    assert finish(child) == 0  # a second prompt would wait for a key until the timeout
    screen = child.logfile_read.getvalue()
    assert screen.count("allowed always") == 1 and "Twice." in screen
    _, events, _ = await session_state(asking.db)
    assert sum(e.type == "session.tool.success" for e in events) == 2


async def test_reject_with_feedback_reaches_the_model_and_the_turn_goes_on(asking, provider):
    provider.enqueue(bash_call(), fake.completion(fake.text_deltas("Understood, no commands.")))
    child = asking.spawn("run", "say hi")
    child.expect(PROMPT)
    child.send("r")
    child.expect("feedback for the model")
    child.send("do not run commands\r")
    assert finish(child) == 0
    assert "Understood, no commands." in child.logfile_read.getvalue()
    result = tool_results(provider)[0]
    assert "rejected" in result and "do not run commands" in result
    _, events, _ = await session_state(asking.db)
    assert "session.tool.failed" in [e.type for e in events]


async def test_reject_without_feedback_stops_the_turn(asking, provider):
    provider.enqueue(bash_call())
    child = asking.spawn("run", "say hi")
    child.expect(PROMPT)
    child.send("r")
    child.expect("feedback for the model")
    child.send("\r")
    finish(child)
    assert "rejected" in child.logfile_read.getvalue()
    assert len(provider.requests) == 1  # the model was not called again
    _, events, _ = await session_state(asking.db)
    assert "session.tool.failed" in [e.type for e in events]
    assert "session.tool.success" not in [e.type for e in events]


async def test_yes_allows_once_without_a_terminal(asking, provider):
    provider.enqueue(bash_call(), fake.completion(fake.text_deltas("done")))
    done = asking.run("run", "--yes", "say hi")
    assert done.returncode == 0, done.stderr
    assert f"permission: {PROMPT} — allowed once (--yes)" in done.stderr
    assert "hi" in tool_results(provider)[0] and done.stdout.endswith("done\n")


async def test_no_rejects(asking, provider):
    provider.enqueue(bash_call())
    done = asking.run("run", "--no", "say hi")
    assert done.returncode == 1, done.stderr  # a failure to report, not a Ctrl-C (130)
    assert f"permission: {PROMPT} — rejected (--no)" in done.stderr
    assert len(provider.requests) == 1
    _, events, _ = await session_state(asking.db)
    assert "session.tool.success" not in [e.type for e in events]


async def test_without_a_terminal_an_ask_is_rejected_and_said_so(asking, provider):
    provider.enqueue(bash_call())
    done = asking.run("run", "say hi")
    assert done.returncode == 1, done.stderr  # declined for want of a terminal: exit 1, not 130
    assert f"permission: {PROMPT} — rejected (no terminal to ask on; --yes allows)" in done.stderr
    assert "error: permission.declined" in done.stderr
    assert len(provider.requests) == 1
    _, events, _ = await session_state(asking.db)
    assert "session.tool.success" not in [e.type for e in events]


def test_yes_and_no_exclude_each_other(asking):
    done = asking.run("run", "--yes", "--no", "x")
    assert done.returncode == 2 and "exclude each other" in done.stderr


async def test_interactive_mode_answers_with_the_keys_and_keeps_the_line_empty(asking, provider):
    provider.enqueue(bash_call(), fake.completion(fake.text_deltas("It printed hi.")))
    child = asking.spawn("run", "-i", "say hi")
    child.expect(PROMPT)
    child.send("o")  # taken by the permission prompt, not typed into the steer/queue line
    child.expect("It printed hi.")
    child.expect("Enter sends")  # the turn is over: the line is back
    child.send("\x04")  # Ctrl-D quits only on an empty line
    assert finish(child) == 0
    _, events, _ = await session_state(asking.db)
    assert "session.tool.success" in [e.type for e in events]


def question_call(multiple: bool = False) -> fake.Script:
    arguments = json.dumps({"questions": [{
        "question": "Which greeting should I add?", "header": "Greeting", "multiple": multiple,
        "options": [{"label": "French", "description": "Bonjour"}, {"label": "German", "description": "Hallo"}]}]})
    return fake.completion(fake.tool_call_deltas(0, "call_q", "question", arguments), finish_reason="tool_calls")


async def test_question_is_answered_by_a_key(home, provider):
    provider.enqueue(question_call(), fake.completion(fake.text_deltas("German it is.")))
    child = home.spawn("run", "add a greeting")
    child.expect("Which greeting should I add?")
    child.expect(r"\[Esc\] dismiss")
    child.send("2")
    assert finish(child) == 0
    assert "German it is." in child.logfile_read.getvalue()
    assert '"Which greeting should I add?" = "German"' in tool_results(provider)[0]


async def test_question_takes_an_answer_typed_in_the_users_words(home, provider):
    provider.enqueue(question_call(), fake.completion(fake.text_deltas("Spanish then.")))
    child = home.spawn("run", "add a greeting")
    child.expect(r"\[t\] type an answer")
    child.send("t")
    child.expect("your answer")
    child.send("Spanish\r")
    assert finish(child) == 0
    assert '= "Spanish"' in tool_results(provider)[0]


async def test_question_dismissed_with_esc_stops_the_turn(home, provider):
    provider.enqueue(question_call())
    child = home.spawn("run", "add a greeting")
    child.expect(r"\[Esc\] dismiss")
    child.send("\x1b")
    finish(child)
    assert "dismissed" in child.logfile_read.getvalue()
    assert len(provider.requests) == 1
    _, events, _ = await session_state(home.db)
    assert "session.tool.failed" in [e.type for e in events]


async def test_question_without_a_terminal_is_dismissed_or_with_yes_takes_the_first_option(home, provider):
    provider.enqueue(question_call())
    done = home.run("run", "add a greeting")
    assert "question: Greeting — dismissed (no terminal to ask on; --yes allows)" in done.stderr
    assert len(provider.requests) == 1
    provider.enqueue(question_call(), fake.completion(fake.text_deltas("French it is.")))
    done = home.run("run", "--yes", "add a greeting")
    assert done.returncode == 0, done.stderr
    assert "question: Greeting — answered [['French']] (--yes)" in done.stderr
    assert '= "French"' in tool_results(provider)[0]
