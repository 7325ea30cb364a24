"""The tool layer: read and glob against real files, registry settlement rules, and the output bound."""

from __future__ import annotations

import asyncio
import base64
import os
import re
from pathlib import Path
from typing import Any

import anyio
import pytest
from jsonschema.exceptions import SchemaError

from opencode_session.core.tools import (
    ToolContext,
    ToolErrored,
    ToolFailure,
    ToolOutput,
    ToolRegistry,
    ToolSucceeded,
    bound_text,
    default_registry,
)
from opencode_session.schema.message import ToolFileContent, ToolTextContent
from tests.support.reference import REFERENCE_DIR, reference_file
from tests.support.tools import make_ctx as support_ctx
from tests.support.tools import settle_err, settle_ok

pytestmark = pytest.mark.anyio


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    return root


@pytest.fixture
def ctx(project: Path) -> ToolContext:
    return make_ctx(project)


def make_ctx(directory: Path, on_read=None) -> ToolContext:
    return support_ctx(directory, on_read=on_read)


def text_of(output: ToolOutput) -> str:
    return output.text()


# --- bound_text ---------------------------------------------------------------------------------------


def utf8_len(text: str) -> int:
    return len(text.encode("utf-8"))


def line_count(text: str) -> int:
    return text.count("\n") + (0 if text.endswith("\n") or not text else 1)


def test_only_the_tools_without_effects_beyond_their_answer_are_idempotent():
    tools = default_registry().snapshot()
    # a call of these whose host was lost may run again; any other one stays failed
    assert sorted(n for n in tools.names() if tools.idempotent(n)) == ["glob", "grep", "read", "webfetch"]
    assert not tools.idempotent("no-such-tool")


def test_bound_text_leaves_fitting_text_alone():
    text = "".join(f"line {i}\n" for i in range(10))
    assert bound_text(text, max_lines=10, max_bytes=10_000) == (text, False)


def test_bound_text_by_lines_keeps_head_and_tail_around_marker():
    text = "\n".join(f"line {i}" for i in range(1, 11))
    bounded, truncated = bound_text(text, max_lines=5, max_bytes=10_000)
    assert truncated
    lines = bounded.split("\n")
    assert lines[:2] == ["line 1", "line 2"]
    assert lines[-2:] == ["line 9", "line 10"]
    assert "truncated" in lines[2] and "6 lines" in lines[2]
    assert len(lines) == 5


def test_bound_text_by_bytes_never_splits_multibyte_characters():
    # Three-byte characters on lines of uneven length, so a naive byte cut would land mid-character.
    text = "\n".join("€" * (i % 7 + 1) + "x" for i in range(400))
    max_bytes = 301
    bounded, truncated = bound_text(text, max_lines=10_000, max_bytes=max_bytes)
    assert truncated
    assert utf8_len(bounded) <= max_bytes
    assert "\ufffd" not in bounded
    head, marker, tail = bounded.partition("[... output truncated")
    assert marker
    tail = tail.split("\n", 1)[1]
    assert head.endswith("\n") and tail
    # The newline before the marker is either the head's own line end or one added after a cut line.
    assert text.startswith(head[:-1])
    assert text.endswith(tail)


def test_bound_text_cuts_a_single_huge_line_at_character_boundaries():
    text = "€" * 10_000
    bounded, truncated = bound_text(text, max_lines=2000, max_bytes=250)
    assert truncated
    assert utf8_len(bounded) <= 250
    head, marker_line, tail = bounded.split("\n")
    assert "truncated" in marker_line
    assert set(head) == {"€"} and set(tail) == {"€"}


def test_bound_text_counts_a_trailing_newline_as_ending_the_last_line():
    text = "a\n" * 5
    assert bound_text(text, max_lines=5, max_bytes=10_000) == (text, False)


def test_bound_text_stays_within_both_bounds_on_defaults():
    text = "\n".join("y" * 100 for _ in range(5000))
    bounded, truncated = bound_text(text)
    assert truncated
    assert line_count(bounded) <= 2000
    assert utf8_len(bounded) <= 51_200


