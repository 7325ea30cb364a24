"""The terminal view while a turn runs, on a pseudo-terminal read through a terminal emulator: the spinner turns
and the status line counts the seconds while the model has not answered yet, a running `bash` call's output
streams under it (bounded), the tokens of finished Steps are shown, and after Ctrl-C the partial answer is on
screen once."""

from __future__ import annotations

import json
import os

import anyio
import pexpect
import pytest

from tests.support import fake_openai as fake
from tests.support.cli import TIMEOUT
from tests.support.screen import screen_lines

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(180)]


async def held(script: fake.StreamScript) -> None:
    assert await anyio.to_thread.run_sync(script.held.wait, TIMEOUT), "the provider was never called"


def finish(child: pexpect.spawn) -> int:
    child.expect(pexpect.EOF)
    child.close()
    return child.exitstatus if child.exitstatus is not None else 128 + (child.signalstatus or 0)


async def test_the_spinner_turns_and_the_time_counts_before_the_first_token(home, provider):
    script = fake.completion(fake.text_deltas("the answer"), hold_after=0)
    provider.enqueue(script)
    child = home.spawn("run", "think first")
    try:
        await held(script)
        child.expect("working · 0s")
        child.expect("⠙", timeout=10)  # later frames of the dots: the spinner is not stuck on its first
        child.expect("⠧|⠇|⠏", timeout=10)
        child.expect(r"working · [1-9]\d*s", timeout=10)  # the seconds count while nothing else moves
    finally:
        script.release.set()
    assert finish(child) == 0
    assert "the answer" in screen_lines(child.logfile_read.getvalue())


async def test_bash_output_streams_while_the_command_runs_and_tokens_are_shown(home, provider, tmp_path):
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    command = f"for i in 1 2 3 4 5 6 7 8 9; do echo line-$i; done; read x < {gate}; echo after-the-gate"
    answer = fake.completion(fake.text_deltas("all done"), hold_after=1)
    provider.enqueue(fake.completion(fake.tool_call_deltas(0, "c1", "bash", json.dumps(
                         {"command": command, "description": "count"})), finish_reason="tool_calls",
                         usage=fake.usage_block(1200, 34)),
                     answer)
    child = home.spawn("run", "--yes", "count for me")
    try:
        child.expect("line-9")  # on screen while the command still waits at the gate
        screen = screen_lines(child.logfile_read.getvalue())
        assert not any("✓" in line for line in screen), screen  # the call has not settled
        shown = [line.strip() for line in screen]
        assert "line-4" in shown and "line-3" not in shown, screen  # its last lines only, under the spinner
        with open(gate, "w") as release:  # noqa: ASYNC230 - the fifo's reader is already waiting
            release.write("go\n")
        await held(answer)
        child.expect(r"1,2\d\d tokens")  # the first Step's tokens, while the answer is still being written
    finally:
        answer.release.set()
    assert finish(child) == 0
    screen = screen_lines(child.logfile_read.getvalue())
    assert any(line.startswith("✓ bash") for line in screen)
    assert "all done" in screen


async def test_after_ctrl_c_the_partial_answer_is_on_screen_once(home, provider):
    script = fake.completion(fake.text_deltas("A finished paragraph.\n\n", "an unfinished one"), hold_after=3)
    provider.enqueue(script)
    child = home.spawn("run", "a long task")
    await held(script)
    child.expect("unfinished")
    child.sendintr()
    child.expect("interrupting")
    assert finish(child) == 130
    screen = screen_lines(child.logfile_read.getvalue())
    assert sum("an unfinished one" in line for line in screen) == 1, screen
    assert sum("A finished paragraph." in line for line in screen) == 1, screen
