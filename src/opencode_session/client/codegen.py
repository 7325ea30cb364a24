"""Emits `client/generated.py` (typed groups and OpenCodeClient) from protocol's SDK Contract IR, and only from it.

Run `python -m opencode_session.client.codegen` to rewrite the file, or with `--check` to exit 1 when it is stale.
"""

from __future__ import annotations

import argparse
import re
import sys
import textwrap
from pathlib import Path

from opencode_session.protocol.ir import ContractIR, Operation, Param, TypeExpr, contract

TARGET = Path(__file__).with_name("generated.py")
WIDTH = 110
INDENT = "    "
SHADOWABLE = {"list", "dict", "set", "frozenset", "tuple", "type"}

HEADER = '''"""Typed operation groups and OpenCodeClient, generated from protocol's SDK Contract IR.

Do not edit: run `python -m opencode_session.client.codegen` after changing protocol.
"""

from __future__ import annotations
'''

RUNTIME_IMPORTS = (
    ("functools", "cached_property"),
    ("typing", "cast"),
    ("opencode_session.client.runtime", "BaseClient"),
    ("opencode_session.client.runtime", "CallOptions"),
)


def _pascal(name: str) -> str:
    return "".join(p[:1].upper() + p[1:] for p in name.split("_"))


def _imports(names: set[tuple[str, str]]) -> str:
    by_module: dict[str, set[str]] = {}
    for module, name in names:
        by_module.setdefault(module, set()).add(name)
    stdlib = sorted(m for m in by_module if not m.startswith("opencode_session"))
    ours = sorted(m for m in by_module if m.startswith("opencode_session"))
    blocks: list[str] = []
    for modules in (stdlib, ours):
        lines: list[str] = []
        for module in modules:
            if module == "":
                lines.extend(f"import {n}" for n in sorted(by_module[module]))
                continue
            line = f"from {module} import {', '.join(sorted(by_module[module]))}"
            if len(line) > WIDTH:
                inner = "".join(f"{INDENT}{n},\n" for n in sorted(by_module[module]))
                line = f"from {module} import (\n{inner})"
            lines.append(line)
        if lines:
            blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def _call_lines(head: str, args: list[str], tail: str, indent: str) -> list[str]:
    """`head(args)tail` on one line when it fits, else one argument per line with a trailing comma."""
    one = f"{indent}{head}({', '.join(args)}){tail}"
    if len(one) <= WIDTH and "\n" not in one:
        return [one]
    return [f"{indent}{head}(", *[f"{indent}{INDENT}{a}," for a in args], f"{indent}){tail}"]


def _result_type(op: Operation) -> TypeExpr:
    result = op.result
    if result.kind == "websocket":
        return TypeExpr("WebSocketSession", (("opencode_session.client.websocket", "WebSocketSession"),))
    if result.kind == "none" or result.type is None:
        return TypeExpr("None")
    if result.kind == "page":
        page = ("opencode_session.client.runtime", "Page")
        return TypeExpr(f"Page[{result.type.expr}]", (*result.type.imports, page))
    if result.kind == "stream":
        return TypeExpr(
            f"EventStream[{result.type.expr}]", (*result.type.imports, ("opencode_session.client.sse", "EventStream"))
        )
    return result.type


def _parameter(p: Param, shadowed: set[str]) -> str:
    return f"{p.python_name}: {_shadow_builtins(p.type.expr, shadowed)}" + ("" if p.required else " = None")


def _mapping(keyword: str, params: tuple[Param, ...], indent: str) -> str:
    """`keyword={...}` on one line when it fits as a call argument, else one entry per line."""
    entries = [f'"{p.name}": {p.python_name}' for p in params]
    one = f"{keyword}={{{', '.join(entries)}}}"
    if len(indent) + len(one) + 1 <= WIDTH:
        return one
    inner = "".join(f"{indent}{INDENT}{e},\n" for e in entries)
    return f"{keyword}={{\n{inner}{indent}}}"


def _shadow_builtins(expr: str, shadowed: set[str]) -> str:
    # A method named `list` would otherwise capture `list[...]` annotations for type checkers.
    for name in shadowed:
        expr = re.sub(rf"(?<![\w.]){name}\[", f"builtins.{name}[", expr)
    return expr


def _docstring(op: Operation, indent: str) -> list[str]:
    summary = op.summary.rstrip(".") + "."
    paragraphs = [op.description] if op.description and op.description != op.summary else []
    errors = ", ".join(f"{e.tag} ({e.status})" for e in sorted(op.errors, key=lambda e: (e.status, e.tag)))
    paragraphs.append(f"`{op.method} {op.path}` ({op.operation_id}). Declared errors: {errors}.")
    lines = [f'{indent}"""{summary}', ""]
    for i, paragraph in enumerate(paragraphs):
        lines.extend(textwrap.wrap(paragraph, WIDTH - len(indent), initial_indent=indent, subsequent_indent=indent))
        if i < len(paragraphs) - 1:
            lines.append("")
    lines.append(f'{indent}"""')
    return lines


