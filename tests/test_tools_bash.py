"""The bash tool with real processes: where it runs, its environment, permission per simple command, live output,
and the whole process group killed on timeout, interrupt and leftover background jobs."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from opencode_session.core.permission import Rule
from opencode_session.core.permission.command import save_pattern, simple_commands
from opencode_session.core.permission.shell_paths import command_paths
from opencode_session.core.tools import ToolRegistry, ToolSucceeded
from opencode_session.core.tools.builtin import BashTool
from opencode_session.schema import session_errors
from tests.support.polling import until
from tests.support.tools import RecordingAsker, make_ctx, process_alive, settle_err, settle_ok

pytestmark = pytest.mark.anyio
WAIT = 30.0  # generous: the machine is shared and slow


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / "sub").mkdir(parents=True)
    return root


def read_pid(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except FileNotFoundError:
        return None
    return int(text) if text else None


async def test_runs_in_the_location_or_workdir_and_reports_the_exit_code(project: Path):
    ctx = make_ctx(project)
    out = await settle_ok("bash", {"command": "pwd; echo err >&2"}, ctx)
    assert out.text().splitlines() == [str(project.resolve()), "err"]
    assert out.structured["exit"] == 0
    out = await settle_ok("bash", {"command": "pwd; exit 3", "workdir": "sub"}, ctx)
    assert str(project.resolve() / "sub") in out.text()
    assert "Exit code 3" in out.text() and out.structured["exit"] == 3


async def test_a_workdir_outside_the_location_needs_external_directory(project: Path, tmp_path: Path):
    result = await settle_err("bash", {"command": "touch marker", "workdir": str(tmp_path)}, make_ctx(project))
    assert result.error.type == session_errors.PERMISSION_REQUIRED
    assert not (tmp_path / "marker").exists()
    result = await settle_err("bash", {"command": "true", "workdir": "nope"}, make_ctx(project))
    assert "not a directory" in result.error.message


async def test_timeout_is_bounded_by_the_schema(project: Path):
    for bad in (0, 600_001):
        result = await settle_err("bash", {"command": "true", "timeout": bad}, make_ctx(project))
        assert result.error.type == session_errors.TOOL_INVALID_INPUT


async def test_environment_is_caller_then_host_overlay_then_forced_values(project: Path):
    registry = ToolRegistry()
    registry.register(BashTool(overlay={"A": "overlay", "TERM": "xterm-256color"}))
    caller = {"PATH": os.environ["PATH"], "A": "caller", "B": "caller", "TERM": "vt100"}
    ctx = make_ctx(project, env=caller)
    result = await registry.settle("bash", {"command": 'echo "$A $B $TERM $OPENCODE_TERMINAL"'}, ctx)
    assert isinstance(result, ToolSucceeded)
    assert result.output.text() == "overlay caller dumb 1\n"


async def test_each_simple_command_is_checked_so_an_allowed_prefix_carries_nothing_along(project: Path):
    (project / "keep").write_text("x")
    ctx = make_ctx(project, extra=(Rule("bash", "*", "ask"), Rule("bash", "ls *", "allow"),
                                   Rule("bash", "rm *", "deny")))
    result = await settle_err("bash", {"command": "ls && rm -f keep"}, ctx)
    assert result.error.type == session_errors.PERMISSION_REJECTED
    result = await settle_err("bash", {"command": "ls $(rm -f keep)"}, ctx)
    assert result.error.type == session_errors.PERMISSION_REJECTED
    assert (project / "keep").exists()
    await settle_ok("bash", {"command": "ls"}, ctx)


async def test_an_ask_carries_the_commands_and_arity_prefixes_to_save(project: Path):
    asker = RecordingAsker()
    ctx = make_ctx(project, extra=(Rule("bash", "*", "ask"),), asker=asker)
    await settle_ok("bash", {"command": "git --version; echo hi | tr a-z A-Z"}, ctx)
    [ask] = asker.asked
    assert ask.action == "bash"
    assert ask.resources == ("git --version", "echo hi", "tr a-z A-Z")
    assert ask.save == ("git --version *", "echo *", "tr *")
    refused = RecordingAsker(refuse=True)
    result = await settle_err("bash", {"command": "touch made"}, make_ctx(project, extra=(Rule("bash", "*", "ask"),),
                                                                         asker=refused))
    assert result.error.type == session_errors.PERMISSION_REJECTED
    assert not (project / "made").exists()


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory next to the Location, with files a command may name."""
    root = tmp_path.resolve() / "outside"
    (root / "deep").mkdir(parents=True)
    (root / "secret").write_text("s")
    (root / "x").write_text("x")
    return root


