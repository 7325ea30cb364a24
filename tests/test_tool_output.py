"""Bounded Model Tool Output with Managed Tool Output Files, against a real directory: the exact limits with
multi-byte text, the file holding the complete text, the lossy path when the directory cannot be written, the
7-day sweep, and that ordinary tools read managed files without asking."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from opencode_session.core.tools import ToolContext, ToolOutput, ToolRegistry, ToolSucceeded
from opencode_session.core.tools.managed import RETENTION_SECONDS, ManagedOutputs
from opencode_session.core.tools.registry import QUICK_CHECK_CHARS, default_registry
from opencode_session.sdk import OpenCode
from tests.security.conftest import write_provider_config
from tests.support import fake_openai as fake
from tests.support.server import isolated_env

pytestmark = pytest.mark.anyio

LINES, BYTES = 10, 1000


class Echo:
    name = "echo"
    description = "Returns its text."
    parameters: dict[str, Any] = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}

    async def execute(self, input: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        return ToolOutput.of_text(input["text"])


def ctx(directory: Path, managed: Path | None = None) -> ToolContext:
    return ToolContext(session_id="ses_1", message_id="msg_1", call_id="call_1", agent="build", directory=directory,
                       project_root=directory, managed_roots=() if managed is None else (managed,))


def registry(outputs: ManagedOutputs | None) -> ToolRegistry:
    reg = ToolRegistry(max_lines=LINES, max_bytes=BYTES, outputs=outputs)
    reg.register(Echo())
    return reg


async def echo(reg: ToolRegistry, tmp_path: Path, text: str) -> ToolSucceeded:
    result = await reg.settle("echo", {"text": text}, ctx(tmp_path))
    assert isinstance(result, ToolSucceeded)
    return result


async def test_multibyte_text_at_the_exact_byte_limit_is_kept_whole(tmp_path):
    outputs = ManagedOutputs(tmp_path / "tool-output")
    exact = "€" * (BYTES // 3) + "ab"[: BYTES % 3]  # three-byte characters up to exactly BYTES bytes
    assert len(exact.encode()) == BYTES
    result = await echo(registry(outputs), tmp_path, exact)
    assert (result.output.text(), result.truncated, result.output_path) == (exact, False, None)
    assert not outputs.root.exists()  # nothing to keep

    over = exact + "€"
    result = await echo(registry(outputs), tmp_path, over)
    preview = result.output.text()
    assert result.truncated and result.output_path is not None
    assert len(preview.encode()) <= BYTES and "\ufffd" not in preview
    assert result.output_path in preview  # the preview names the file
    kept = Path(result.output_path)
    assert kept.parent == outputs.root and kept.read_text(encoding="utf-8") == over  # the file holds everything
    assert kept.stat().st_mode & 0o777 == 0o600 and outputs.root.stat().st_mode & 0o777 == 0o700


async def test_the_line_limit_is_exact_and_head_and_tail_are_kept(tmp_path):
    outputs = ManagedOutputs(tmp_path / "tool-output")
    exact = "\n".join(f"é{i}" for i in range(LINES))
    assert (await echo(registry(outputs), tmp_path, exact)).truncated is False
    over = exact + "\nlast"
    result = await echo(registry(outputs), tmp_path, over)
    preview = result.output.text()
    assert result.truncated and preview.count("\n") + 1 <= LINES
    assert preview.startswith("é0\n") and preview.endswith("\nlast")
    assert Path(result.output_path).read_text(encoding="utf-8") == over


async def test_each_oversized_output_gets_its_own_file(tmp_path):
    outputs = ManagedOutputs(tmp_path / "tool-output")
    paths = {(await echo(registry(outputs), tmp_path, f"{n}\n" * 50)).output_path for n in range(3)}
    assert len(paths) == 3 and all(Path(p).name.startswith("tool_") for p in paths)


@pytest.mark.parametrize("blocked", ["a file", "read-only"])
async def test_an_unwritable_directory_is_lossy_not_a_failure(tmp_path, caplog, blocked):
    parent = tmp_path / "data"
    parent.mkdir()
    if blocked == "a file":
        (parent / "tool-output").write_text("not a directory")
    else:
        if os.geteuid() == 0:
            pytest.skip("running as root: a read-only directory is still writable (the 'a file' case covers this)")
        parent.chmod(0o500)
    outputs = ManagedOutputs(parent / "tool-output")
    with caplog.at_level(logging.WARNING, logger="opencode_session.core.tools.managed"):
        result = await echo(registry(outputs), tmp_path, "x\n" * 100)
    parent.chmod(0o700)
    assert result.truncated and result.output_path is None
    assert "could not be kept" in result.output.text() and len(result.output.text().encode()) <= BYTES
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and str(outputs.root) in warnings[0].getMessage()


def test_the_sweep_removes_files_older_than_seven_days(tmp_path):
    outputs = ManagedOutputs(tmp_path / "tool-output")
    old, recent = Path(outputs.keep("old")), Path(outputs.keep("recent"))
    now = time.time()
    os.utime(old, (now - RETENTION_SECONDS - 60, now - RETENTION_SECONDS - 60))
    os.utime(recent, (now - RETENTION_SECONDS + 60, now - RETENTION_SECONDS + 60))
    assert outputs.sweep(now) == 1
    assert not old.exists() and recent.read_text() == "recent"
    assert ManagedOutputs(tmp_path / "missing").sweep(now) == 0


async def test_ordinary_tools_read_managed_files_without_asking(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    outputs = ManagedOutputs(tmp_path / "data" / "tool-output")
    kept = outputs.keep("the whole output\n")
    assert kept is not None
    tools = default_registry()
    # no asker: anything that needed external_directory would fail as permission.required
    found = await tools.settle("glob", {"pattern": "*", "path": str(outputs.root)}, ctx(work, outputs.root))
    assert isinstance(found, ToolSucceeded) and kept.name in found.output.text()
    outside = await tools.settle("glob", {"pattern": "*", "path": str(tmp_path / "data")}, ctx(work, outputs.root))
    assert not isinstance(outside, ToolSucceeded) and outside.error.type == "permission.required"


class InterruptingOutputs(ManagedOutputs):
    """Interrupts the session's execution while the complete output is being written."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.interrupt: Any = None  # set by the test: an async function that requests the interrupt

    def keep(self, text: str) -> Path | None:
        anyio.from_thread.run(self.interrupt)
        return super().keep(text)


