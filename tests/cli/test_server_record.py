"""While `ocs serve` has a SQLite database open, the local commands on that database (`ocs run`, `sessions`, `show`,
`stats`, and `ocs` alone) talk to it as with `--attach`, saying so in one line; it records where it listens beside
the database (private, no secret in it, gone once it stops), asks for the password its server requires, and a record
left by a dead server, or a server that does not answer, changes nothing."""

from __future__ import annotations

import json
import signal
import stat
import subprocess
import sys

import pexpect
import pytest

from tests.support import fake_openai as fake
from tests.support.cli import TIMEOUT, Home
from tests.support.server import OCS, ServerProcess, start_server

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(240)]


def using(srv: ServerProcess) -> str:
    return f"using the server at {srv.url} (pid {srv.proc.pid}), which has this database open"


def said_once(stderr: str, line: str) -> None:
    assert stderr.splitlines().count(line) == 1, stderr


def with_password(home: Home, password: str, *args: str) -> subprocess.CompletedProcess[str]:
    """`ocs ARGS` as `home.run` does, with OPENCODE_SERVER_PASSWORD set."""
    return subprocess.run([OCS, *args], cwd=home.work, env={**home.env, "OPENCODE_SERVER_PASSWORD": password},
                          input="", capture_output=True, text=True, timeout=TIMEOUT)


def test_local_commands_talk_to_the_server_that_has_the_default_database_open(home: Home, provider):
    srv = start_server(home.root, env=home.env, workdir=home.work, default_paths=True)
    try:
        record = home.db.with_name("sessions.db.server")
        assert stat.S_IMODE(record.stat().st_mode) == 0o600
        assert json.loads(record.read_text()) == {"pid": srv.proc.pid, "url": srv.url, "username": None}

        provider.enqueue(fake.completion(fake.text_deltas("Served", " answer.")))
        ran = home.run("run", "hello", "server")
        assert ran.returncode == 0, ran.stderr
        assert ran.stdout == "Served answer.\n"
        said_once(ran.stderr, using(srv))
        assert len(provider.requests) == 1

        listed = home.run("sessions")
        assert listed.returncode == 0, listed.stderr
        said_once(listed.stderr, using(srv))
        [header, row] = listed.stdout.splitlines()
        sid = row.split("\t")[0]
        assert header.startswith("id") and sid.startswith("ses")

        shown = home.run("show", sid)
        assert shown.returncode == 0, shown.stderr
        said_once(shown.stderr, using(srv))
        assert "> hello server" in shown.stdout and "Served answer." in shown.stdout

        stats = home.run("stats")
        assert stats.returncode == 0, stats.stderr
        said_once(stats.stderr, using(srv))
        assert stats.stdout.startswith("Usage, all time (UTC): 1 session created"), stats.stdout
        assert "in use by" not in ran.stderr + listed.stderr + shown.stderr + stats.stderr

        provider.enqueue(fake.completion(fake.text_deltas("Interactive answer.")))
        child = home.spawn()  # `ocs` alone: interactive mode on a terminal
        try:
            child.expect_exact(f"using the server at {srv.url} (pid {srv.proc.pid})")
            child.expect("Enter sends")
            child.send("and interactively\r")
            child.expect_exact("Interactive answer.")
            child.expect("Enter sends")
            child.send("\x04")
            child.expect(pexpect.EOF)
        finally:
            child.close(force=True)
        assert child.exitstatus == 0, child.logfile_read.getvalue()
    finally:
        assert srv.stop() == 0, "".join(srv.stderr_lines)
    assert not record.exists()  # a clean stop takes the record along
    local = home.run("sessions")
    assert local.returncode == 0 and "using the server" not in local.stderr, local.stderr
    assert sid in local.stdout  # the same database, opened by the command itself


def test_a_given_db_whose_server_requires_a_password_says_how_to_give_it(home: Home):
    db = home.root / "elsewhere" / "team.db"
    srv = start_server(home.root, env={**home.env, "OPENCODE_SERVER_PASSWORD": "s3cret-pass"}, db=db,
                       workdir=home.work, args=["--mkdir"])
    try:
        record = db.with_name("team.db.server")
        assert "s3cret-pass" not in record.read_text()  # nothing in the record is a secret
        assert json.loads(record.read_text())["username"] == "opencode"

        asked = home.run("sessions", "--db", str(db))
        assert asked.returncode == 1
        assert asked.stderr.splitlines() == [
            f"ocs: the database {db} is in use by the server at {srv.url} (pid {srv.proc.pid}), which requires a "
            "password: set OPENCODE_SERVER_PASSWORD to its password (user opencode; OPENCODE_SERVER_USERNAME if "
            "another) to talk to it, as with --attach"]

        wrong = with_password(home, "guess", "sessions", "--db", str(db))
        assert wrong.returncode == 1 and "which refused the password in OPENCODE_SERVER_PASSWORD" in wrong.stderr

        given = with_password(home, "s3cret-pass", "sessions", "--db", str(db))
        assert given.returncode == 0, given.stderr
        said_once(given.stderr, using(srv))
        assert given.stdout.splitlines()[0].startswith("id")
    finally:
        assert srv.stop() == 0, "".join(srv.stderr_lines)
    assert not record.exists()


def test_a_server_that_does_not_answer_is_refused_as_before(home: Home):
    srv = start_server(home.root, env=home.env, workdir=home.work, default_paths=True)
    try:
        srv.proc.send_signal(signal.SIGSTOP)  # alive, holding the database, answering nothing
        try:
            stuck = home.run("sessions")
        finally:
            srv.proc.send_signal(signal.SIGCONT)
        assert stuck.returncode == 1
        assert stuck.stderr.startswith(f"ocs: The database {home.db} is in use by process {srv.proc.pid}"), \
            stuck.stderr
        assert "using the server" not in stuck.stderr
    finally:
        assert srv.stop() == 0, "".join(srv.stderr_lines)


def test_a_record_left_by_a_dead_server_is_ignored(home: Home, provider):
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait(timeout=60)  # its pid is now no process's
    home.db.parent.mkdir(parents=True, exist_ok=True)
    record = home.db.with_name("sessions.db.server")
    record.write_text(json.dumps({"pid": gone.pid, "url": "http://127.0.0.1:9", "username": None}))
    provider.enqueue(fake.completion(fake.text_deltas("Local answer.")))
    ran = home.run("run", "hi")
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout == "Local answer.\n" and "using the server" not in ran.stderr
    listed = home.run("sessions")
    assert listed.returncode == 0 and len(listed.stdout.splitlines()) == 2, listed.stdout + listed.stderr
