"""The pure parts of MCP support: the `mcp` config entries checked one by one, OpenCode's tool names, the schemas
offered, results lowered to tool output, and the MCP guidance source's baseline, updates and removal."""

from __future__ import annotations

import json

import pytest
from mcp_types import (
    BlobResourceContents,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
)

from opencode_session.core.config import Config
from opencode_session.core.instructions.algebra import EMPTY, initialize, reconcile
from opencode_session.core.mcp.config import configured_servers
from opencode_session.core.mcp.guidance import Guided, mcp_guidance_source
from opencode_session.core.mcp.lowering import error_text, lower_result, parameters, tool_name
from opencode_session.schema.message import ToolFileContent, ToolTextContent

pytestmark = pytest.mark.anyio


def test_each_entry_is_checked_on_its_own():
    config = Config.model_validate({"mcp": {
        "ok": {"type": "local", "command": ["srv", "--flag"], "environment": {"A": "1"}, "timeout": 2500},
        "web": {"type": "remote", "url": "https://example.com/mcp", "headers": {"Authorization": "Bearer x"}},
        "off": {"enabled": False},
        "empty": {"type": "local", "command": []},
        "typo": {"type": "locl", "command": ["x"]},
        "slow": {"type": "local", "command": ["x"], "timeout": -1},
        "odd": "not an object",
    }})
    servers = configured_servers(config)
    assert servers["ok"].enabled and servers["ok"].request_timeout_s() == 2.5 and servers["ok"].call_timeout_s() == 2.5
    assert servers["web"].enabled and servers["web"].request_timeout_s() == 5.0  # OpenCode's default
    assert servers["web"].startup_timeout_s() == 35.0  # the handshake may take 30 s more
    assert servers["web"].call_timeout_s() == 60.0
    assert not servers["off"].enabled and servers["off"].problem is None
    for name in ("empty", "typo", "slow", "odd"):
        assert not servers[name].enabled and servers[name].problem.startswith("invalid configuration: "), name
    assert "command" in servers["empty"].problem and "timeout" in servers["slow"].problem
    assert configured_servers(config) is servers  # parsed once per config object


def test_env_placeholders_are_substituted_as_everywhere_in_the_config(tmp_path):
    from opencode_session.core.config import load_config

    (tmp_path / "opencode.json").write_text(json.dumps({"mcp": {
        "gh": {"type": "local", "command": ["gh-mcp"], "environment": {"TOKEN": "{env:GH_TOKEN}"}},
        "web": {"type": "remote", "url": "{env:MCP_URL}", "headers": {"Authorization": "Bearer {env:WEB_KEY}"}}}}))
    servers = configured_servers(load_config(tmp_path, tmp_path, {"HOME": str(tmp_path / "home"), "GH_TOKEN": "t1",
                                                                   "MCP_URL": "https://x/mcp", "WEB_KEY": "k2"}))
    assert servers["gh"].config.environment == {"TOKEN": "t1"}
    assert servers["web"].config.url == "https://x/mcp"
    assert servers["web"].config.headers == {"Authorization": "Bearer k2"}


def test_names_follow_opencode_and_schemas_are_objects():
    assert tool_name("my.server", "get/issue") == "my_server_get_issue"
    assert tool_name("git-hub", "list_prs") == "git-hub_list_prs"
    assert parameters(None) == {"type": "object", "properties": {}}
    schema = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
    assert parameters(schema) == schema


def test_results_lower_to_text_files_and_structured_values():
    result = CallToolResult(content=[
        TextContent(type="text", text="hello"),
        ImageContent(type="image", data="AAAA", mime_type="image/png"),
        EmbeddedResource(type="resource", resource=BlobResourceContents(
            uri="file:///a.bin", mime_type="application/zip", blob="UEsD")),
        ResourceLink(type="resource_link", uri="file:///b.txt", name="b.txt", description="the b file"),
    ], structured_content={"k": 1})
    output = lower_result(result, "srv/tool")
    texts = [p.text for p in output.content if isinstance(p, ToolTextContent)]
    files = [p for p in output.content if isinstance(p, ToolFileContent)]
    assert texts[0] == "hello" and "image/png" in texts[1] and "file:///a.bin" in texts[2]
    assert texts[3] == "Resource link file:///b.txt (b.txt): the b file"
    assert [f.uri for f in files] == ["data:image/png;base64,AAAA", "data:application/zip;base64,UEsD"]
    assert output.structured == {"k": 1} and output.title == "srv/tool"
    assert error_text(CallToolResult(content=[], is_error=True)).startswith("the tool reported an error")


async def test_guidance_baseline_additions_removals_and_restatements():
    base = await initialize(mcp_guidance_source((Guided("zeta", "Line one.\nLine two."), Guided("alpha", "A."))))
    assert base.text == ('<mcp_instructions>\n  <server name="alpha">\n    A.\n  </server>\n'
                         '  <server name="zeta">\n    Line one.\n    Line two.\n  </server>\n</mcp_instructions>')
    grown = await reconcile(mcp_guidance_source((Guided("alpha", "A."), Guided("zeta", "Line one.\nLine two."),
                                                 Guided("new", "N."))), base.applied)
    assert grown.text.startswith("New MCP server instructions are available") and "A." not in grown.text
    shrunk = await reconcile(mcp_guidance_source((Guided("alpha", "A."),)), base.applied)
    assert shrunk.text == "Instructions for the following MCP servers are no longer available: zeta."
    changed = await reconcile(mcp_guidance_source((Guided("alpha", "B."),)), base.applied)
    assert "supersedes the previous one" in changed.text and "B." in changed.text
    assert (await reconcile(EMPTY, base.applied)).text == "MCP server instructions are no longer available."
    assert mcp_guidance_source(()) is EMPTY