# --- read ---------------------------------------------------------------------------------------------


async def test_read_numbers_lines_and_honours_offset_and_limit(project: Path, ctx: ToolContext):
    path = project / "notes.txt"
    path.write_text("".join(f"line {i}\n" for i in range(1, 11)))

    output = await settle_ok("read", {"path": str(path), "offset": 3, "limit": 4}, ctx)

    text = text_of(output)
    assert text.splitlines()[:4] == ["00003| line 3", "00004| line 4", "00005| line 5", "00006| line 6"]
    assert "00002|" not in text and "00007|" not in text
    assert "offset=7" in text
    assert output.structured == {"path": str(path), "lines": 10, "truncated": True}


async def test_read_whole_file_reports_end_and_cuts_long_lines(project: Path, ctx: ToolContext):
    path = project / "wide.txt"
    path.write_text("short\n" + "z" * 2500 + "\n")

    output = await settle_ok("read", {"path": str(path)}, ctx)

    lines = text_of(output).splitlines()
    assert lines[0] == "00001| short"
    assert lines[1].startswith("00002| " + "z" * 2000) and "z" * 2001 not in lines[1]
    assert "truncated" in lines[1]
    assert "End of file" in text_of(output)
    assert output.structured["truncated"] is False


@pytest.mark.parametrize("line_count, width", [(2000, 100), (5000, 3)], ids=["by-bytes", "by-lines"])
async def test_read_stops_within_the_final_bound_with_a_continue_hint(
    project: Path, ctx: ToolContext, line_count: int, width: int
):
    (project / "big.txt").write_text("".join("w" * width + "\n" for _ in range(line_count)))

    result = await default_registry().settle("read", {"path": "big.txt"}, ctx)

    # The read itself stops, so the registry's middle-cutting bound never has to step in.
    assert isinstance(result, ToolSucceeded) and not result.truncated
    text = result.output.text()
    last_shown = int(text.split("\n\n")[0].splitlines()[-1].split("|")[0])
    assert 100 < last_shown < 2000
    assert f"offset={last_shown + 1}" in text
    assert result.output.structured["truncated"] is True


async def test_read_resolves_relative_paths_against_the_location_directory(project: Path, ctx: ToolContext):
    (project / "src").mkdir()
    (project / "src" / "a.py").write_text("print('hi')\n")

    output = await settle_ok("read", {"path": "src/a.py"}, ctx)

    assert "00001| print('hi')" in text_of(output)
    assert output.structured["path"] == str(project / "src" / "a.py")


async def test_read_of_a_directory_lists_sorted_entries(project: Path, ctx: ToolContext):
    (project / "b.txt").write_text("b")
    (project / "a.txt").write_text("a")
    (project / "sub").mkdir()

    output = await settle_ok("read", {"path": "."}, ctx)

    assert text_of(output).splitlines()[:3] == ["a.txt", "b.txt", "sub/"]
    assert output.structured == {"path": str(project), "lines": 3, "truncated": False}


async def test_read_of_a_missing_file_names_the_path_and_suggests_neighbours(project: Path, ctx: ToolContext):
    (project / "config.json").write_text("{}")

    result = await settle_err("read", {"path": "config"}, ctx)

    assert result.error.type == "tool.execution"
    assert str(project / "config") in result.error.message
    assert str(project / "config.json") in result.error.message


async def test_read_refuses_binary_files(project: Path, ctx: ToolContext):
    path = project / "blob.bin"
    path.write_bytes(b"\x89PNG\x00\x01\x02")

    result = await settle_err("read", {"path": str(path)}, ctx)

    assert result.error.type == "tool.execution"
    assert "binary" in result.error.message and str(path) in result.error.message


async def test_read_refuses_control_character_binary_without_nul_bytes(project: Path, ctx: ToolContext):
    (project / "data.bin").write_bytes(bytes(range(1, 32)) * 50)
    result = await settle_err("read", {"path": "data.bin"}, ctx)
    assert "binary" in result.error.message
    # UTF-8 text with escapes and tabs is still text
    (project / "log.txt").write_text("\x1b[31mred\x1b[0m\tcafé\n")
    assert "café" in text_of(await settle_ok("read", {"path": "log.txt"}, ctx))


