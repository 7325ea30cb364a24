"""Typed tool arguments (core/tools/arguments.py): the schema a pydantic model offers, `execute` receiving the parsed
model, the same typed error for input the schema or the model's own validators refuse, and typed functions made
tools with `@registry.tool`, through the registry and through the embedded host with a real model call."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Annotated, Any, Literal

import anyio
import pytest
from pydantic import BaseModel, Field, field_validator

from opencode_session.core.tools import ToolContext, ToolOutput, ToolRegistry
from opencode_session.core.tools.arguments import Arguments, FunctionTool, schema_of
from opencode_session.schema import session_errors
from opencode_session.sdk import OpenCode, Plugin, PluginRegistry
from tests.security.conftest import write_provider_config
from tests.support import fake_openai as fake
from tests.support.server import isolated_env

pytestmark = pytest.mark.anyio


def make_ctx(root: Path) -> ToolContext:
    return ToolContext(session_id="ses_1", message_id="msg_1", call_id="call_1", agent="build", directory=root,
                       project_root=root)


class Point(Arguments):
    """Not part of the schema: a model's docstring documents the code."""

    x: int = Field(ge=0, description="Across")
    label: Literal["origin"] | None = None


class Shape(BaseModel):
    """Also left out."""

    points: list[Point] = Field(min_length=1, description="The corners")
    name: str | None = Field(None, min_length=1, description="What it is called")
    closed: bool = False

    @field_validator("name")
    @classmethod
    def no_spaces(cls, value: str | None) -> str | None:
        if value is not None and " " in value:
            raise ValueError("a name has no spaces")
        return value


def test_a_models_schema_reads_as_one_written_by_hand():
    assert json.dumps(schema_of(Shape)) == json.dumps({
        "type": "object",
        "properties": {
            "points": {"type": "array", "minItems": 1, "items": {
                "type": "object",
                "properties": {"x": {"type": "integer", "minimum": 0, "description": "Across"},
                               "label": {"type": "string", "enum": ["origin"]}},
                "required": ["x"],
                "additionalProperties": False,
            }, "description": "The corners"},
            "name": {"type": "string", "minLength": 1, "description": "What it is called"},
            "closed": {"type": "boolean"},
        },
        "required": ["points"],
    })


class ShapeTool:
    name = "shape"
    description = "Takes a shape."
    arguments = Shape
    parameters = schema_of(Shape)

    def __init__(self) -> None:
        self.received: list[Any] = []

    async def execute(self, args: Shape, ctx: ToolContext) -> ToolOutput:
        self.received.append(args)
        return ToolOutput.of_text(f"{len(args.points)} points")


async def test_execute_gets_the_parsed_model_and_bad_input_the_typed_error(tmp_path):
    tool = ShapeTool()
    registry = ToolRegistry()
    registry.register(tool)
    settled = await registry.settle("shape", {"points": [{"x": 1.0}], "name": "box"}, make_ctx(tmp_path))
    assert settled.output.text() == "1 points"  # type: ignore[union-attr]
    assert tool.received == [Shape(points=[Point(x=1)], name="box")]
    assert type(tool.received[0].points[0].x) is int  # JSON's 1.0 is an integer to the schema; parsed, an int
    # the schema refuses it: the message names the field as it always did
    refused = await registry.settle("shape", {"points": [{"x": -1}]}, make_ctx(tmp_path))
    assert refused.error.type == session_errors.TOOL_INVALID_INPUT  # type: ignore[union-attr]
    assert refused.error.message.startswith("Invalid input for tool shape: points/0/x: ")  # type: ignore[union-attr]
    # the model's own validator refuses what the schema cannot say: the same typed error, naming the field
    refused = await registry.settle("shape", {"points": [{"x": 1}], "name": "a box"}, make_ctx(tmp_path))
    assert refused.error.type == session_errors.TOOL_INVALID_INPUT  # type: ignore[union-attr]
    assert refused.error.message == ("Invalid input for tool shape: name: Value error, a name has no "  # type: ignore[union-attr]
                                     "spaces")
    assert len(tool.received) == 1


def test_a_tool_whose_arguments_are_not_a_model_is_refused_when_registered():
    tool = ShapeTool()
    tool.arguments = dict  # type: ignore[assignment]
    with pytest.raises(TypeError, match="not a pydantic model"):
        ToolRegistry().register(tool)


def test_a_typed_tool_whose_parameters_are_not_its_models_schema_is_still_checked_against_the_metaschema():
    from jsonschema.exceptions import SchemaError

    tool = ShapeTool()
    tool.parameters = {"type": "not-a-type"}  # written by hand beside the model: not a JSON Schema by construction
    with pytest.raises(SchemaError):
        ToolRegistry().register(tool)


