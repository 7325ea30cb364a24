"""OpenCode's interactive clients against `ocs serve`: the TUI (`opencode attach URL`) and its minimal interface
(`opencode attach --mini URL`) of OpenCode 1.18.33, each run under tmux, take a prompt, show the permission dialog
of a tool call, and run the tool once it is allowed from the keyboard."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.api.test_opencode_run_attach import _client_env, _serve, _skip, opencode  # noqa: F401 (a fixture)
from tests.support import fake_openai as fake

pytestmark = pytest.mark.timeout(300)  # the first run installs the CLI; the TUI takes seconds to start

SCREEN_TIMEOUT = 60.0  # how long a screen may take to show what is waited for (two cores shared by many)


class Terminal:
    """One program in a tmux session of a tmux server of its own, read back with capture-pane."""

    def __init__(self, tmux: str, command: list[str], cwd: Path, env: dict[str, str]) -> None:
        self.tmux = tmux
        self.socket = f"ocs-test-{uuid.uuid4().hex[:8]}"
        assignments = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items()
                               if k in ("HOME", "PATH", "TERM", "LANG") or k.startswith("XDG_"))
        line = f"cd {shlex.quote(str(cwd))} && env -i {assignments} {shlex.join(command)}; sleep 600"
        self._tmux("new-session", "-d", "-s", "main", "-x", "140", "-y", "45", line)

    def _tmux(self, *args: str) -> str:
        return subprocess.run([self.tmux, "-L", self.socket, *args], capture_output=True, text=True, timeout=30,
                              check=True).stdout

    def screen(self) -> str:
        return self._tmux("capture-pane", "-p", "-t", "main")

    def wait_for(self, text: str, timeout: float = SCREEN_TIMEOUT) -> str:
        """The screen once it shows `text` (the TUI offers nothing to wait on but its screen: polled to a deadline)."""
        deadline = time.monotonic() + timeout
        while True:
            shown = self.screen()
            if text in shown:
                return shown
            if time.monotonic() > deadline:
                raise AssertionError(f"the screen never showed {text!r}; it shows:\n{shown}")
            time.sleep(0.25)

    def type(self, text: str) -> None:
        """Type `text` and wait until it shows (keys arriving with it would be taken for a paste)."""
        self._tmux("send-keys", "-t", "main", "-l", text)
        self.wait_for(text)

    def press(self, key: str) -> None:
        self._tmux("send-keys", "-t", "main", key)

    def close(self) -> None:
        subprocess.run([self.tmux, "-L", self.socket, "kill-server"], capture_output=True, timeout=30)


@pytest.fixture
def tmux() -> str:
    found = shutil.which("tmux")
    if found is None:
        _skip("tmux is needed to drive OpenCode's TUI")
    assert found is not None
    return found


@pytest.fixture
def asking(tmp_path, loop_provider) -> Iterator[tuple[str, Path]]:
    """`ocs serve` whose bash tool asks first, with a model that runs `touch` and then says it did."""
    loop_provider.requests.clear()
    proc, work = _serve(tmp_path / "server", loop_provider, permission={"bash": "ask"})
    call = {"command": "touch made-by-tool.txt", "description": "Make a file"}
    loop_provider.enqueue(fake.completion(fake.tool_call_deltas(0, "call_1", "bash", json.dumps(call)),
                                          finish_reason="tool_calls"),
                          fake.completion(fake.text_deltas("Made it.")))
    try:
        yield proc.url, work
    finally:
        loop_provider.release_held()
        assert proc.stop() == 0, "".join(proc.stderr_lines)
    assert loop_provider.pending == 0, "a scripted provider answer was never requested"


@pytest.fixture
def terminal(tmux, tmp_path) -> Iterator[list[Terminal]]:
    opened: list[Terminal] = []
    yield opened
    for term in opened:
        term.close()


def _attach(terminal: list[Terminal], tmux: str, opencode: Path, url: str, work: Path, tmp_path: Path,  # noqa: F811
            *args: str) -> Terminal:
    term = Terminal(tmux, [str(opencode), "attach", url, *args], work, _client_env(tmp_path / "client"))
    terminal.append(term)
    return term


def test_the_tui_prompts_and_answers_a_permission_dialog(opencode, tmux, asking, terminal, tmp_path):  # noqa: F811
    url, work = asking
    tui = _attach(terminal, tmux, opencode, url, work, tmp_path)
    start = tui.wait_for("Ask anything")
    assert "Build · fake-model" in start  # the agent and model come from the server's config
    tui.type("make the file")
    tui.press("Enter")
    dialog = tui.wait_for("Permission required")
    assert "$ touch made-by-tool.txt" in dialog and "Allow once" in dialog
    assert not (work / "made-by-tool.txt").exists()
    tui.press("Enter")  # Allow once
    done = tui.wait_for("Made it.")
    assert "Permission required" not in done
    assert (work / "made-by-tool.txt").exists()


def test_attach_mini_prompts_and_answers_a_permission_dialog(opencode, tmux, asking, terminal, tmp_path):  # noqa: F811
    url, work = asking
    mini = _attach(terminal, tmux, opencode, url, work, tmp_path, "--mini")
    mini.wait_for("Ask anything")
    mini.type("make the file")
    mini.press("Enter")
    dialog = mini.wait_for("Permission required")
    assert "$ touch made-by-tool.txt" in dialog
    mini.press("Enter")  # Allow once
    done = mini.wait_for("Made it.")
    assert "(no output)" in done and (work / "made-by-tool.txt").exists()