PNG = b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR" + bytes(range(256))


async def test_read_returns_an_image_as_an_attachment_when_the_model_accepts_images(project: Path):
    (project / "shot.png").write_bytes(PNG)
    output = await settle_ok("read", {"path": "shot.png"}, support_ctx(project, model_accepts_images=True))
    [note, image] = output.content
    assert isinstance(note, ToolTextContent) and "shot.png" in note.text
    assert isinstance(image, ToolFileContent) and image.mime == "image/png" and image.name == "shot.png"
    assert image.uri.startswith("data:image/png;base64,")
    assert base64.b64decode(image.uri.split(",", 1)[1]) == PNG


async def test_read_of_an_image_fails_clearly_when_the_model_takes_no_images(project: Path, ctx: ToolContext):
    (project / "photo.jpg").write_bytes(b"\xff\xd8\xff\xe0" + bytes(100))
    result = await settle_err("read", {"path": "photo.jpg"}, ctx)
    assert "image/jpeg" in result.error.message and "does not accept image" in result.error.message


async def test_read_offset_past_the_end_fails(project: Path, ctx: ToolContext):
    (project / "one.txt").write_text("only\n")

    result = await settle_err("read", {"path": "one.txt", "offset": 5}, ctx)

    assert "Offset 5" in result.error.message


async def test_read_calls_on_read_only_after_success(project: Path):
    seen: list[Path] = []

    async def on_read(path: Path) -> None:
        seen.append(path)

    ctx = make_ctx(project, on_read=on_read)
    (project / "ok.txt").write_text("fine\n")
    (project / "bad.bin").write_bytes(b"\x00")

    await settle_ok("read", {"path": "ok.txt"}, ctx)
    await settle_ok("read", {"path": "."}, ctx)
    await settle_err("read", {"path": "missing.txt"}, ctx)
    await settle_err("read", {"path": "bad.bin"}, ctx)

    assert seen == [project / "ok.txt", project]


# --- glob ---------------------------------------------------------------------------------------------


def touch(path: Path, mtime: float) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("x")
    os.utime(path, (mtime, mtime))
    return path


async def test_glob_orders_newest_first_and_skips_vcs_and_dependency_dirs(project: Path, ctx: ToolContext):
    old = touch(project / "old.py", 1_000_000)
    new = touch(project / "pkg" / "new.py", 3_000_000)
    mid = touch(project / "pkg" / "deep" / "mid.py", 2_000_000)
    touch(project / ".git" / "hook.py", 4_000_000)
    touch(project / "node_modules" / "dep" / "index.py", 4_000_000)
    touch(project / "readme.md", 4_000_000)

    output = await settle_ok("glob", {"pattern": "**/*.py"}, ctx)

    assert text_of(output).splitlines() == [str(new), str(mid), str(old)]
    assert output.structured == {"count": 3, "truncated": False}


async def test_glob_pattern_without_slash_matches_at_any_depth_and_slash_anchors(project: Path, ctx: ToolContext):
    top = touch(project / "a.ts", 2_000_000)
    nested = touch(project / "src" / "b.tsx", 1_000_000)
    touch(project / "src" / "deeper" / "c.ts", 500_000)

    anywhere = await settle_ok("glob", {"pattern": "*.{ts,tsx}"}, ctx)
    anchored = await settle_ok("glob", {"pattern": "src/*.tsx"}, ctx)

    assert text_of(anywhere).splitlines()[:2] == [str(top), str(nested)]
    assert anywhere.structured["count"] == 3
    assert text_of(anchored).splitlines() == [str(nested)]


