"""`python3 run.py serve|ocs …` becomes `ocs` itself once the venv is ready (os.execv): a real SIGTERM or SIGINT sent
to the process run.py started stops the server (no orphan left holding the database, no traceback from run.py), and
Ctrl-C on a terminal reaches interactive `ocs` alone."""

from __future__ import annotations

import contextlib
import io
import os
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import pexpect
import pytest

from opencode_session.core.store.sqlite.lock import DatabaseLock
from tests.support import fake_openai as fake
from tests.support.cli import TIMEOUT
from tests.support.server import isolated_env, start_server

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(180)]

RUN_PY = str(Path(__file__).resolve().parents[2] / "run.py")


def command_line(pid: int) -> list[str]:
    return [part.decode() for part in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0") if part]


def database_is_free(db: Path) -> bool:
    lock = DatabaseLock(db)
    try:
        lock.acquire()
    except Exception:
        return False
    lock.release()
    return True


@pytest.mark.skipif(sys.platform != "linux", reason="reads the process's command line from /proc")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_to_run_py_serve_reaches_ocs_serve_itself(tmp_path, sig):
    srv = start_server(tmp_path, program=(sys.executable, RUN_PY, "serve"))
    pid = srv.proc.pid
    children = Path(f"/proc/{pid}/task/{pid}/children")
    spawned = [int(c) for c in children.read_text().split()] if children.exists() else []
    try:
        line = command_line(pid)
        assert Path(line[1]).name == "ocs" and line[2] == "serve", line  # the process run.py started is ocs now
        assert not database_is_free(Path(srv.db))
        code = srv.stop(sig)
        said = "".join(srv.stderr_lines)
        assert code == 0, said
        assert "Traceback" not in said and "KeyboardInterrupt" not in said
        assert database_is_free(Path(srv.db))  # nothing left behind holding it
    finally:
        srv.proc.kill()
        for child in spawned:  # a wrapper's orphan, were run.py still one
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGKILL)


def test_run_py_ocs_passes_the_exit_code_through(tmp_path):
    done = subprocess.run([sys.executable, RUN_PY, "ocs", "--no-such-option"], env=isolated_env(tmp_path),
                          capture_output=True, text=True, timeout=TIMEOUT)
    assert done.returncode == 2 and "Traceback" not in done.stderr


async def test_ctrl_c_under_run_py_interrupts_the_turn_and_interactive_mode_carries_on(home, provider):
    script = fake.completion(fake.text_deltas("working", " still"), hold_after=2)
    provider.enqueue(script, fake.completion(fake.text_deltas("carried on")))
    child = pexpect.spawn(sys.executable, [RUN_PY, "ocs", "run", "-i"], cwd=str(home.work), env=home.env,
                          encoding="utf-8", timeout=TIMEOUT, dimensions=(40, 100))
    child.logfile_read = io.StringIO()
    try:
        child.expect("Enter sends")
        child.send("a long task\r")
        assert await anyio.to_thread.run_sync(script.held.wait, TIMEOUT), "the provider was never called"
        child.sendintr()  # the terminal signals its whole foreground process group
        child.expect("interrupted: send a message to carry on")
        child.expect("Enter sends")
        child.send("carry on\r")
        child.expect("carried on")
        child.expect("Enter sends")
        child.send("\x04")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0, child.logfile_read.getvalue()
    assert "Traceback" not in child.logfile_read.getvalue()


def test_the_first_run_installs_the_program_alone_and_test_adds_the_tools_in_place(tmp_path, monkeypatch, capsys):
    """What ensure_venv asks pip for (the real installs: tests/test_packaging.py); pip's own progress shows."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("run_py_under_test", RUN_PY)
    assert spec is not None and spec.loader is not None
    run_py = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(run_py)
    venv = tmp_path / ".venv"
    monkeypatch.setattr(run_py, "VENV", venv)
    monkeypatch.setattr(run_py, "PY", venv / "bin" / "python")
    monkeypatch.setattr(run_py, "STAMP", venv / ".lock-stamp")
    calls: list[list[str]] = []

    def check_call(argv: list[str]) -> int:
        calls.append(argv)
        (venv / "bin").mkdir(parents=True, exist_ok=True)
        (venv / "bin" / "python").touch()  # what `python -m venv` would leave
        return 0

    monkeypatch.setattr(run_py.subprocess, "check_call", check_call)
    lock = str(Path(RUN_PY).with_name("requirements.lock"))
    run_py.ensure_venv()  # demo, serve, ocs
    said = capsys.readouterr().err
    assert "Preparing .venv/ from requirements.lock (the first run takes about half a minute" in said
    assert ".venv/ is ready." in said
    assert [argv for argv in calls if "pip" in argv] == [
        [str(venv / "bin" / "python"), "-m", "pip", "install", "--disable-pip-version-check", "-c", lock, "-e",
         str(Path(RUN_PY).parent)]]  # the project's declared dependencies, at the lock's pins
    calls.clear()
    run_py.ensure_venv()  # the stamp matches: nothing again, said or run
    assert calls == [] and capsys.readouterr().err == ""

    run_py.ensure_venv(everything=True)  # test, bench: the same venv gains all the lock pins
    said = capsys.readouterr().err
    assert said.startswith("Adding the test tools to .venv/ from requirements.lock")
    assert not any("venv" in argv for argv in calls)  # no second venv
    pips = [argv for argv in calls if "pip" in argv]
    assert [argv[5:] for argv in pips] == [["-r", lock], ["--no-deps", "-e", str(Path(RUN_PY).parent)]]
    assert not any("-q" in argv or "--quiet" in argv for argv in pips)
    calls.clear()
    run_py.ensure_venv(everything=True)
    run_py.ensure_venv()  # a venv with everything serves the program as it is
    assert calls == [] and capsys.readouterr().err == ""
