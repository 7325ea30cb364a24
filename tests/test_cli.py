"""`ocs serve` as a user runs it: defaults under XDG directories, the working directory as default Location,
a printed URL, and a clean exit on SIGINT."""

from __future__ import annotations

import signal

import pytest

from opencode_session.client import OpenCodeClient
from tests.support.server import isolated_env, start_server

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