async def test_glob_limits_results_and_says_so(project: Path, ctx: ToolContext):
    for i in range(105):
        touch(project / f"f{i:03d}.txt", 1_000_000 + i)

    output = await settle_ok("glob", {"pattern": "*.txt"}, ctx)

    lines = text_of(output).splitlines()
    assert lines[0] == str(project / "f104.txt")
    assert lines[99] == str(project / "f005.txt")
    assert "105" in text_of(output) and "more specific" in text_of(output)
    assert output.structured == {"count": 100, "truncated": True}


async def test_glob_searches_the_given_path_and_reports_no_matches(project: Path, ctx: ToolContext):
    inside = touch(project / "sub" / "x.md", 1_000_000)
    touch(project / "y.md", 1_000_000)

    scoped = await settle_ok("glob", {"pattern": "*.md", "path": "sub"}, ctx)
    empty = await settle_ok("glob", {"pattern": "*.rs"}, ctx)
    missing = await settle_err("glob", {"pattern": "*", "path": "nope"}, ctx)

    assert text_of(scoped).splitlines() == [str(inside)]
    assert text_of(empty) == "No files found"
    assert empty.structured == {"count": 0, "truncated": False}
    assert str(project / "nope") in missing.error.message


# --- registry -----------------------------------------------------------------------------------------


