"""`GET /api/mcp`: the MCP servers a Location configures, each connected, disabled or failed with why, over
`ocs serve` and the Embedded host alike (a GET reads, `POST /api/mcp/connect` starts them); a broken entry fails only
its own server."""

from __future__ import annotations

import json

import pytest

from opencode_session.client import InvalidRequestError
from tests.support.mcp_harness import local

pytestmark = pytest.mark.anyio


async def test_each_configured_server_has_its_status(api, tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    (project / "opencode.json").write_text(json.dumps({"mcp": {
        "srv": local("srv"),
        "off": {"type": "local", "command": ["x"], "enabled": False},
        "gone": {"type": "local", "command": ["no-such-mcp-server-anywhere"]},
        "typo": {"type": "locl", "command": ["x"]},
    }}))
    location = {"directory": str(project)}
    # a status read starts nothing: a page loading the URL cannot make the server run a command
    before = await api.mcp.status(location=location)
    assert {name: s.status for name, s in before.data.items()} == {
        "srv": "stopped", "off": "disabled", "gone": "stopped", "typo": "failed"}
    answer = await api.mcp.connect(location=location)
    assert answer.location.directory == str(project)
    data = answer.data
    assert data["srv"].status == "connected" and data["srv"].error is None
    assert data["off"].status == "disabled"
    assert data["gone"].status == "failed" and "command not found: no-such-mcp-server-anywhere" in data["gone"].error
    assert data["typo"].status == "failed" and data["typo"].error.startswith("invalid configuration")
    assert (await api.mcp.status(location=location)).data["srv"].status == "connected"
    (project / "opencode.json").write_text("{}")
    assert (await api.mcp.status(location=location)).data == {}
    with pytest.raises(InvalidRequestError):
        await api.mcp.status(location={"directory": str(tmp_path / "missing")})
