"""The README's Python snippets run as written (only the server's address is the test server's) against a
loopback provider, and print the answer."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import fake_openai as fake
from tests.support.cli import TIMEOUT, make_home
from tests.support.server import start_server

README = Path(__file__).resolve().parents[1] / "README.md"
DOCUMENTED_URL = "http://127.0.0.1:4096"
pytestmark = pytest.mark.timeout(240)  # a server and a Python process per snippet


def snippets() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


def test_the_readme_has_an_embedded_and_a_client_snippet():
    found = snippets()
    assert len(found) == 2
    assert "OpenCode(" in found[0] and "OpenCodeClient(" in found[1] and DOCUMENTED_URL in found[1]
    assert "auth=" in found[1] and "OPENCODE_SERVER_PASSWORD" in found[1]  # how the client sends the password


def test_the_client_snippet_without_its_password_is_refused(tmp_path, loop_provider):
    """The password the client snippet sends is what gets it in: the same server refuses a client without it."""
    home = make_home(tmp_path)
    home.configure(loop_provider)
    home.env["OPENCODE_SERVER_PASSWORD"] = "readme-snippet-secret"
    server = start_server(tmp_path, env=home.env, workdir=home.work)
    code = snippets()[1].replace(DOCUMENTED_URL, server.url)
    env = {k: v for k, v in home.env.items() if k != "OPENCODE_SERVER_PASSWORD"}
    try:
        done = subprocess.run([sys.executable, "-c", code], cwd=home.work, env=env, capture_output=True,
                              text=True, timeout=TIMEOUT, stdin=subprocess.DEVNULL)
    finally:
        assert server.stop() == 0, "".join(server.stderr_lines)
    assert done.returncode != 0 and "UnauthorizedError" in done.stderr, done.stderr


@pytest.mark.parametrize(("index", "password"), [(0, None), (1, None), (1, "readme-snippet-secret")],
                         ids=["embedded", "client", "client-with-password"])
def test_readme_snippet_runs_and_prints_the_answer(tmp_path, loop_provider, index, password):
    home = make_home(tmp_path)
    home.configure(loop_provider)
    if password is not None:  # the server requires it, and the client snippet sends it (auth=) from the environment
        home.env["OPENCODE_SERVER_PASSWORD"] = password
    code = snippets()[index]
    server = None
    if DOCUMENTED_URL in code:
        server = start_server(tmp_path, env=home.env, workdir=home.work)
        code = code.replace(DOCUMENTED_URL, server.url)
    loop_provider.enqueue(fake.completion(fake.text_deltas("The README ", "is short.")))
    try:
        done = subprocess.run([sys.executable, "-c", code], cwd=home.work, env=home.env, capture_output=True,
                              text=True, timeout=TIMEOUT, stdin=subprocess.DEVNULL)
    finally:
        if server is not None:
            assert server.stop() == 0, "".join(server.stderr_lines)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "The README is short.\n"
    assert loop_provider.requests[-1].json["messages"][-1]["content"] == "Summarise README.md"


def walk_through() -> str:
    blocks = [b for b in re.findall(r"```sh\n(.*?)```", README.read_text(), flags=re.S) if "/api/event" in b
              and "/prompt" in b]
    assert len(blocks) == 1, "the README has one curl walk-through"
    return blocks[0]


def test_the_curl_walk_through_runs_against_a_real_server(tmp_path, loop_provider):
    home = make_home(tmp_path)
    home.configure(loop_provider)
    script = walk_through()
    assert DOCUMENTED_URL in script and '{"prompt": {"text": ' in script
    server = start_server(tmp_path, env=home.env, workdir=home.work)
    loop_provider.enqueue(fake.completion(fake.text_deltas("The README ", "is short.")))
    try:
        # a failing step must not leave the background `curl` holding the output open
        script = "trap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n" + script.replace(DOCUMENTED_URL, server.url)
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", script],
                              cwd=home.work, env=home.env, capture_output=True, text=True, timeout=TIMEOUT,
                              stdin=subprocess.DEVNULL)
    finally:
        assert server.stop() == 0, "".join(server.stderr_lines)
    assert done.returncode == 0, repr(done.stdout + done.stderr)
    lines = done.stdout.splitlines()
    assert lines[0].startswith("msg_"), done.stdout  # the admitted prompt's ID
    assert "The README is short." in lines and int(lines[-1]) >= 1, done.stdout  # the answer; its live deltas
    assert loop_provider.requests[-1].json["messages"][-1]["content"] == "Summarise README.md"


def test_the_embedded_snippet_raises_when_the_execution_fails(tmp_path):
    # no model configured: the execution fails before any Step, and the snippet must not exit 0 in silence
    home = make_home(tmp_path)
    done = subprocess.run([sys.executable, "-c", snippets()[0]], cwd=home.work, env=home.env, capture_output=True,
                          text=True, timeout=TIMEOUT, stdin=subprocess.DEVNULL)
    assert done.returncode == 1 and done.stdout == "", done.stdout
    assert "SessionExecutionFailedError" in done.stderr and "provider.no-model" not in done.stdout
    assert "No model is configured" in done.stderr, done.stderr