class SpyTool:
    """A tool whose behaviour the test chooses, recording whether it ran."""

    name = "spy"
    description = "test tool"
    parameters = {
        "type": "object",
        "properties": {"count": {"type": "integer", "minimum": 0}, "label": {"type": "string"}},
        "required": ["count"],
    }

    def __init__(self, behaviour=None) -> None:
        self.calls = 0
        self.behaviour = behaviour

    async def execute(self, input: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        self.calls += 1
        if self.behaviour is not None:
            return await self.behaviour(input)
        return ToolOutput.of_text(f"count={input['count']}")


def registry_with(tool: SpyTool, **bounds: int) -> ToolRegistry:
    registry = ToolRegistry(**bounds)
    registry.register(tool)
    return registry


async def test_unknown_tool_settles_as_failure(ctx: ToolContext):
    result = await default_registry().settle("frobnicate", {}, ctx)
    assert result == ToolErrored(result.error)
    assert (result.error.type, result.error.message) == ("tool.unknown", "Unknown tool: frobnicate")


async def test_schema_invalid_input_is_rejected_before_execute(ctx: ToolContext):
    spy = SpyTool()
    registry = registry_with(spy)

    wrong_type = await registry.settle("spy", {"count": "three"}, ctx)
    missing = await registry.settle("spy", {"label": "x"}, ctx)

    assert spy.calls == 0
    assert isinstance(wrong_type, ToolErrored) and wrong_type.error.type == "tool.invalid-input"
    assert "count" in wrong_type.error.message and "integer" in wrong_type.error.message
    assert isinstance(missing, ToolErrored) and "'count' is a required property" in missing.error.message


async def test_valid_input_runs_the_tool(ctx: ToolContext):
    spy = SpyTool()
    result = await registry_with(spy).settle("spy", {"count": 2}, ctx)
    assert isinstance(result, ToolSucceeded) and not result.truncated
    assert result.output.text() == "count=2" and spy.calls == 1


async def test_tool_failure_and_defects_become_failed_settlements(ctx: ToolContext):
    async def fail(_: dict[str, Any]) -> ToolOutput:
        raise ToolFailure("no such thing")

    async def defect(_: dict[str, Any]) -> ToolOutput:
        raise KeyError("oops")

    failed = await registry_with(SpyTool(fail)).settle("spy", {"count": 1}, ctx)
    broken = await registry_with(SpyTool(defect)).settle("spy", {"count": 1}, ctx)

    assert isinstance(failed, ToolErrored)
    assert (failed.error.type, failed.error.message) == ("tool.execution", "no such thing")
    assert isinstance(broken, ToolErrored)
    assert (broken.error.type, broken.error.message) == ("tool.execution", "KeyError: 'oops'")


async def test_cancelled_error_raised_by_a_tool_propagates(ctx: ToolContext):
    async def cancelled(_: dict[str, Any]) -> ToolOutput:
        raise asyncio.CancelledError()

    with pytest.raises(asyncio.CancelledError):
        await registry_with(SpyTool(cancelled)).settle("spy", {"count": 1}, ctx)


async def test_cancelling_a_running_call_does_not_produce_a_settlement(ctx: ToolContext):
    started = anyio.Event()
    saw_cancel: list[bool] = []
    settlements: list[Any] = []

    async def wait_forever(_: dict[str, Any]) -> ToolOutput:
        started.set()
        try:
            await anyio.Event().wait()
        except anyio.get_cancelled_exc_class():
            saw_cancel.append(True)
            raise
        raise AssertionError("unreachable")

    registry = registry_with(SpyTool(wait_forever))

    async def call() -> None:
        settlements.append(await registry.settle("spy", {"count": 1}, ctx))

    async with anyio.create_task_group() as tg:
        tg.start_soon(call)
        await started.wait()
        tg.cancel_scope.cancel()

    assert saw_cancel == [True]
    assert settlements == []


async def test_settle_bounds_joined_text_and_keeps_file_parts(ctx: ToolContext):
    async def noisy(_: dict[str, Any]) -> ToolOutput:
        return ToolOutput(
            content=[
                ToolTextContent(text="\n".join(f"a{i}" for i in range(30))),
                ToolFileContent(uri="file:///tmp/x.png", mime="image/png"),
                ToolTextContent(text="\n".join(f"b{i}" for i in range(30))),
            ],
            structured={"k": 1},
            title="noisy",
        )

    result = await registry_with(SpyTool(noisy), max_lines=10, max_bytes=10_000).settle("spy", {"count": 1}, ctx)

    assert isinstance(result, ToolSucceeded) and result.truncated
    content = result.output.content
    assert [part.type for part in content] == ["text", "file"]
    text = content[0].text
    assert text.startswith("a0\na1\n") and text.endswith("b28\nb29")
    assert line_count(text) <= 10
    assert result.output.structured == {"k": 1} and result.output.title == "noisy"


def test_definitions_follow_registration_order_filter_and_are_copies():
    registry = default_registry()

    assert [d.name for d in registry.definitions()] == [
        "read", "write", "edit", "apply_patch", "glob", "grep", "bash", "skill", "todowrite", "question", "webfetch",
        "websearch"]
    assert [d.name for d in registry.definitions(["glob", "nonexistent"])] == ["glob"]
    definition = registry.definitions(["read"])[0]
    definition.parameters["required"].append("mutated")
    assert registry.definitions(["read"])[0].parameters["required"] == ["path"]


def test_register_rejects_duplicates_and_broken_schemas():
    registry = registry_with(SpyTool())
    with pytest.raises(ValueError):
        registry.register(SpyTool())

    broken = SpyTool()
    broken.name = "broken"
    broken.parameters = {"type": "not-a-type"}
    with pytest.raises(SchemaError):
        registry.register(broken)
    assert registry.get("broken") is None


TOOLS_REFERENCE = REFERENCE_DIR / "opencode-1.18.33-tools.md"
_ROW = re.compile(r"^\| `(\w+)` \| (.+) \|$")
_PARAM = re.compile(r"`(\w+)`(\*?): (\w+)")


def test_tool_names_and_parameters_match_opencode_1_18_33():
    """Prompts and agents written for OpenCode call the same tools with the same parameter names and types."""
    expected: dict[str, dict[str, tuple[str, bool]]] = {}
    for line in reference_file(TOOLS_REFERENCE, os.environ).read_text().splitlines():
        if (row := _ROW.match(line)) and row.group(1) != "tool":
            expected[row.group(1)] = {name: ("array" if kind == "array" else kind, star == "*")
                                      for name, star, kind in _PARAM.findall(row.group(2))}
    definitions = {d.name: d.parameters for d in default_registry().definitions()}
    assert sorted(definitions) == sorted(expected)
    for name, params in expected.items():
        schema = definitions[name]
        actual = {p: (spec["type"], p in schema.get("required", [])) for p, spec in schema["properties"].items()}
        assert actual == params, name