async def test_paths_a_command_names_outside_the_location_ask_for_their_directories(project: Path, outside: Path,
                                                                                    tmp_path: Path):
    home = tmp_path.resolve() / "home"
    cases = [
        (f"cat {outside}/secret", [outside]),  # an argument
        (f"cd {outside} && rm x", [outside]),  # a `cd` target, and a relative path taken there
        (f"echo hi > {outside}/made", [outside]),  # a redirection target
        (f"cd {outside}/deep; touch ../made made", [outside / "deep", outside]),
        ("cd .. && touch escaped", [tmp_path.resolve()]),  # `..` from the Location
        ('cat "$HOME/notes" ~/more', [home]),
        (f"(cd {outside}) && echo $(cat {outside}/deep/k) 2>/dev/null", [outside, outside / "deep"]),
    ]
    for command, directories in cases:
        refused = RecordingAsker(refuse=True)
        ctx = make_ctx(project, asker=refused, env={"PATH": os.environ["PATH"], "HOME": str(home)})
        result = await settle_err("bash", {"command": command}, ctx)
        assert result.error.type == session_errors.PERMISSION_REJECTED, command
        patterns = [f"{d}/*" for d in directories]
        assert [(a.action, list(a.resources), list(a.save)) for a in refused.asked] == [
            ("external_directory", patterns, patterns)], command
    # nothing ran
    assert (outside / "x").exists() and not (outside / "made").exists() and not (tmp_path / "escaped").exists()


async def test_outside_paths_follow_the_rules_and_the_location_needs_no_asking(project: Path, outside: Path):
    asker = RecordingAsker()
    allowed = make_ctx(project, asker=asker, extra=(Rule("external_directory", f"{outside}/*", "allow"),))
    assert (await settle_ok("bash", {"command": f"cat {outside}/secret"}, allowed)).text() == "s"
    denied = make_ctx(project, asker=asker, extra=(Rule("external_directory", f"{outside}/*", "deny"),))
    result = await settle_err("bash", {"command": f"cat {outside}/secret"}, denied)
    assert result.error.type == session_errors.PERMISSION_REJECTED
    # a denied command is refused before anything is asked
    no_rm = make_ctx(project, asker=asker, extra=(Rule("bash", "rm *", "deny"),))
    result = await settle_err("bash", {"command": f"rm {outside}/x"}, no_rm)
    assert result.error.type == session_errors.PERMISSION_REJECTED
    # inside the Location, and device files, nothing is asked
    ctx = make_ctx(project, asker=asker)
    out = await settle_ok("bash", {"command": "cd sub && ls .. > ../listing 2>/dev/null; cat ../listing"}, ctx)
    assert out.text() == "listing\nsub\n"
    assert asker.asked == []
    # once the user allows it, the command runs
    await settle_ok("bash", {"command": f"cd {outside} && rm x"}, ctx)
    assert [a.resources for a in asker.asked] == [(f"{outside}/*",)]
    assert not (outside / "x").exists()


@pytest.mark.parametrize("command, paths", [
    ("cat /etc/passwd", ["/etc/passwd"]),
    ("cd /tmp && rm x", ["/tmp", "/tmp/x"]),
    ("echo hi > /tmp/o 2>>err 2>&1 </dev/null", ["/tmp/o", "/loc/err", "/loc/hi"]),
    ("cd /a && ls > o; cd /b > p", ["/a", "/a/o", "/a/p", "/b"]),  # a redirection is opened before its command
    ("(cd /srv; rm y) | cat; rm z", ["/srv", "/srv/y", "/loc/z"]),
    ("cd; ls x", ["/home/u", "/home/u/x"]),
    ("cd $DIR && rm q; cd - && rm r", []),  # unknown directories: relative paths there are unknown too
    ('ls "$(pwd)/x" $UNSET/y', []),
    ("cat <<EOF > out\n$(rm /victim)\nEOF", ["/loc/out", "/victim"]),
    ("cat <<< /text/not/a/path", []),
    ("git commit -m 'fix /api' --file=/etc/m -rf", ["/loc/commit", "/loc/fix /api", "/etc/m"]),
    ("FOO=/opt BAR=rel make", ["/opt"]),
    ("for f in /etc/*; do cat \"$f\"; done", ["/etc/*"]),
    ("cat ~/a ~root/b q\\ r", ["/home/u/a", os.path.expanduser("~root") + "/b", "/loc/q r"]),
])
def test_the_paths_a_command_names(command: str, paths: list[str]):
    assert command_paths(command, "/loc", "/home/u") == paths


