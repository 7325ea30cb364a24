"""What a newcomer meets first: an unknown model is one line (exit 1), `ocs models` names each row's own model in its
key warning, a read-only command never creates a database (it says the one named does not exist), and the SDK's
`create=False` and unusable database paths raise typed errors."""

from __future__ import annotations

import os

import pytest

from opencode_session.core.store import DatabaseNotFoundError, StoreError
from opencode_session.sdk import OpenCode
from tests.support.cli import make_home

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]


def test_an_unknown_model_is_one_line_and_exit_1(home):
    done = home.run("run", "--model", "loop/nope", "hi")
    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert lines == [lines[0]] and lines[0].startswith("ocs: Model loop/nope is not known"), done.stderr
    assert "Traceback" not in done.stderr


def test_models_names_each_rows_own_model_in_its_key_warning(tmp_path):
    home = make_home(tmp_path)
    done = home.run("models")
    assert done.returncode == 0, done.stderr
    rows = [line.split() for line in done.stdout.splitlines() if line.startswith(("openai/", "anthropic/"))]
    assert len(rows) > 4
    for row in rows:
        if "needs" in row:
            assert row[row.index("Model") + 1] == row[0], row  # "Model <this row's model> needs an API key"


def test_read_only_commands_never_create_a_database(tmp_path):
    home = make_home(tmp_path)
    for command in (["sessions"], ["show", "ses_x"], ["log", "ses_x"], ["revert", "ses_x"]):
        done = home.run(*command, "--db", "typo.db")
        assert done.returncode == 1, (command, done.stderr)
        assert "does not exist" in done.stderr and "Traceback" not in done.stderr, done.stderr
        assert sorted(os.listdir(home.work)) == ["notes.txt"], command  # no typo.db, no typo.db.lock


async def test_the_sdk_raises_typed_errors_for_a_missing_or_unusable_database(tmp_path):
    missing = tmp_path / "missing.db"
    with pytest.raises(DatabaseNotFoundError, match="does not exist"):
        async with OpenCode(db=missing, create=False):
            pass
    assert not missing.exists() and not (tmp_path / "missing.db.lock").exists()
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder\n")
    with pytest.raises(StoreError):  # its folder cannot be made: typed, not a raw OSError
        async with OpenCode(db=blocker / "sub" / "s.db"):
            pass
