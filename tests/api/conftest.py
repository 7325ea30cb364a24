"""The API suite runs twice: against a real `ocs serve` on loopback and against the Embedded host."""

from __future__ import annotations

import pytest

from opencode_session.client import OpenCodeClient
from opencode_session.sdk import OpenCode
from tests.support.server import start_server


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    proc = start_server(tmp_path_factory.mktemp("ocs-server"))
    yield proc
    assert proc.stop() == 0, "".join(proc.stderr_lines)


@pytest.fixture(params=["server", "embedded"])
async def api(request, tmp_path):
    if request.param == "server":
        srv = request.getfixturevalue("server")
        async with OpenCodeClient(srv.url) as client:
            client.workdir = None
            yield client
    else:
        workdir = tmp_path / "work"
        workdir.mkdir()
        async with OpenCode(db=tmp_path / "db.sqlite", directory=workdir, heartbeat=0.2) as host:
            yield host
