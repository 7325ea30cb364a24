"""`ocs sessions`, `ocs show` and `ocs stats` on a local database that no process holds read it read-only and
import no server, runtime or network client (cli/local.py); they print what the long way through the embedded host
prints, create no database that does not exist, and leave a database another command holds to the long way."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from opencode_session.core.store.sqlite.lock import DatabaseLock
from tests.support import fake_openai as fake
from tests.support.cli import TIMEOUT, Home
from tests.support.server import start_server

pytestmark = pytest.mark.timeout(240)

HEAVY = ("opencode_session.server", "opencode_session.sdk", "opencode_session.core.runtime",
         "opencode_session.core.execution", "opencode_session.client.generated", "opencode_session.client.runtime")
# `ocs ARGS` in process, then the heavy modules it loaded, as a JSON list on the last line of stderr
PROBE = f"""
import json, sys
from opencode_session.cli.main import dispatch
try:
    code = dispatch(sys.argv[1:])
finally:
    sys.stdout.flush()
    heavy = sorted(m for m in sys.modules if m.startswith({HEAVY!r}))
    print(json.dumps(heavy), file=sys.stderr)
sys.exit(code)
"""
# the long way the commands took before they had a short one: through the embedded host (or a server)
LONG_WAY = """
import sys
from pathlib import Path
from opencode_session.cli import inspect, main, manage
what, db, arg, fmt = sys.argv[1:]
db, cwd = Path(db), Path.cwd()
if what == "sessions":
    code = main._finish(lambda: inspect.list_sessions(None, db, cwd, 30, fmt == "json"))
elif what == "show":
    code = main._finish(lambda: inspect.show_session(None, db, cwd, arg, fmt == "json"))
else:
    code = main._finish_with(lambda: manage.stats_command(None, db, cwd, None, arg, None))
sys.exit(code)
"""


def probe(home: Home, *args: str) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    done = subprocess.run([sys.executable, "-c", PROBE, *args], cwd=home.work, env=home.env, input="",
                          capture_output=True, text=True, timeout=TIMEOUT)
    *said, loaded = done.stderr.splitlines()
    done.stderr = "".join(f"{line}\n" for line in said)
    return done, json.loads(loaded)


def long_way(home: Home, what: str, db: Path, arg: str, fmt: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", LONG_WAY, what, str(db), arg, fmt], cwd=home.work, env=home.env,
                          input="", capture_output=True, text=True, timeout=TIMEOUT)


@pytest.mark.parametrize("command", [["sessions"], ["show", "ses_unknown"], ["sessions", "--format", "json"]])
def test_a_missing_database_is_said_at_once_and_not_created(home: Home, command: list[str]):
    db = home.root / "nowhere.db"
    done, heavy = probe(home, *command, "--db", str(db))
    assert done.returncode == 1
    assert done.stderr == (f"ocs: the database {db} does not exist (this command only reads one: `ocs run` creates "
                           "it; choose another with --db)\n")
    assert heavy == []
    assert sorted(p.name for p in db.parent.iterdir() if p.name.startswith("nowhere")) == []


def test_the_commands_print_what_the_long_way_prints_without_a_server(home: Home, provider):
    provider.enqueue(fake.completion(fake.text_deltas("Short ", "answer.")))
    ran = home.run("run", "hello there")
    assert ran.returncode == 0, ran.stderr
    db = home.db
    sid = home.run("sessions").stdout.splitlines()[1].split("\t")[0]
    cases = [("sessions", [], "", "default"), ("sessions", ["--format", "json"], "", "json"),
             ("show", [sid], sid, "default"), ("show", [sid, "--format", "json"], sid, "json"),
             ("show", ["ses_unknown"], "ses_unknown", "default"), ("stats", [], "model", "default"),
             ("stats", ["--by", "agent"], "agent", "default")]
    for what, args, arg, fmt in cases:
        short, heavy = probe(home, what, *args, "--db", str(db))
        assert heavy == [], (what, args)
        before = long_way(home, what, db, arg, fmt)
        assert (short.returncode, short.stdout, short.stderr) == (before.returncode, before.stdout, before.stderr), \
            (what, args)
    shown, _ = probe(home, "show", sid, "--db", str(db))
    assert "> hello there" in shown.stdout and "Short answer." in shown.stdout
    listed = json.loads(probe(home, "sessions", "--format", "json", "--db", str(db))[0].stdout)
    assert listed["id"] == sid and listed["tokens"]["input"] == 0  # the wire form: defaults included


def test_a_database_another_command_holds_goes_the_long_way(home: Home, provider):
    provider.enqueue(fake.completion(fake.text_deltas("Answer.")))
    assert home.run("run", "hi").returncode == 0
    lock = DatabaseLock(home.db)
    lock.acquire()  # as an `ocs run` in progress holds it
    try:
        held = home.run("sessions")
    finally:
        lock.release()
    assert held.returncode == 1
    assert held.stderr.startswith(f"ocs: The database {home.db} is in use by process "), held.stderr
    free, heavy = probe(home, "sessions")
    assert free.returncode == 0 and len(free.stdout.splitlines()) == 2 and heavy == []


def test_through_the_server_that_holds_the_database_they_need_no_client_either(home: Home, provider):
    provider.enqueue(fake.completion(fake.text_deltas("Served answer.")))
    assert home.run("run", "hello server").returncode == 0
    srv = start_server(home.root, env=home.env, workdir=home.work, default_paths=True)
    try:
        using = f"using the server at {srv.url} (pid {srv.proc.pid}), which has this database open\n"
        listed, heavy = probe(home, "sessions")
        assert (listed.returncode, listed.stderr, heavy) == (0, using, [])
        sid = listed.stdout.splitlines()[1].split("\t")[0]
        shown, heavy = probe(home, "show", sid)
        assert (shown.returncode, shown.stderr, heavy) == (0, using, [])
        assert "> hello server" in shown.stdout and "Served answer." in shown.stdout
        counted, heavy = probe(home, "stats")
        assert (counted.returncode, counted.stderr, heavy) == (0, using, [])
        assert counted.stdout.startswith("Usage, all time (UTC): 1 session created"), counted.stdout
        unknown, _ = probe(home, "show", "ses_unknown")  # an error answer: the long way says it, as before
        assert unknown.returncode == 1 and unknown.stderr.endswith("Session not found: ses_unknown\n"), unknown.stderr
    finally:
        assert srv.stop() == 0, "".join(srv.stderr_lines)
