"""`ocs demo` with no configuration at all (and through `python3 run.py demo`, the README's first command): the
scripted model lists and reads files, edits one, runs it (answering
its own permission ask, visibly), answers from what the tools returned, and the end says how to use a real provider."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cli import TIMEOUT, make_home

# `ocs demo` and run.py start processes: slow on a busy machine
pytestmark = pytest.mark.timeout(240)

ROOT = Path(__file__).resolve().parents[2]


def check_demo(done: subprocess.CompletedProcess[str]) -> None:
    assert done.returncode == 0, done.stderr
    assert "> What is this project, and what is left to do in it?" in done.stderr
    assert "✓ glob **/*" in done.stderr and "✓ read README.md" in done.stderr and "✓ read greet.py" in done.stderr
    assert "00001| def greet(name: str) -> str:" in done.stderr  # the tools really ran on the scratch project
    assert "✓ edit greet.py" in done.stderr and "✓ bash python3 greet.py" in done.stderr
    assert "permission: bash wants to run python3 greet.py — allowed once (answered by the demo" in done.stderr
    assert "Bonjour, monde !" in done.stderr  # the command ran the edited file
    assert "Hello, world!\nBonjour, monde !" in done.stdout  # and the answer quotes its output
    answer = done.stdout
    assert "`greet.py` defines `greet()`" in answer and "1. greet in French too" in answer
    assert "OPENAI_API_KEY" in answer and "ocs run" in answer and '"baseURL"' in answer  # then: a real provider
    assert "\x1b" not in done.stdout + done.stderr and "Traceback" not in done.stderr


def test_demo_needs_no_configuration_and_leaves_nothing_behind(tmp_path):
    home = make_home(tmp_path)
    (tmp_path / "config" / "opencode").mkdir(parents=True)
    (tmp_path / "config" / "opencode" / "opencode.json").write_text('{"model": "broken/none"}')  # ignored
    home.env["TMPDIR"] = str(tmp_path / "tmp")
    (tmp_path / "tmp").mkdir()
    check_demo(home.run("demo"))
    assert list((tmp_path / "tmp").iterdir()) == []  # the scratch project is gone
    assert not home.db.exists()  # the user's own database is untouched


def test_readme_first_command_runs_the_demo(tmp_path):
    env = make_home(tmp_path).env
    done = subprocess.run([sys.executable, str(ROOT / "run.py"), "demo"], cwd=tmp_path, env=env, text=True,
                          capture_output=True, timeout=TIMEOUT * 3, stdin=subprocess.DEVNULL)
    check_demo(done)
    # the next steps are commands that work from here: through run.py, as the demo was started
    assert f"`python3 {ROOT / 'run.py'} ocs run --model openai/gpt-4.1" in done.stdout, done.stdout
    readme = (ROOT / "README.md").read_text()
    quick = readme[readme.index("## Quick start"):]
    commands = [line.split("#")[0].strip() for line in quick[quick.index("```sh"):].splitlines()[1:3]]
    assert commands == ["python3 run.py demo", "python3 run.py test"]


def _script(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


def test_next_steps_are_spelled_as_they_run_from_where_the_user_stands(tmp_path, monkeypatch):
    from opencode_session.cli.demo import next_steps
    from opencode_session.cli.invocation import ocs_command

    ours = _script(tmp_path / "venv" / "bin" / "ocs")
    cscope = _script(tmp_path / "usr" / "bin" / "ocs")  # Debian's /usr/bin/ocs is cscope's
    bins = (str(ours.parent), str(cscope.parent))
    monkeypatch.chdir(tmp_path)
    assert ocs_command(str(ours), {"PATH": bins[0]}) == "ocs"  # PATH finds this very program
    assert ocs_command(str(ours), {"PATH": f"{bins[1]}:{bins[0]}"}) == "./venv/bin/ocs"  # another `ocs` comes first
    assert ocs_command(str(ours), {"PATH": bins[1]}) == "./venv/bin/ocs"
    monkeypatch.chdir(tmp_path / "usr")
    assert ocs_command(str(ours), {"PATH": ""}) == str(ours)  # outside the working directory: as it is
    assert ocs_command(str(ours), {"OCS_LAUNCHER": "python3 run.py ocs"}) == "python3 run.py ocs"
    told = next_steps("python3 run.py ocs")
    assert "`python3 run.py ocs run --model openai/gpt-4.1" in told and "`python3 run.py ocs serve`" in told
    assert "`ocs " not in told


def test_the_demo_run_by_path_names_that_path(tmp_path):
    from tests.support.server import OCS

    home = make_home(tmp_path)
    home.env["PATH"] = "/usr/bin:/bin"  # no `ocs` of ours on PATH
    done = home.run("demo")
    assert done.returncode == 0, done.stderr
    assert f"`{OCS} run --model openai/gpt-4.1" in done.stdout and "`ocs run" not in done.stdout
