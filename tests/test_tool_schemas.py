"""The JSON Schema each tool offers the model, pinned: the schemas of the built-in, `task` and MCP resource tools must
stay byte-for-byte those recorded in tests/fixtures/tool_schemas.json (taken from the hand-written schemas before the
tools moved to typed argument models), so the move changes nothing a provider sees (nor its prompt cache)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from opencode_session.core.agents import Agent
from opencode_session.core.mcp.source import ListMcpResources, ReadMcpResource
from opencode_session.core.subagents import TaskTool
from opencode_session.core.tools.registry import builtin_tools

FIXTURE = Path(__file__).parent / "fixtures" / "tool_schemas.json"

# Tool name -> why its derived schema differs from the recorded one as JSON text (the JSON value is the same). A
# derived schema lists a node's keys in one order (type, constraints, items or properties, required, description);
# three hand-written ones had their own, so the text a provider sees changes once (one prompt-cache miss).
_KEY_ORDER = "key order only: the hand-written schema listed {} first; the derived one lists keys in one order"
KNOWN_DIFFERENCES: dict[str, str] = {
    "todowrite": _KEY_ORDER.format("`todos`' description before its items"),
    "task": _KEY_ORDER.format("`required` before `properties`"),
    "read_mcp_resource": _KEY_ORDER.format("`required` before `properties`"),
}


def offered_schemas() -> dict[str, Any]:
    """Every tool's `parameters`, by name, in the order the providers see the built-ins."""
    tools: list[Any] = list(builtin_tools().list_tools())
    agents = [Agent(name="general", description="Does general work"), Agent(name="explore")]
    tools.append(TaskTool(None, agents))  # type: ignore[arg-type]  # the schema needs no delegation
    tools += [ListMcpResources(None, Path()), ReadMcpResource(None, Path())]  # type: ignore[arg-type]
    return {tool.name: tool.parameters for tool in tools}


def test_every_tool_offers_the_recorded_schema_byte_for_byte():
    recorded = json.loads(FIXTURE.read_text(encoding="utf-8"))
    offered = offered_schemas()
    assert list(offered) == list(recorded)
    for name, schema in offered.items():
        assert schema == recorded[name], name  # the same JSON value...
        if name not in KNOWN_DIFFERENCES:  # ...and the same text, key order included
            assert json.dumps(schema) == json.dumps(recorded[name]), name


if __name__ == "__main__":  # regenerates the fixture: only when a schema is meant to change
    FIXTURE.write_text(json.dumps(offered_schemas(), indent=2) + "\n", encoding="utf-8")