def _method(op: Operation, shadowed: set[str]) -> tuple[list[str], set[tuple[str, str]]]:
    indent = INDENT
    body_indent = INDENT * 2
    result = _result_type(op)
    imports = set(result.imports)
    params = [*op.path_params, *op.query_params, *op.body_params]
    for p in params:
        imports.update(p.type.imports)
    signature = ["self", *(_parameter(p, shadowed) for p in op.path_params), "*"]
    # Required keyword-only arguments first: Python allows any order there, readers expect this one.
    keyword = sorted((*op.query_params, *op.body_params), key=lambda p: not p.required)
    signature += [_parameter(p, shadowed) for p in keyword]
    signature.append("options: CallOptions | None = None")
    streaming = op.result.kind in ("stream", "websocket")  # both connect lazily: the method itself sends nothing
    head = f"def {op.name}" if streaming else f"async def {op.name}"
    lines = _call_lines(head, signature, f" -> {_shadow_builtins(result.expr, shadowed)}:", indent)
    lines += _docstring(op, body_indent)
    call_args = [f'"{op.operation_id}"']
    arg_indent = body_indent + INDENT
    for keyword_name, group in (("path", op.path_params), ("query", op.query_params), ("body", op.body_params)):
        if group:
            call_args.append(_mapping(keyword_name, group, arg_indent))
    call_args.append("options=options")
    if op.result.kind == "websocket":
        lines += _call_lines("return self._client._websocket", call_args, "", body_indent)
    elif streaming:
        lines += _call_lines("return self._client._stream", call_args, "", body_indent)
    elif op.result.kind == "none" or op.result.type is None:
        lines += _call_lines("await self._client._call", call_args, "", body_indent)
    else:
        # the runtime decodes the answer with the operation's own response model: this is its type
        cast_to = _shadow_builtins(result.expr, shadowed)
        lines += _call_lines(f'return cast("{cast_to}", await self._client._call', call_args, ")", body_indent)
    return lines, imports


def _group(name: str, ops: tuple[Operation, ...]) -> tuple[list[str], set[tuple[str, str]]]:
    lines = [
        f"class {_pascal(name)}Group:",
        f'{INDENT}"""Operations of the `{name}` group."""',
        "",
        f"{INDENT}def __init__(self, client: BaseClient) -> None:",
        f"{INDENT * 2}self._client = client",
    ]
    imports: set[tuple[str, str]] = set()
    shadowed = {op.name for op in ops} & SHADOWABLE
    for op in ops:
        method, needed = _method(op, shadowed)
        lines += ["", *method]
        imports |= needed
    return lines, imports


def _client_class(groups: list[str]) -> list[str]:
    lines = [
        "class OpenCodeClient(BaseClient):",
        f'{INDENT}"""The OpenCode V2 network client: one attribute per operation group (`client.session.get(id)`)."""',
    ]
    for name in groups:
        lines += [
            "",
            f"{INDENT}@cached_property",
            f"{INDENT}def {name}(self) -> {_pascal(name)}Group:",
            f"{INDENT * 2}return {_pascal(name)}Group(self)",
        ]
    return lines


def render(ir: ContractIR | None = None) -> str:
    """The complete source of generated.py for `ir` (the protocol's contract by default); deterministic."""
    ir = ir or contract()
    groups = ir.groups()
    imports: set[tuple[str, str]] = set(RUNTIME_IMPORTS)
    classes: list[list[str]] = []
    for name, ops in groups.items():
        lines, needed = _group(name, ops)
        imports |= needed
        classes.append(lines)
    classes.append(_client_class(list(groups)))
    body = "\n\n\n".join("\n".join(c) for c in classes)
    if "builtins." in body:
        imports.add(("", "builtins"))
    names = sorted([*(f"{_pascal(g)}Group" for g in groups), "OpenCodeClient"])
    quoted = [f'"{n}"' for n in names]
    exports = f"__all__ = [{', '.join(quoted)}]"
    if len(exports) > WIDTH:
        exports = "__all__ = [\n" + "".join(f"{INDENT}{q},\n" for q in quoted) + "]"
    return f"{HEADER}\n{_imports(imports)}\n\n{exports}\n\n\n{body}\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m opencode_session.client.codegen", description=__doc__)
    parser.add_argument("--check", action="store_true", help="exit 1 if the checked-in file differs")
    parser.add_argument("--output", type=Path, default=TARGET, help="where to write (default: %(default)s)")
    args = parser.parse_args(argv)
    source = render()
    current = args.output.read_text(encoding="utf-8") if args.output.exists() else None
    if args.check:
        if current != source:
            print(f"{args.output} is stale; run python -m opencode_session.client.codegen", file=sys.stderr)
            return 1
        return 0
    if current != source:
        args.output.write_text(source, encoding="utf-8")
        print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
