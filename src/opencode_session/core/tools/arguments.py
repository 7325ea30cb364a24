"""Typed tool arguments: the JSON Schema a pydantic model of a tool's arguments offers the model, and a typed Python
function turned into a tool (its parameters, or its one pydantic model parameter, are the arguments; its docstring is
the description).

A tool declares `arguments = SomeModel` and `parameters = schema_of(SomeModel)`; the registry checks a call's input
against `parameters` (the error the model reads names the field), parses it into `SomeModel` and hands `execute` the
object. `schema_of` writes what a person would write by hand: no titles, defaults or `$defs`, optional fields without
their `null`, a model's docstring left out (it documents the code, the field descriptions document the schema), and
keys in one order (type, constraints, items or properties, description), so providers see a stable text."""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from functools import lru_cache
from typing import Any, cast, get_type_hints

import anyio.to_thread
from pydantic import BaseModel, ConfigDict, create_model

from .tool import Tool, ToolContext, ToolOutput

# The keys a schema node keeps, in the order it lists them; any other key follows them, and `description` comes last.
_ORDER = ("type", "enum", "minLength", "maxLength", "pattern", "minItems", "maxItems", "minimum", "exclusiveMinimum",
          "maximum", "exclusiveMaximum", "items", "properties", "required", "additionalProperties")
_DROPPED = frozenset({"title", "default", "$defs"})


class Arguments(BaseModel):
    """A base for argument models: unknown keys are refused (`additionalProperties: false`)."""

    model_config = ConfigDict(extra="forbid")


def schema_of(model: type[BaseModel]) -> dict[str, Any]:
    """The JSON Schema (2020-12) `model` offers as a tool's `parameters` (a fresh copy each call)."""
    return cast(dict[str, Any], json.loads(_schema_text(model)))


def is_schema_of(parameters: str, model: type[BaseModel]) -> bool:
    """Whether `parameters` (JSON text) is exactly what `schema_of(model)` gives, so a JSON Schema by construction."""
    return parameters == _schema_text(model)


@lru_cache(maxsize=1024)
def _schema_text(model: type[BaseModel]) -> str:
    raw = model.model_json_schema()
    shaped = _shape(raw, raw.get("$defs", {}))
    shaped.pop("description", None)  # the model's docstring
    return json.dumps(shaped)


def _shape(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    ref = node.get("$ref")
    if ref is not None:  # a nested model: its definition, with the field's own keys (its description) over it
        target = {k: v for k, v in defs[ref.rsplit("/", 1)[-1]].items() if k != "description"}
        node = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
    branches = node.get("anyOf")
    if branches is not None:
        kept = [b for b in branches if b != {"type": "null"}]
        node = {k: v for k, v in node.items() if k != "anyOf"}
        if len(kept) == 1:  # `X | None = None`: the field may be left out, not sent as null
            node = {**kept[0], **node}
        else:
            node["anyOf"] = kept
    if "const" in node:  # a one-value Literal reads as the enum it is
        node = {**{k: v for k, v in node.items() if k != "const"}, "enum": [node["const"]]}
    out: dict[str, Any] = {}
    keys = [k for k in _ORDER if k in node] + [k for k in node if k not in _ORDER and k != "description"]
    for key in [*keys, "description"] if "description" in node else keys:
        if key in _DROPPED:
            continue
        value = node[key]
        if key == "properties":
            value = {name: _shape(field, defs) for name, field in value.items()}
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            value = _shape(value, defs)
        elif key == "anyOf":
            value = [_shape(branch, defs) for branch in value]
        elif key == "required" and not value:
            continue
        out[key] = value
    if node.get("additionalProperties") is True:
        del out["additionalProperties"]  # the default: said only when refused
    return out


class FunctionTool:
    """A tool made of a typed function. A parameter annotated `ToolContext` receives the call's context; the others
    are the arguments (`Annotated[str, Field(description=...)]` describes one), or a single pydantic model parameter
    is. The docstring is the description. The function returns a ToolOutput, a string (the text the model reads) or
    a dict (a structured result, read as JSON); a plain (not async) one runs in a worker thread."""

    def __init__(self, function: Callable[..., Any], *, name: str | None = None, description: str | None = None,
                 changes_files: bool = True, idempotent: bool = False) -> None:
        self.function = function
        self.name = name or function.__name__
        text = description if description is not None else inspect.getdoc(function)
        if not text:
            raise ValueError(f"tool {self.name} needs a description: give the function a docstring")
        self.description = text
        self.changes_files = changes_files
        self.idempotent = idempotent
        self._context, self._model_parameter, self.arguments = _signature(function, self.name)
        self.parameters = schema_of(self.arguments)

    async def execute(self, args: BaseModel, ctx: ToolContext) -> ToolOutput:
        if self._model_parameter is not None:
            kwargs: dict[str, Any] = {self._model_parameter: args}
        else:
            kwargs = {field: getattr(args, field) for field in type(args).model_fields}
        if self._context is not None:
            kwargs[self._context] = ctx
        if inspect.iscoroutinefunction(self.function):
            result = await self.function(**kwargs)
        else:  # a plain function may block: it runs in a worker thread
            result = await anyio.to_thread.run_sync(lambda: self.function(**kwargs))
        return _as_output(self.name, result)


def _signature(function: Callable[..., Any], name: str) -> tuple[str | None, str | None, type[BaseModel]]:
    """The context parameter's name, the model parameter's name (when the arguments are one pydantic model) and the
    arguments model."""
    hints = get_type_hints(function, include_extras=True)
    context: str | None = None
    fields: dict[str, Any] = {}
    for parameter in inspect.signature(function).parameters.values():
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            raise TypeError(f"tool {name}: *args and **kwargs cannot be arguments ({parameter.name})")
        hint = hints.get(parameter.name)
        if hint is None:
            raise TypeError(f"tool {name}: parameter {parameter.name!r} needs a type annotation")
        if hint is ToolContext:
            context = parameter.name
            continue
        default = ... if parameter.default is parameter.empty else parameter.default
        fields[parameter.name] = (hint, default)
    if len(fields) == 1:
        (only, (hint, _)), = fields.items()
        if isinstance(hint, type) and issubclass(hint, BaseModel):
            return context, only, hint
    model = create_model(f"{name}_arguments", __base__=Arguments, **fields)
    return context, None, model


def _as_output(name: str, result: Any) -> ToolOutput:
    if isinstance(result, ToolOutput):
        return result
    if isinstance(result, str):
        return ToolOutput.of_text(result)
    if isinstance(result, dict):
        return ToolOutput(content=[], structured=result)
    raise TypeError(f"tool {name} returned {type(result).__name__}; return a ToolOutput, a str or a dict")


def as_tool(tool: Tool | Callable[..., Any]) -> Tool:
    """`tool` itself when it is a tool object (it has `execute`), else the FunctionTool of the function it is."""
    return cast(Tool, tool) if hasattr(tool, "execute") else FunctionTool(tool)


def registering(add: Callable[[Tool], None], function: Callable[..., Any] | None,
                options: dict[str, Any]) -> Any:
    """What `@registry.tool` and `@registry.tool(...)` return: `add` gets the function's FunctionTool, and the
    function itself is handed back unchanged (still callable, e.g. by its tests)."""
    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        add(FunctionTool(fn, **options))
        return fn
    return register if function is None else register(function)
