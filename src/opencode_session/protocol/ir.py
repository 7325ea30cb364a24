"""The SDK Contract IR: ENDPOINTS compiled once into plain data for emitters.

Names, wire positions and Python type expressions; client codegen reads nothing else.
"""

from __future__ import annotations

import json
import keyword
import sys
import types
import typing
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from pydantic import BaseModel

from .api import ENDPOINTS
from .endpoint import BYTES_CONTENT_TYPE, JSON_CONTENT_TYPE, SSE_CONTENT_TYPE, Endpoint, _snake

RESERVED = frozenset({"self", "options"})


@dataclass(frozen=True)
class TypeExpr:
    """A Python type expression as source text plus the `(module, name)` imports it needs."""

    expr: str
    imports: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Param:
    name: str
    python_name: str
    location: str  # path | query | body
    required: bool
    type: TypeExpr
    style: str  # simple (path) | form | deepObject (query) | json (body)


@dataclass(frozen=True)
class ErrorDecl:
    tag: str
    status: int
    type: TypeExpr


@dataclass(frozen=True)
class Result:
    status: int
    kind: str  # none | data | page | raw | bytes | stream | websocket
    content_type: str | None
    type: TypeExpr | None  # the value (page and stream: one item) a caller receives


@dataclass(frozen=True)
class Operation:
    operation_id: str
    client_name: tuple[str, ...]
    method: str
    path: str
    summary: str
    description: str
    path_params: tuple[Param, ...]
    query_params: tuple[Param, ...]
    body_params: tuple[Param, ...]
    result: Result
    errors: tuple[ErrorDecl, ...]

    @property
    def group(self) -> str:
        return self.client_name[0]

    @property
    def name(self) -> str:
        return "_".join(self.client_name[1:])


@dataclass(frozen=True)
class ContractIR:
    operations: tuple[Operation, ...]

    def groups(self) -> dict[str, tuple[Operation, ...]]:
        """Operations by client group, groups and operations sorted by name."""
        out: dict[str, list[Operation]] = {}
        for op in self.operations:
            out.setdefault(op.group, []).append(op)
        return {g: tuple(sorted(ops, key=lambda o: o.name)) for g, ops in sorted(out.items())}


# --- type expressions ----------------------------------------------------------------------------


def _merge(*exprs: TypeExpr) -> tuple[tuple[str, str], ...]:
    return tuple(sorted({imp for e in exprs for imp in e.imports}))


def _named(obj: Any, modules: Iterable[str]) -> TypeExpr | None:
    """The importable module-level name bound to `obj`, for aliases such as `SessionMessage`."""
    candidates = [m for m in modules if m in sys.modules]
    for match in (lambda v: v is obj, lambda v: v == obj):
        for module in candidates:
            for name, value in sorted(vars(sys.modules[module]).items()):
                if not name.startswith("_") and match(value):
                    return TypeExpr(name, ((module, name),))
    return None


def _class_expr(cls: type) -> TypeExpr:
    module, name = cls.__module__, cls.__qualname__
    if module == "builtins":
        return TypeExpr(name)
    if getattr(sys.modules.get(module), name, None) is not cls:
        raise TypeError(f"{cls!r} is not importable as {module}.{name}")
    return TypeExpr(name, ((module, name),))


def _top_level_members(expr: str) -> list[str]:
    """`A | list[B | C] | None` -> ["A", "list[B | C]", "None"]."""
    members, depth, start = [], 0, 0
    for i, char in enumerate(expr):
        depth += {"[": 1, "]": -1}.get(char, 0)
        if depth == 0 and expr.startswith(" | ", i):
            members.append(expr[start:i])
            start = i + 3
    members.append(expr[start:])
    return members


def _union(parts: list[TypeExpr]) -> TypeExpr:
    seen: list[str] = []
    for part in parts:
        for piece in _top_level_members(part.expr):
            if piece not in seen:
                seen.append(piece)
    if "None" in seen:  # keep None last, the way people write it
        seen = [s for s in seen if s != "None"] + ["None"]
    return TypeExpr(" | ".join(seen), _merge(*parts))


