"""`ocs run` with an MCP server configured: the real Chat Completions adapter offers the server's tool with its
schema and the MCP guidance in the system text, the call goes to the server, and its result reaches the model."""

from __future__ import annotations

import json

import pytest

from tests.support import fake_openai as fake
from tests.support.cli import make_home
from tests.support.mcp_harness import local

pytestmark = pytest.mark.timeout(120)


def test_ocs_run_calls_an_mcp_tool_over_the_wire(tmp_path, loop_provider):
    home = make_home(tmp_path)
    home.configure(loop_provider, mcp={"docs": local("docs", MCP_TEST_INSTRUCTIONS="Ask the docs server first.")})
    seen = len(loop_provider.requests)
    loop_provider.enqueue(
        fake.completion(fake.tool_call_deltas(0, "call_1", "docs_echo", '{"text": "over the wire"}'),
                        finish_reason="tool_calls"),
        fake.completion(fake.text_deltas("The docs said so.")))
    done = home.run("run", "ask the docs")
    assert done.returncode == 0, done.stderr
    assert done.stdout.endswith("The docs said so.\n")
    first, second = [r.json for r in loop_provider.requests[seen:]]
    [echo] = [t["function"] for t in first["tools"] if t["function"]["name"] == "docs_echo"]
    assert echo["description"] == "Answer the text given" and "text" in echo["parameters"]["properties"]
    system = "\n".join(m["content"] for m in first["messages"] if m["role"] == "system")
    assert '<server name="docs">\n    Ask the docs server first.' in system
    [result] = [m for m in second["messages"] if m["role"] == "tool"]
    assert result["tool_call_id"] == "call_1" and "echo: over the wire" in json.dumps(result["content"])
