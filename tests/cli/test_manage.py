"""Managing sessions as a user does, with `ocs` against its default database and against a server on PostgreSQL:
`ocs sessions --children`, `--search`, `rename`, `rm` (asking unless --yes), `export [--sanitize] > file` and
`import file`."""

from __future__ import annotations

import json

import pytest

from tests.support import fake_openai as fake
from tests.support.cli import Home
from tests.support.postgres import fresh_schema
from tests.support.server import start_server

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(240)]


def _ids(done) -> list[str]:
    assert done.returncode == 0, done.stderr
    return [line.split("\t")[0] for line in done.stdout.splitlines()[1:]]  # under the header


def _session(home: Home, provider, text: str, *target: str) -> str:
    provider.enqueue(fake.completion(fake.text_deltas(f"answer to {text}")))
    assert home.run("run", *target, text).returncode == 0
    return _ids(home.run("sessions", "--limit", "1", *target))[0]


def _manage_everything(home: Home, provider, *target: str) -> None:
    """The whole life of a family of sessions through `ocs`, on whatever host `target` names."""
    parent = _session(home, provider, f"secret is sk-{'Zz9' * 8} under {home.root}/home/plans", *target)
    fork = home.run("fork", parent, *target)
    assert fork.returncode == 0, fork.stderr
    child = fork.stdout.strip()
    assert _ids(home.run("sessions", "--children", parent, *target)) == [child]
    missing = home.run("sessions", "--children", "ses_nope", *target)
    assert missing.returncode == 1 and "SessionNotFoundError" in missing.stderr

    assert home.run("sessions", "rename", parent, "Release plan", *target).returncode == 0
    listed = home.run("sessions", "--format", "json", *target).stdout.splitlines()
    assert {"id": parent, "title": "Release plan"}.items() <= next(
        s for s in map(json.loads, listed) if s["id"] == parent).items()
    # --search finds titles and message text (the fork copied its parent's messages), the best match first
    assert _ids(home.run("sessions", "--search", "release PLAN", *target)) == [parent]
    assert set(_ids(home.run("sessions", "--search", "plans", *target))) == {parent, child}
    assert len(_ids(home.run("sessions", "--search", "plans", "--limit", "1", *target))) == 1
    assert _ids(home.run("sessions", "--search", '"AND* -', *target)) == []

    exported = home.run("sessions", "export", parent, *target)
    assert exported.returncode == 0, exported.stderr
    transcript = json.loads(exported.stdout)
    assert transcript["info"]["title"] == "Release plan" and "sk-Zz9" in exported.stdout
    sanitized = home.run("sessions", "export", parent, "--sanitize", *target)
    assert "sk-Zz9" not in sanitized.stdout and f"{home.root}/home" not in sanitized.stdout
    (home.root / "parent.json").write_text(exported.stdout)
    (home.root / "child.json").write_text(home.run("sessions", "export", child, *target).stdout)

    # rm asks; a pipe cannot answer, "n" keeps them, --yes does not ask
    refused = home.run("sessions", "rm", parent, *target)
    assert refused.returncode == 1 and "--yes" in refused.stderr
    assert parent in _ids(home.run("sessions", *target))
    removed = home.run("sessions", "rm", "--yes", parent, *target)
    assert removed.returncode == 0, removed.stderr
    assert not {parent, child} & set(_ids(home.run("sessions", *target)))  # the child went with it
    again = home.run("sessions", "rm", "--yes", parent, *target)
    assert again.returncode == 1 and "SessionNotFoundError" in again.stderr

    orphan = home.run("sessions", "import", str(home.root / "child.json"), *target)
    assert orphan.returncode == 1 and "SessionNotFoundError" in orphan.stderr  # parents first
    imported = home.run("sessions", "import", str(home.root / "parent.json"), *target)
    assert imported.returncode == 0, imported.stderr
    assert imported.stdout.strip() == parent
    assert _ids(home.run("sessions", "--search", "release", *target)) == [parent]  # an import is searchable
    assert home.run("sessions", "import", str(home.root / "child.json"), *target).returncode == 0
    assert _ids(home.run("sessions", "--children", parent, *target)) == [child]
    duplicate = home.run("sessions", "import", str(home.root / "parent.json"), *target)
    assert duplicate.returncode == 1 and "ConflictError" in duplicate.stderr
    (home.root / "broken.json").write_text('{"info": {}, "messages": []}')
    broken = home.run("sessions", "import", str(home.root / "broken.json"), *target)
    assert broken.returncode == 1 and "info." in broken.stderr

    # the imported session continues with its history
    provider.requests.clear()
    provider.enqueue(fake.completion(fake.text_deltas("continued")))
    assert home.run("run", "--session", parent, "go on", *target).returncode == 0
    sent = json.dumps(provider.requests[-1].json["messages"])
    assert "secret is sk-Zz9" in sent and "answer to secret" in sent


def test_sessions_are_managed_from_the_command_line(home, provider):
    _manage_everything(home, provider)


def test_sessions_are_managed_on_a_server_sharing_postgresql(home, provider):
    with fresh_schema() as url:
        server = start_server(home.root, env=home.env, db=url, workdir=home.work)
        try:
            _manage_everything(home, provider, "--attach", server.url)
        finally:
            assert server.stop() == 0, "".join(server.stderr_lines)


def test_rm_asks_on_a_terminal_and_keeps_the_session_unless_told_yes(home, provider):
    sid = _session(home, provider, "keep me")
    child = home.spawn("sessions", "rm", sid)
    child.expect_exact("[y/N]")
    child.sendline("n")
    child.expect_exact("Nothing removed.")
    child.wait()
    assert sid in _ids(home.run("sessions"))
    child = home.spawn("sessions", "rm", sid)
    child.expect_exact("[y/N]")
    child.sendline("y")
    child.expect_exact(f"removed {sid}")
    child.wait()
    assert sid not in _ids(home.run("sessions"))