def test_offering_the_built_in_tools_does_not_load_the_validator_until_a_call_needs_it():
    # their schemas are their arguments models' (schema_of): JSON Schemas by construction, so offering them at a
    # Step's boundary loads no `jsonschema`; the first call checks its input as before
    code = textwrap.dedent("""
        import asyncio, json, sys
        from pathlib import Path
        from opencode_session.core.tools import ToolContext, ToolRegistry, builtin_tools

        registry = ToolRegistry([builtin_tools()])
        offered = registry.snapshot()
        before = "jsonschema" in sys.modules
        ctx = ToolContext(session_id="ses_1", message_id="msg_1", call_id="call_1", agent="build",
                          directory=Path("."), project_root=Path("."))
        refused = asyncio.run(offered.run("glob", {"pattern": 3}, ctx))
        print(json.dumps([len(offered.names()), before, "jsonschema" in sys.modules, refused.error.message]))
        """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    count, before, after, message = json.loads(out.stdout)
    assert count >= 12 and not before and after
    assert message.startswith("Invalid input for tool glob: pattern: 3 is not of type 'string'")


async def test_a_typed_function_is_a_tool_with_its_signature_as_schema_and_docstring_as_description(tmp_path):
    registry = ToolRegistry()
    threads: list[str] = []

    @registry.tool
    async def greet(ctx: ToolContext, who: Annotated[str, Field(description="Whom to greet")], times: int = 1) -> str:
        """Greet someone."""
        return f"{ctx.agent}: " + " ".join([f"hello {who}"] * times)

    @registry.tool(name="measure", changes_files=False, idempotent=True)
    def size(shape: Shape) -> dict[str, Any]:
        """Count a shape's points."""
        threads.append(threading.current_thread().name)
        return {"points": len(shape.points)}

    assert greet.__name__ == "greet"  # the function comes back unchanged
    snapshot = registry.snapshot()
    made = snapshot.get("greet")
    assert made is not None and made.description == "Greet someone."
    assert json.dumps(made.parameters) == json.dumps({
        "type": "object",
        "properties": {"who": {"type": "string", "description": "Whom to greet"}, "times": {"type": "integer"}},
        "required": ["who"],
        "additionalProperties": False,
    })
    assert snapshot.get("measure").parameters == schema_of(Shape)  # type: ignore[union-attr]
    assert not snapshot.changes_files("measure") and snapshot.idempotent("measure")
    assert snapshot.changes_files("greet") and not snapshot.idempotent("greet")
    out = await registry.settle("greet", {"who": "Ada", "times": 2}, make_ctx(tmp_path))
    assert out.output.text() == "build: hello Ada hello Ada"  # type: ignore[union-attr]
    out = await registry.settle("measure", {"points": [{"x": 0}, {"x": 2}]}, make_ctx(tmp_path))
    assert out.output.structured == {"points": 2} and out.output.model_text() == '{"points": 2}'  # type: ignore[union-attr]
    assert threads and threads[0] != threading.main_thread().name  # a plain function runs off the event loop
    refused = await registry.settle("greet", {"who": "Ada", "loud": True}, make_ctx(tmp_path))
    assert refused.error.type == session_errors.TOOL_INVALID_INPUT  # type: ignore[union-attr]


async def test_a_function_tool_that_returns_something_else_fails_its_call(tmp_path):
    registry = ToolRegistry()

    @registry.tool
    async def broken() -> int:
        """Returns a number."""
        return 3

    refused = await registry.settle("broken", {}, make_ctx(tmp_path))
    assert refused.error.type == session_errors.TOOL_EXECUTION  # type: ignore[union-attr]
    assert "return a ToolOutput, a str or a dict" in refused.error.message  # type: ignore[union-attr]


def test_a_function_that_cannot_be_a_tool_is_refused_when_decorated():
    async def undocumented(x: int) -> str:
        return ""

    async def untyped(x) -> str:  # type: ignore[no-untyped-def]
        """Untyped."""
        return ""

    async def variadic(*xs: int) -> str:
        """Variadic."""
        return ""

    with pytest.raises(ValueError, match="needs a description"):
        FunctionTool(undocumented)
    with pytest.raises(TypeError, match="needs a type annotation"):
        FunctionTool(untyped)
    with pytest.raises(TypeError, match=r"\*args and \*\*kwargs"):
        FunctionTool(variadic)
    assert FunctionTool(undocumented, description="Given here.").description == "Given here."


@pytest.mark.slow
@pytest.mark.timeout(60)
async def test_typed_tools_of_the_host_and_of_a_plugin_answer_a_real_model_call(tmp_path, provider):
    (tmp_path / "work").mkdir()
    write_provider_config(tmp_path, provider)

    def setup(registry: PluginRegistry) -> None:
        @registry.tool(changes_files=False)
        async def shout(text: Annotated[str, Field(min_length=1, description="What to shout")]) -> str:
            """Say it louder."""
            return text.upper() + "!"

    async def add(a: int, b: int) -> str:
        """Add two numbers."""
        return str(a + b)

    provider.enqueue(
        fake.completion(fake.tool_call_deltas(0, "call_1", "add", '{"a": 2, ', '"b": 3}'),
                        fake.tool_call_deltas(1, "call_2", "shout", '{"text": "hi"}'),
                        fake.tool_call_deltas(2, "call_3", "add", '{"a": "two", "b": 3}'), finish_reason="tool_calls"),
        fake.completion(fake.text_deltas("done")))
    oc = OpenCode(db=tmp_path / "db.sqlite", directory=tmp_path / "work", env=isolated_env(tmp_path), tools=[add],
                  plugins=[Plugin("loud", setup)])
    async with oc:
        sid = (await oc.session.create()).id
        await oc.session.prompt(sid, prompt={"text": "go"})
        with anyio.fail_after(30):
            await oc.session.wait(sid)
        log = [e async for e in oc.session.log(sid, follow=False)]
    offered = {t["function"]["name"]: t["function"] for t in provider.requests[0].json["tools"]}
    assert offered["add"]["description"] == "Add two numbers."
    assert offered["add"]["parameters"]["properties"] == {"a": {"type": "integer"}, "b": {"type": "integer"}}
    assert offered["shout"]["parameters"]["properties"]["text"] == {"type": "string", "minLength": 1,
                                                                    "description": "What to shout"}
    succeeded = {e.data.callID: e.data.content[0].text for e in log if e.type == "session.tool.success"}
    assert succeeded == {"call_1": "5", "call_2": "HI!"}
    failed = [e.data for e in log if e.type == "session.tool.failed"]
    assert [(f.callID, f.error.type) for f in failed] == [("call_3", session_errors.TOOL_INVALID_INPUT)]