def render_type(tp: Any, *, accepts_dict: bool = False) -> TypeExpr:
    """Source text for `tp`; with `accepts_dict`, every model also accepts its plain-dict wire form."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if tp is type(None) or tp is None:
        return TypeExpr("None")
    if tp is Any:
        return TypeExpr("Any", (("typing", "Any"),))
    if origin is typing.Annotated:
        inner = args[0]
        if typing.get_origin(inner) in (typing.Union, types.UnionType):
            members = [a for a in typing.get_args(inner) if isinstance(a, type)]
            named = _named(tp, [*(m.__module__ for m in members), __package__ + ".api"])
            if named is not None:
                return named
        return render_type(inner, accepts_dict=accepts_dict)
    if origin in (typing.Union, types.UnionType):
        return _union([render_type(a, accepts_dict=accepts_dict) for a in args])
    if origin is typing.Literal:
        values = ", ".join(json.dumps(a) if isinstance(a, str) else repr(a) for a in args)
        return TypeExpr(f"Literal[{values}]", (("typing", "Literal"),))
    if origin in (list, tuple, set, frozenset, dict):
        inner_exprs = [
            TypeExpr("...") if a is Ellipsis else render_type(a, accepts_dict=accepts_dict) for a in args
        ]
        return TypeExpr(f"{origin.__name__}[{', '.join(e.expr for e in inner_exprs)}]", _merge(*inner_exprs))
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        expr = _class_expr(tp)
        return TypeExpr(f"{expr.expr} | dict[str, Any]", (*expr.imports, ("typing", "Any"))) if accepts_dict else expr
    if isinstance(tp, type):
        return _class_expr(tp)
    raise TypeError(f"cannot render type {tp!r}")


# --- compiling -----------------------------------------------------------------------------------


def _python_name(wire: str, snake: bool) -> str:
    name = _snake(wire) if snake else wire
    if not name.isidentifier() or keyword.iskeyword(name) or name in RESERVED:
        name = "".join(c if c.isalnum() or c == "_" else "_" for c in name) + "_"
    return name


def _params(model: type[BaseModel] | None, location: str) -> tuple[Param, ...]:
    if model is None:
        return ()
    params = []
    for field_name, info in model.model_fields.items():
        wire = info.alias or field_name
        required = info.is_required()
        expr = render_type(info.annotation, accepts_dict=True)
        if not required and "None" not in _top_level_members(expr.expr):
            expr = TypeExpr(f"{expr.expr} | None", expr.imports)
        if location == "path":
            style = "simple"
        elif location == "body":
            style = "json"
        else:
            target = typing.get_args(info.annotation) or (info.annotation,)
            objects = [t for t in target if isinstance(t, type) and issubclass(t, BaseModel)]
            style = "deepObject" if objects else "form"
        params.append(
            Param(
                name=wire,
                # Python names are snake_case (`message_id`), the wire keeps its own (`messageID`); a wire name
                # that is no identifier (`location[directory]`) is called by its field's name
                python_name=_python_name(wire if wire.isidentifier() else field_name, snake=True),
                location=location,
                required=required or location == "path",
                type=expr,
                style=style,
            )
        )
    return tuple(params)


def _result(ep: Endpoint) -> Result:
    kind = ep.result_kind
    if kind == "none":
        return Result(ep.success_status, kind, None, None)
    if kind == "stream":
        assert ep.stream is not None
        return Result(ep.success_status, kind, SSE_CONTENT_TYPE, render_type(ep.stream.item))
    if kind == "bytes":
        return Result(ep.success_status, kind, BYTES_CONTENT_TYPE, TypeExpr("bytes"))
    if kind == "websocket":  # the emitter's connection object is the result
        return Result(ep.success_status, kind, None, None)
    return Result(ep.success_status, kind, JSON_CONTENT_TYPE, render_type(ep.success))


def compile_operation(ep: Endpoint) -> Operation:
    path = _params(ep.path_params, "path")
    query = _params(ep.query, "query")
    body = _params(ep.body, "body")
    names = [p.python_name for p in (*path, *query, *body)]
    if len(set(names)) != len(names):
        raise ValueError(f"{ep.operation_id}: parameter names collide: {names}")
    return Operation(
        operation_id=ep.operation_id,
        client_name=ep.client_name,
        method=ep.method,
        path=ep.path,
        summary=ep.summary,
        description=ep.description,
        path_params=path,
        query_params=query,
        body_params=body,
        result=_result(ep),
        errors=tuple(ErrorDecl(e.__name__, status, _class_expr(e)) for e, status in ep.declared_errors),
    )


def compile_ir(endpoints: Iterable[Endpoint] = ENDPOINTS) -> ContractIR:
    return ContractIR(tuple(compile_operation(ep) for ep in endpoints))


@lru_cache(maxsize=1)
def contract() -> ContractIR:
    """The IR of ENDPOINTS, compiled once per process."""
    return compile_ir(ENDPOINTS)