@pytest.mark.parametrize("command, commands, saved", [
    ("git push origin main", ["git push origin main"], ["git push *"]),
    ("npm run build -- --watch", ["npm run build -- --watch"], ["npm run build *"]),
    ("docker compose up -d && make test", ["docker compose up -d", "make test"],
     ["docker compose up *", "make test *"]),
    ("FOO=1 cargo test", ["FOO=1 cargo test"], ["cargo test *"]),
    ("ls -la | grep x; (cd a && pwd)", ["ls -la", "grep x", "cd a", "pwd"], ["ls *", "grep *", "cd *", "pwd *"]),
    ("echo `whoami`", ["whoami", "echo `whoami`"], ["whoami *", "echo *"]),
    ("diff <(sort a) >(tee b)", ["sort a", "tee b", "diff <(sort a) >(tee b)"], ["sort *", "tee *", "diff *"]),
])
def test_simple_commands_and_their_arity_prefixes(command: str, commands: list[str], saved: list[str]):
    assert simple_commands(command) == commands
    assert [save_pattern(c) for c in commands] == saved


async def test_output_is_streamed_live_before_the_call_settles(project: Path):
    seen: list[str] = []
    first = asyncio.Event()

    def on_output(text: str) -> None:
        seen.append(text)
        if "first" in "".join(seen):
            first.set()

    ctx = make_ctx(project, on_output=on_output)
    command = "echo first; while [ ! -f go ]; do sleep 0.05; done; echo second"
    call = asyncio.create_task(settle_ok("bash", {"command": command}, ctx))
    await asyncio.wait_for(first.wait(), WAIT)
    assert not call.done()  # the first line arrived while the command was still running
    (project / "go").touch()
    out = await asyncio.wait_for(call, WAIT)
    assert out.text() == "first\nsecond\n"
    assert "".join(seen) == "first\nsecond\n"


async def test_interrupt_kills_the_whole_process_group(project: Path):
    pidfile = project / "child.pid"
    command = f"sleep 300 & echo $! > {pidfile}; wait"
    call = asyncio.create_task(settle_ok("bash", {"command": command}, make_ctx(project)))
    await until(lambda: read_pid(pidfile) is not None, "the child's pidfile", WAIT)
    child = read_pid(pidfile)
    assert child is not None and process_alive(child)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    await until(lambda: not process_alive(child), "the background child to die", WAIT)


async def test_timeout_stops_the_group_and_returns_the_output_so_far(project: Path):
    pidfile = project / "child.pid"
    command = f"echo started; sleep 300 & echo $! > {pidfile}; wait"
    out = await settle_ok("bash", {"command": command, "timeout": 1500}, make_ctx(project))
    assert out.text().startswith("started\n")
    assert "stopped after the 1.5 s timeout" in out.text()
    assert out.structured == {"exit": None, "timedOut": True, "workdir": str(project.resolve())}
    child = read_pid(pidfile)
    assert child is not None
    await until(lambda: not process_alive(child), "the timed-out child to die", WAIT)


async def test_a_background_job_holding_the_output_does_not_hang_the_call(project: Path):
    pidfile = project / "bg.pid"
    out = await asyncio.wait_for(
        settle_ok("bash", {"command": f"sleep 300 & echo $! > {pidfile}; echo done"}, make_ctx(project)), WAIT)
    assert out.text() == "done\n" and out.structured["exit"] == 0
    child = read_pid(pidfile)
    assert child is not None
    await until(lambda: not process_alive(child), "the leftover background job to die", WAIT)
