"""Python plugins for the plugin tests, named from opencode.json as `python:tests.support.plugins:NAME`: one that
contributes a tool, one configured by its entry's options, one whose setup raises, one that is not a plugin at
all."""

from __future__ import annotations

from typing import Any

from opencode_session.sdk import Plugin, PluginRegistry, ToolContext, ToolOutput


class Reverse:
    name = "reverse"
    description = "Reverse a text."
    parameters: dict[str, Any] = {"type": "object", "properties": {"text": {"type": "string"}},
                                  "required": ["text"]}
    changes_files = False

    async def execute(self, input: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        return ToolOutput.of_text(input["text"][::-1])


def _setup(registry: PluginRegistry) -> None:
    registry.tool(Reverse())


def _broken(registry: PluginRegistry) -> None:
    registry.tool(Reverse())  # contributed before it fails: none of it is used
    raise RuntimeError("the plugin's settings file is missing")


def _configured(registry: PluginRegistry) -> None:
    greeting = registry.options.get("greeting")  # from opencode.json: ["python:...:configured", {"greeting": ...}]
    registry.instructions("greeting", lambda _asked: f"Greet with {greeting!r}.")


reverser = Plugin(name="reverser", setup=_setup)
configured = Plugin(name="configured", setup=_configured)
broken = Plugin(name="broken", setup=_broken)
not_a_plugin = 42
