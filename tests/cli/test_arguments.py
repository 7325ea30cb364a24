"""The command line as a user meets it before any command runs: the help, usage errors (exit 2, said on stderr)
and `ocs` alone without a terminal."""

from __future__ import annotations

import pytest

from tests.support.cli import make_home

# each test starts `ocs` processes: slow on a busy machine
pytestmark = pytest.mark.timeout(240)

COMMANDS = ("serve", "ui", "run", "sessions", "show", "log", "revert", "fork", "models", "plugins", "hooks", "openapi",
            "demo", "stats")


def test_help_lists_every_command_and_each_command_has_its_own(tmp_path):
    home = make_home(tmp_path)
    done = home.run("--help")
    assert done.returncode == 0 and done.stderr == "", done.stderr
    listed = {line.split()[0] for line in done.stdout.splitlines() if line.startswith("    ") and line[4] != " "}
    assert listed == set(COMMANDS), done.stdout
    assert "Serve the OpenCode V2 API over HTTP until SIGINT/SIGTERM." in done.stdout
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