class Big:
    name = "big"
    description = "Returns many lines."
    parameters: dict[str, Any] = {"type": "object", "properties": {}}

    async def execute(self, input: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        return ToolOutput.of_text("\n".join(f"line {n}" for n in range(100)))


async def test_an_interrupt_cannot_tear_bounding_and_publishing_apart(tmp_path, loop_provider):
    (tmp_path / "work").mkdir()
    write_provider_config(tmp_path, loop_provider, tool_output={"max_lines": 5})
    call = fake.tool_call_deltas(0, "call_1", "big", "{}")
    loop_provider.enqueue(fake.completion(call, finish_reason="tool_calls"))
    oc = OpenCode(db=tmp_path / "db.sqlite", directory=tmp_path / "work", env=isolated_env(tmp_path), tools=[Big()])
    outputs = oc.tools.outputs = InterruptingOutputs(tmp_path / "tool-output")  # read as the host opens
    async with oc:
        sid = (await oc.session.create()).id
        interrupts: list[asyncio.Task[Any]] = []

        async def interrupt() -> None:
            assert oc.runtime.execution is not None
            interrupts.append(asyncio.create_task(oc.runtime.execution.interrupt(sid, "user")))
            await asyncio.sleep(0)  # one turn of the loop: the interrupt has cancelled the execution by now

        outputs.interrupt = interrupt
        await oc.session.prompt(sid, prompt={"text": "go"})
        with anyio.fail_after(60):
            await oc.session.wait(sid)
            await interrupts[0]
        log = [e async for e in oc.session.log(sid, follow=False)]
    success = [e for e in log if e.type == "session.tool.success"]
    assert len(success) == 1 and Path(success[0].data.outputPaths[0]).read_text().endswith("line 99")
    assert not [e for e in log if e.type == "session.tool.failed"]
    assert [e.type for e in log if e.type.startswith("session.execution.")][-1] == "session.execution.interrupted"


def test_the_quick_check_on_the_loop_agrees_with_bounding(tmp_path):
    registry = ToolRegistry(max_lines=LINES, max_bytes=BYTES, outputs=ManagedOutputs(tmp_path / "out"))
    cases = {
        "fits": "é" * 499,  # 998 bytes: within both bounds
        "too many bytes": "é" * 501,
        "too many lines": "line\n" * (LINES + 1),
        "too large to check quickly": "x" * (QUICK_CHECK_CHARS + 1),
    }
    for name, text in cases.items():
        settlement = ToolSucceeded(ToolOutput.of_text(text))
        quick = registry.within_bounds(settlement)
        unchanged = registry.bound(settlement) is settlement
        assert quick <= unchanged, name  # never claims "nothing to do" when bounding would change the output
        assert quick == (name == "fits"), name
    assert len(list((tmp_path / "out").iterdir())) == 3  # only the outputs that did not fit were kept in files
    huge_but_fitting = ToolRegistry(max_lines=10**9, max_bytes=10**9)
    settlement = ToolSucceeded(ToolOutput.of_text("y" * (QUICK_CHECK_CHARS + 1)))
    assert not huge_but_fitting.within_bounds(settlement) and huge_but_fitting.bound(settlement) is settlement


class Rows:
    """Returns only a structured value: `count` rows, no text."""

    name = "rows"
    description = "Returns rows."
    parameters: dict[str, Any] = {"type": "object", "properties": {"count": {"type": "integer"}}, "required": ["count"]}

    async def execute(self, input: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        return ToolOutput(content=[], structured=rows(input["count"]))


def rows(count: int) -> dict[str, Any]:
    return {"rows": [{"id": n, "name": f"row {n}", "tags": ["a", "b"]} for n in range(count)]}


async def test_a_structured_only_result_is_bounded_as_its_json_and_keeps_its_value(tmp_path):
    outputs = ManagedOutputs(tmp_path / "tool-output")
    reg = ToolRegistry(max_lines=LINES, max_bytes=BYTES, outputs=outputs)
    reg.register(Rows())
    small = await reg.settle("rows", {"count": 2}, ctx(tmp_path))
    assert isinstance(small, ToolSucceeded) and not small.truncated and small.output.content == []  # read as JSON

    large = await reg.settle("rows", {"count": 2000}, ctx(tmp_path))
    assert isinstance(large, ToolSucceeded) and large.truncated and large.output_path is not None
    assert large.output.structured == rows(2000)  # unchanged for Session consumers
    preview = large.output.text()  # a text part holding the bounded JSON
    assert preview.startswith('{"rows": [{"id": 0, ') and len(preview.encode()) <= BYTES
    assert large.output_path in preview
    assert json.loads(Path(large.output_path).read_text()) == rows(2000)  # the complete JSON


async def test_the_model_reads_a_structured_only_result_as_bounded_json(tmp_path, loop_provider):
    (tmp_path / "work").mkdir()
    write_provider_config(tmp_path, loop_provider, tool_output={"max_bytes": 4096})
    loop_provider.requests.clear()
    calls = [fake.completion(fake.tool_call_deltas(0, f"call_{n}", "rows", json.dumps({"count": n})),
                             finish_reason="tool_calls") for n in (3, 2000)]
    loop_provider.enqueue(calls[0], calls[1], fake.completion(fake.text_deltas("Two thousand rows.")))
    async with OpenCode(db=tmp_path / "db.sqlite", directory=tmp_path / "work", env=isolated_env(tmp_path),
                        tools=[Rows()]) as oc:
        sid = (await oc.session.create()).id
        await oc.session.prompt(sid, prompt={"text": "count the rows"})
        with anyio.fail_after(60):
            await oc.session.wait(sid)
        log = [e async for e in oc.session.log(sid, follow=False) if e.type != "log.synced"]
    assert [e.type for e in log if e.type.startswith("session.execution.")][-1] == "session.execution.succeeded"
    small, large = [e.data for e in log if e.type == "session.tool.success"]
    assert small.structured == rows(3) and large.structured == rows(2000)
    seen = [r.json["messages"][-1] for r in loop_provider.requests[1:]]
    assert [m["role"] for m in seen] == ["tool", "tool"]
    assert json.loads(seen[0]["content"]) == rows(3)  # the whole value, as JSON
    assert seen[1]["content"].startswith('{"rows": [{"id": 0, ') and len(seen[1]["content"].encode()) <= 4096
    assert large.outputPaths and large.outputPaths[0] in seen[1]["content"]
    assert json.loads(Path(large.outputPaths[0]).read_text()) == rows(2000)
