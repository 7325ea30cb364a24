"""`ocs serve` as a user runs it: defaults under XDG directories, the working directory as default Location,
a printed URL, a clean exit on SIGINT, and one running server per database."""

from __future__ import annotations

import os
import signal
import subprocess

import pytest

from opencode_session.client import OpenCodeClient
from opencode_session.core.store import DatabaseInUseError
from opencode_session.sdk import OpenCode
from tests.support.server import OCS, isolated_env, start_server

pytestmark = pytest.mark.anyio


async def test_serve_defaults_to_xdg_data_dir_and_the_working_directory(tmp_path):
    env = isolated_env(tmp_path)
    srv = start_server(tmp_path, env=env, default_paths=True)
    try:
        assert srv.url.startswith("http://127.0.0.1:")
        async with OpenCodeClient(srv.url) as client:
            session = await client.session.create()
            assert session.location.directory == str((tmp_path / "work").resolve())
    finally:
        assert srv.stop(signal.SIGINT) == 0, "".join(srv.stderr_lines)
    assert (tmp_path / "data" / "opencode-session" / "sessions.db").is_file()
    assert not any("Traceback" in line for line in srv.stderr_lines)


async def test_one_database_one_running_server(tmp_path):
    env = isolated_env(tmp_path)
    first = start_server(tmp_path, env=env)
    try:
        second = subprocess.run([OCS, "serve", "--port", "0", "--db", str(first.db), "--directory", str(tmp_path)],
                                env=env, capture_output=True, text=True, timeout=60)
        assert second.returncode == 1 and second.stdout == ""
        lines = second.stderr.strip().splitlines()
        assert len(lines) == 1, second.stderr  # one clear line, no traceback
        assert str(first.db) in lines[0] and f"process {first.proc.pid}" in lines[0]
        with pytest.raises(DatabaseInUseError) as caught:  # an embedded host is refused the same way
            async with OpenCode(db=first.db, directory=tmp_path):
                pass
        assert caught.value.pid == first.proc.pid and caught.value.database == str(first.db)
        async with OpenCodeClient(first.url) as client:  # the holder is unaffected
            assert (await client.health.get()).healthy
    finally:
        first.stop(signal.SIGKILL)  # a crash: nothing is released on purpose
    assert os.path.exists(str(first.db) + ".lock")
    after_crash = start_server(tmp_path, env=env, db=first.db)  # the lock went with the process
    try:
        async with OpenCodeClient(after_crash.url) as client:
            assert (await client.health.get()).healthy
    finally:
        assert after_crash.stop() == 0, "".join(after_crash.stderr_lines)
