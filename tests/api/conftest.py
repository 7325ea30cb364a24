"""The API suite runs twice: against a real `ocs serve` on loopback and against the Embedded host; both see a
global config declaring the models of `tests.support.config.DECLARED`."""

from __future__ import annotations

import httpx2
import pytest

from opencode_session.client import OpenCodeClient
from opencode_session.sdk import OpenCode
from tests.support.config import write_global_config
from tests.support.server import isolated_env, start_server


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("ocs-server")
    env = isolated_env(root)
    write_global_config(env["XDG_CONFIG_HOME"])
    proc = start_server(root, env=env)
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
        write_global_config()
        workdir = tmp_path / "work"
        workdir.mkdir()
        async with OpenCode(db=tmp_path / "db.sqlite", directory=workdir, heartbeat=0.2) as host:
            yield host


def raw_http(api: OpenCodeClient) -> httpx2.AsyncClient:
    """A plain HTTP client to the same server or embedded host as `api`, for requests the generated client cannot
    make (unknown routes, broken bodies, the OpenAPI document)."""
    return httpx2.AsyncClient(base_url=api.base_url, transport=api.transport if isinstance(api, OpenCode) else None)
