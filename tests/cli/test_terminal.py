"""`ocs` on a pseudo-terminal, as a person uses it: markdown rendering, Ctrl-C (clean interrupt, exit 130, the
session resumable; a second Ctrl-C quits at once), and interactive mode's Enter (steer) and Tab (queue)."""

from __future__ import annotations

import os
import signal
import time

import anyio
import pexpect
import pytest

from tests.support import fake_openai as fake
from tests.support.cli import TIMEOUT, make_home, session_state, types
from tests.support.server import start_server

# each test starts `ocs` processes (and some a server): slow on a busy machine
pytestmark = [pytest.mark.anyio, pytest.mark.timeout(240)]


async def held(script: fake.StreamScript) -> None:
    """Until the provider has paused mid-answer (the turn is streaming)."""
    assert await anyio.to_thread.run_sync(script.held.wait, TIMEOUT), "the provider was never called"


def finish(child: pexpect.spawn, timeout: float = TIMEOUT) -> int:
    child.expect(pexpect.EOF, timeout=timeout)
    child.close()
    return child.exitstatus if child.exitstatus is not None else 128 + (child.signalstatus or 0)


async def test_ctrl_c_interrupts_cleanly_and_continue_carries_on(home, provider):
    script = fake.completion(fake.text_deltas("Here is **bold** progress.\n\n", "Still going"), hold_after=3)
    provider.enqueue(script)
    child = home.spawn("run", "a long task")
    await held(script)
    child.expect("progress")  # finished paragraphs are on screen while the turn streams
    child.sendintr()
    pressed = time.monotonic()
    child.expect("interrupting")
    assert finish(child) == 130
    took = time.monotonic() - pressed
    assert took < 10, f"Ctrl-C took {took:.1f}s to end the run"
    screen = child.logfile_read.getvalue()
    assert "\x1b[1mbold" in screen and "**" not in screen  # rendered as markdown, not printed raw
    _, events, messages = await session_state(home.db)
    assert types(events)[-1] == "session.execution.interrupted"
    assert [e.data.reason for e in events if e.type == "session.execution.interrupted"] == ["user"]
    assistant = [m for m in messages if m.type == "assistant"][0]
    assert assistant.error is not None and assistant.error.type == "aborted"

    provider.enqueue(fake.completion(fake.text_deltas("carried on")))
    done = home.run("run", "--continue", "carry on")
    assert done.returncode == 0 and done.stdout == "carried on\n", done.stderr
    sent = provider.requests[-1].json["messages"]
    assert [m["content"] for m in sent if m["role"] == "user"] == ["a long task", "carry on"]
    sessions, _, _ = await session_state(home.db)
    assert len(sessions) == 1


async def test_second_ctrl_c_quits_at_once_when_the_interrupt_hangs(tmp_path, provider):
    home = make_home(tmp_path)
    home.configure(provider)
    srv = start_server(tmp_path, env=home.env)
    script = fake.completion(fake.text_deltas("slow"), hold_after=2)
    provider.enqueue(script)
    child = home.spawn("run", "--attach", srv.url, "x")
    try:
        await held(script)
        os.kill(srv.proc.pid, signal.SIGSTOP)  # the server stops answering: the interrupt cannot complete
        child.sendintr()
        child.expect("Ctrl-C again")
        child.sendintr()
        pressed = time.monotonic()
        assert finish(child, timeout=8) == 130  # well before the 10 s an unanswered interrupt is given
        assert time.monotonic() - pressed < 8
    finally:
        os.kill(srv.proc.pid, signal.SIGCONT)
        script.release.set()
        assert srv.stop() == 0, "".join(srv.stderr_lines)


async def test_interactive_enter_steers_and_tab_queues(home, provider):
    first = fake.completion(fake.tool_call_deltas(0, "call_1", "read", '{"path": "notes.txt"}'),
                            finish_reason="tool_calls", hold_after=1)
    provider.enqueue(first, fake.completion(fake.text_deltas("steered answer")),
                     fake.completion(fake.text_deltas("queued answer")))
    child = home.spawn("run", "-i")
    child.expect("Enter sends")
    child.send("read the notes\r")
    await held(first)
    child.send("also this")
    child.expect("also this")
    child.send("\r")
    child.expect("steering the running turn")  # admitted while the first Step streams
    child.send("later please")
    child.expect("later please")
    child.send("\t")
    child.expect("queued until the turn is done")
    first.release.set()
    child.expect("queued answer")
    child.expect("Enter sends")  # back at the prompt
    child.send("\x04")  # Ctrl-D
    assert finish(child) == 0

    assert len(provider.requests) == 3
    users = [[m["content"] for m in r.json["messages"] if m["role"] == "user"] for r in provider.requests]
    assert users[1] == ["read the notes", "also this"]  # the steer joined the running turn after the tool
    assert users[2] == ["read the notes", "also this", "later please"]  # the queued one waited for it to end
    _, events, _ = await session_state(home.db)
    admitted = [e.data.input.delivery for e in events if e.type == "session.input.admitted"]
    assert admitted == ["steer", "steer", "queue"]
    assert types(events).count("session.execution.started") == 1


def test_ocs_alone_is_interactive_and_ctrl_c_at_an_empty_prompt_quits(home):
    child = home.spawn()
    child.expect("Enter sends")
    child.send("half a thought")
    child.expect("half a thought")  # read by ocs: a Ctrl-C flushes whatever the terminal has not handed over yet
    child.sendintr()  # clears the line
    child.expect("Enter sends")
    child.sendintr()  # nothing typed: quit
    assert finish(child) == 130


async def test_a_slash_command_in_interactive_mode_runs_as_its_prompt(home, provider):
    folder = home.work / ".opencode" / "command"
    folder.mkdir(parents=True)
    (folder / "greet.md").write_text("Say hello to $ARGUMENTS.\n")
    provider.enqueue(fake.completion(fake.text_deltas("Hello there")))
    child = home.spawn("run", "-i")
    child.expect("Enter sends")
    child.send("/nope\r")
    child.expect("no command named 'nope'")
    child.send("/greet Ada Lovelace\r")
    child.expect("Hello there")
    child.expect("Enter sends")
    child.send("\x04")
    assert finish(child) == 0
    assert provider.requests[0].json["messages"][-1] == {"role": "user", "content": "Say hello to Ada Lovelace."}
