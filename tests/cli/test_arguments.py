"""The command line as a user meets it before any command runs: the help, usage errors (exit 2, said on stderr)
and `ocs` alone without a terminal."""

from __future__ import annotations

import pytest

from tests.support.cli import make_home

# each test starts `ocs` processes: slow on a busy machine
pytestmark = pytest.mark.timeout(240)

COMMANDS = ("serve", "ui", "run", "sessions", "show", "log", "revert", "fork", "models", "plugins", "hooks", "trust",
            "openapi", "demo", "stats")


def test_help_lists_every_command_and_each_command_has_its_own(tmp_path):
    home = make_home(tmp_path)
    done = home.run("--help")
    assert done.returncode == 0 and done.stderr == "", done.stderr
    listed = {line.split()[0] for line in done.stdout.splitlines() if line.startswith("    ") and line[4] != " "}
    assert listed == set(COMMANDS), done.stdout
    assert "Serve the OpenCode V2 API over HTTP until SIGINT/SIGTERM." in done.stdout
    summaries: dict[str, str] = {}  # each command's summary, its wrapped lines joined
    for line in done.stdout.split("  COMMAND\n", 1)[1].splitlines():
        if line.startswith("    ") and line[4] != " ":
            name, _, text = line.strip().partition(" ")
            summaries[name] = text.strip()
        elif line.strip():
            summaries[name] += " " + line.strip()
    cut = {name: text for name, text in summaries.items() if not text.endswith(".")}
    assert not cut, cut  # no summary stops mid-sentence
    assert summaries["stats"].endswith("each tool's calls and failures.")
    serve = home.run("serve", "--help")
    assert serve.returncode == 0 and serve.stdout.startswith("usage: ocs serve")
    for option in ("--allow-host", "--max-body-bytes", "--read-timeout", "--insecure-no-password",
                   "--no-insecure-no-password", "--stall-timeout"):
        assert option in serve.stdout
    demo = home.run("demo", "--help")
    assert demo.returncode == 0 and "--keep" in demo.stdout and "--pace" not in demo.stdout  # --pace is hidden


@pytest.mark.parametrize(("args", "said"), [
    (("serve", "--no-such-option"), "--no-such-option"),
    (("sessions", "--limit", "0"), "--limit"),
    (("serve", "--read-timeout", "0.05"), "--read-timeout"),
    (("log", "ses_x", "--after", "-1"), "--after"),
    (("show",), "session"),
    (("no-such-command",), "no-such-command"),
])
def test_a_usage_error_exits_2_and_says_why_on_stderr(tmp_path, args, said):
    done = make_home(tmp_path).run(*args)
    assert done.returncode == 2 and done.stdout == "", done.stdout
    assert "usage: ocs" in done.stderr and said in done.stderr.splitlines()[-1], done.stderr


def test_no_command_without_a_terminal_prints_the_help(tmp_path):
    home = make_home(tmp_path)
    done = home.run(stdin="")
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert done.stdout == home.run("--help").stdout
    assert not home.db.exists()  # nothing ran


def test_short_help_and_version_work(tmp_path):
    from importlib.metadata import version

    home = make_home(tmp_path)
    short = home.run("-h")
    assert short.returncode == 0 and short.stdout == home.run("--help").stdout
    assert home.run("run", "-h").stdout.startswith("usage: ocs run")
    assert home.run("sessions", "rm", "-h").stdout.startswith("usage: ocs sessions rm")
    done = home.run("--version")
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert done.stdout.strip() == f"ocs {version('opencode-session')}"
    assert not home.db.exists()


@pytest.mark.parametrize(("db", "said"), [
    ("postgresql:/host/db", "not a postgresql:// one"),  # one slash: was a SQLite file under ./postgresql:
    ("postgres:db", "not a postgresql:// one"),
    ("postgresql://host:port/db", "not a valid PostgreSQL URL"),
    ("some/missing/dir/x.db", "'some/missing/dir' does not exist: create it, or add --mkdir"),  # was made
])
def test_a_mistyped_db_is_refused_and_nothing_is_created(tmp_path, db, said):
    home = make_home(tmp_path)
    for command in (("serve", "--port", "0"), ("run", "hello"), ("sessions",)):
        done = home.run(*command, "--db", db)
        assert done.returncode == 2 and said in done.stderr.splitlines()[-1], done.stderr
    assert sorted(p.name for p in home.work.iterdir()) == ["notes.txt"]  # no directory or file was made
    assert not home.db.exists()
    made = home.work / "elsewhere"
    made.mkdir()  # a file in a directory that exists is accepted, and a missing directory with --mkdir
    for db in (made / "x.db", home.work / "new" / "x.db"):
        listed = home.run("sessions", "--db", str(db), "--mkdir")
        assert listed.returncode == 1 and "usage:" not in listed.stderr, listed.stderr
        assert "does not exist (this command only reads one" in listed.stderr  # read-only: it makes nothing
