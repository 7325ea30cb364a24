"""Client generation: the checked-in generated.py equals a fresh render of the IR and stays network-only."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import json
import subprocess
import sys
from pathlib import Path

from opencode_session.client import codegen
from opencode_session.client.generated import OpenCodeClient, SessionGroup
from opencode_session.protocol.ir import contract

ROOT = Path(__file__).resolve().parents[1]
GENERATED = ROOT / "src" / "opencode_session" / "client" / "generated.py"
ALLOWED_PREFIXES = ("opencode_session.client", "opencode_session.protocol", "opencode_session.schema")


def test_checked_in_client_is_up_to_date():
    assert GENERATED.read_text(encoding="utf-8") == codegen.render(), (
        "generated.py is stale: run `python -m opencode_session.client.codegen`"
    )


def test_rendering_is_deterministic():
    assert codegen.render() == codegen.render(contract())


def test_check_mode_reports_stale_output(tmp_path):
    target = tmp_path / "generated.py"
    target.write_text("# stale\n")
    assert codegen.main(["--check", "--output", str(target)]) == 1
    assert codegen.main(["--output", str(target)]) == 0
    assert codegen.main(["--check", "--output", str(target)]) == 0
    assert target.read_text() == codegen.render()


def test_generated_module_imports_only_client_protocol_schema_and_stdlib():
    tree = ast.parse(GENERATED.read_text(encoding="utf-8"))
    modules = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            modules.add(node.module or "")
        elif isinstance(node, ast.Import):
            modules.update(alias.name for alias in node.names)
    ours = {m for m in modules if m.startswith("opencode_session")}
    assert ours and all(m.startswith(ALLOWED_PREFIXES) for m in ours), ours
    assert modules - ours <= {"__future__", "builtins", "functools", "typing"}


def test_importing_the_client_loads_no_core_server_or_database():
    code = (
        "import sys, json; import opencode_session.client.generated; "
        "banned = ('sqlite3', 'opencode_session.core', 'opencode_session.server', 'opencode_session.sdk', "
        "'opencode_session.cli'); "
        "print(json.dumps(sorted(m for m in sys.modules if any(m == b or m.startswith(b + '.') for b in banned))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert json.loads(out.stdout) == []


def test_ir_is_plain_data():
    ir = contract()
    json.dumps(dataclasses.asdict(ir))  # no classes or callables hide in it
    ops = {op.operation_id: op for op in ir.operations}
    get = ops["v2.session.get"]
    assert (get.group, get.name, get.method, get.result.kind) == ("session", "get", "GET", "data")
    assert [(p.name, p.python_name, p.location) for p in get.path_params] == [("sessionID", "session_id", "path")]
    assert ops["v2.session.list"].result.kind == "page"
    assert ops["v2.session.log"].result.content_type == "text/event-stream"
    assert ops["v2.location.get"].query_params[0].style == "deepObject"
    assert {(e.tag, e.status) for e in ops["v2.session.prompt"].errors} >= {("ConflictError", 409)}


def test_generated_signatures():
    create = inspect.signature(SessionGroup.create)
    assert all(p.kind is p.KEYWORD_ONLY for name, p in create.parameters.items() if name != "self")
    assert list(create.parameters) == ["self", "id", "agent", "model", "location", "parent_id", "title", "metadata",
                                       "permissions", "options"]
    message = inspect.signature(SessionGroup.message)
    assert [p.kind for p in list(message.parameters.values())[1:3]] == [inspect.Parameter.POSITIONAL_OR_KEYWORD] * 2
    assert inspect.iscoroutinefunction(SessionGroup.get)
    assert not inspect.iscoroutinefunction(SessionGroup.events)
    client = OpenCodeClient("http://unused")
    assert isinstance(client.session, SessionGroup) and client.session is client.session


def test_python_arguments_are_snake_case_while_the_wire_keeps_its_names():
    import re

    for op in contract().operations:
        for param in (*op.path_params, *op.query_params, *op.body_params):
            assert re.fullmatch(r"[a-z][a-z0-9_]*", param.python_name), (op.operation_id, param.python_name)
    stage = next(op for op in contract().operations if op.operation_id == "v2.session.revert.stage")
    assert [(p.name, p.python_name) for p in stage.body_params][0] == ("messageID", "message_id")
