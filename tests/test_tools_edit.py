"""write, edit and apply_patch against a real temporary project: atomic writes that keep the mode, exact and
all-or-nothing changes, and paths that leave the Location."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import anyio
import pytest

from opencode_session.core.permission import Rule
from opencode_session.core.tools import files
from opencode_session.schema import session_errors
from tests.support.tools import RecordingAsker, make_ctx, settle_err, settle_ok

pytestmark = pytest.mark.anyio


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    return root


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


# --- write ---------------------------------------------------------------------------------------------------


async def test_write_creates_files_and_directories_and_replaces_keeping_the_mode(project: Path):
    ctx = make_ctx(project)
    out = await settle_ok("write", {"path": "src/new.py", "content": "print('é')\n"}, ctx)
    assert (project / "src/new.py").read_text() == "print('é')\n"
    assert out.structured["created"] is True

    script = project / "run.sh"
    script.write_text("old\n")
    script.chmod(0o751)
    out = await settle_ok("write", {"path": str(script), "content": "new\n"}, ctx)
    assert script.read_text() == "new\n"
    assert stat.S_IMODE(script.stat().st_mode) == 0o751
    assert out.structured["created"] is False
    # the temp file of the atomic replace is gone
    assert sorted(p.name for p in project.iterdir()) == ["run.sh", "src"]


async def test_write_to_a_directory_fails(project: Path):
    (project / "d").mkdir()
    result = await settle_err("write", {"path": "d", "content": "x"}, make_ctx(project))
    assert "directory" in result.error.message


async def test_write_outside_the_location_asks_for_external_directory(project: Path, tmp_path: Path):
    outside = tmp_path / "outside"
    outside.mkdir()
    # nobody to ask: the call fails and nothing is written
    result = await settle_err("write", {"path": str(outside / "x.txt"), "content": "x"}, make_ctx(project))
    assert result.error.type == session_errors.PERMISSION_REQUIRED
    assert not (outside / "x.txt").exists()
    # `..` is resolved before the check
    result = await settle_err("write", {"path": "../outside/y.txt", "content": "y"}, make_ctx(project))
    assert result.error.type == session_errors.PERMISSION_REQUIRED
    # a user who allows it gets the file written, and was asked for the outside directory
    asker = RecordingAsker()
    await settle_ok("write", {"path": "../outside/y.txt", "content": "y"}, make_ctx(project, asker=asker))
    assert (outside / "y.txt").read_text() == "y"
    assert [(a.action, a.resources) for a in asker.asked] == [("external_directory", (f"{outside}/*",))]


async def test_write_through_a_symlink_pointing_out_is_external(project: Path, tmp_path: Path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (project / "link").symlink_to(outside)
    result = await settle_err("write", {"path": "link/evil.txt", "content": "x"}, make_ctx(project))
    assert result.error.type == session_errors.PERMISSION_REQUIRED
    assert not (outside / "evil.txt").exists()


async def test_an_edit_deny_rule_blocks_write_edit_and_apply_patch(project: Path):
    (project / "locked.txt").write_text("a\n")
    ctx = make_ctx(project, extra=(Rule("edit", "locked.txt", "deny"),))
    for name, input in (("write", {"path": "locked.txt", "content": "b"}),
                        ("edit", {"path": "locked.txt", "oldString": "a", "newString": "b"}),
                        ("apply_patch", {"patchText": "*** Begin Patch\n*** Delete File: locked.txt\n*** End Patch"})):
        result = await settle_err(name, input, ctx)
        assert result.error.type == session_errors.PERMISSION_REJECTED, name
    assert (project / "locked.txt").read_text() == "a\n"


# --- edit ----------------------------------------------------------------------------------------------------


async def test_edit_replaces_one_exact_occurrence(project: Path):
    path = project / "a.py"
    path.write_text("def f():\n    return 1\n")
    path.chmod(0o700)
    out = await settle_ok("edit", {"path": "a.py", "oldString": "return 1", "newString": "return 2"},
                          make_ctx(project))
    assert path.read_text() == "def f():\n    return 2\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o700
    assert out.structured["replacements"] == 1
    assert "-    return 1" in out.structured["diff"] and "+    return 2" in out.structured["diff"]


@pytest.mark.parametrize("old, why", [("return 3", "not found"), ("x", "appears 3 times"),
                                      ("    Return 1", "not found")])
async def test_edit_with_absent_or_ambiguous_text_changes_nothing(project: Path, old: str, why: str):
    path = project / "a.py"
    path.write_text("x = 1\nx = 2\nx = 3\n    return 1\n")
    before = path.stat().st_mtime_ns
    result = await settle_err("edit", {"path": "a.py", "oldString": old, "newString": "y"}, make_ctx(project))
    assert why in result.error.message
    assert path.read_text() == "x = 1\nx = 2\nx = 3\n    return 1\n"
    assert path.stat().st_mtime_ns == before


async def test_edit_replace_all_and_identical_strings(project: Path):
    path = project / "a.txt"
    path.write_text("x x x\n")
    out = await settle_ok("edit", {"path": "a.txt", "oldString": "x", "newString": "yy", "replaceAll": True},
                          make_ctx(project))
    assert path.read_text() == "yy yy yy\n"
    assert out.structured["replacements"] == 3
    result = await settle_err("edit", {"path": "a.txt", "oldString": "yy", "newString": "yy"}, make_ctx(project))
    assert "identical" in result.error.message


async def test_edit_matches_lf_text_in_a_crlf_file_and_keeps_crlf(project: Path):
    path = project / "win.txt"
    path.write_bytes(b"one\r\ntwo\r\nthree\r\n")
    await settle_ok("edit", {"path": "win.txt", "oldString": "one\ntwo", "newString": "1\n2"}, make_ctx(project))
    assert path.read_bytes() == b"1\r\n2\r\nthree\r\n"


async def test_edit_with_empty_old_string_creates_the_file(project: Path):
    await settle_ok("edit", {"path": "new/file.txt", "oldString": "", "newString": "hello\n"}, make_ctx(project))
    assert (project / "new/file.txt").read_text() == "hello\n"


async def test_edit_of_missing_or_binary_files_fails(project: Path):
    (project / "bin").write_bytes(b"a\x00b")
    result = await settle_err("edit", {"path": "missing.txt", "oldString": "a", "newString": "b"}, make_ctx(project))
    assert "not found" in result.error.message
    result = await settle_err("edit", {"path": "bin", "oldString": "a", "newString": "b"}, make_ctx(project))
    assert "binary" in result.error.message
    assert (project / "bin").read_bytes() == b"a\x00b"


# --- apply_patch ---------------------------------------------------------------------------------------------

PATCH = """*** Begin Patch
*** Add File: docs/new.md
+# New
+text
*** Update File: src/app.py
@@ def main():
     print("hello")
-    return 1
+    return 0
*** Update File: old_name.py
*** Move to: new_name.py
@@
-A = 1
+A = 2
*** Delete File: obsolete.txt
*** End Patch"""


def make_patch_project(root: Path) -> None:
    (root / "src").mkdir()
    (root / "src/app.py").write_text('import sys\n\ndef main():\n    print("hello")\n    return 1\n')
    (root / "old_name.py").write_text("A = 1\nB = 2\n")
    (root / "old_name.py").chmod(0o755)
    (root / "obsolete.txt").write_text("bye\n")


async def test_apply_patch_adds_updates_moves_and_deletes(project: Path):
    make_patch_project(project)
    out = await settle_ok("apply_patch", {"patchText": PATCH}, make_ctx(project))
    assert (project / "docs/new.md").read_text() == "# New\ntext\n"
    assert (project / "src/app.py").read_text() == 'import sys\n\ndef main():\n    print("hello")\n    return 0\n'
    assert not (project / "old_name.py").exists()
    assert (project / "new_name.py").read_text() == "A = 2\nB = 2\n"
    assert not (project / "obsolete.txt").exists()
    assert "A docs/new.md" in out.text() and "D obsolete.txt" in out.text()


@pytest.mark.parametrize("breakage, message", [
    ("-    return 1\n+    return 0", "not found"),  # one hunk does not match: nothing is applied
    ("*** Delete File: obsolete.txt", "Cannot delete"),  # deleting a missing file
    ("*** Add File: docs/new.md", "already exists"),  # adding over an existing file
])
async def test_apply_patch_is_all_or_nothing_when_validation_fails(project: Path, breakage: str, message: str):
    make_patch_project(project)
    if "return 1" in breakage:
        (project / "src/app.py").write_text('def main():\n    print("hello")\n    return 5\n')
    elif "Delete" in breakage:
        (project / "obsolete.txt").unlink()
    else:
        (project / "docs").mkdir()
        (project / "docs/new.md").write_text("mine\n")
    before = snapshot(project)
    result = await settle_err("apply_patch", {"patchText": PATCH}, make_ctx(project))
    assert message in result.error.message
    assert snapshot(project) == before


async def test_apply_patch_rolls_back_written_files_when_a_later_write_fails(project: Path, monkeypatch):
    make_patch_project(project)
    before = snapshot(project)
    real = files.write_atomic
    writes: list[Path] = []

    def failing_on_the_move(path: Path, content: str | bytes) -> None:
        # the move's new file is the third write of PATCH: the add and the update are on disk by then
        if path.name == "new_name.py" and not writes.count(path):
            writes.append(path)
            raise OSError(28, "No space left on device", str(path))
        real(path, content)

    monkeypatch.setattr("opencode_session.core.tools.builtin.apply_patch.write_atomic", failing_on_the_move)
    result = await settle_err("apply_patch", {"patchText": PATCH}, make_ctx(project))
    assert "No space left on device" in result.error.message and "No file was changed" in result.error.message
    assert snapshot(project) == before
    assert stat.S_IMODE((project / "old_name.py").stat().st_mode) == 0o755


@pytest.mark.parametrize("text, message", [
    ("*** Add File: x\n+x\n*** End Patch", "must start"),
    ("*** Begin Patch\n*** Add File: x\n+x", "must end"),
    ("*** Begin Patch\n*** Frobnicate: x\n*** End Patch", "expected a file header"),
    ("*** Begin Patch\n*** End Patch", "no file operations"),
    ("*** Begin Patch\n*** Update File: a.txt\n@@\n*line\n*** End Patch", "must start with"),
    ("*** Begin Patch\n*** Delete File: a.txt\n*** Delete File: a.txt\n*** End Patch", "more than once"),
])
async def test_apply_patch_rejects_malformed_patches(project: Path, text: str, message: str):
    (project / "a.txt").write_text("line\n")
    result = await settle_err("apply_patch", {"patchText": text}, make_ctx(project))
    assert message in result.error.message
    assert (project / "a.txt").read_text() == "line\n"


async def test_apply_patch_tolerates_trailing_whitespace_and_honours_end_of_file(project: Path):
    (project / "a.txt").write_text("x\nend\nmiddle\nend  \n")
    patch = "*** Begin Patch\n*** Update File: a.txt\n@@\n-end\n+END\n*** End of File\n*** End Patch"
    await settle_ok("apply_patch", {"patchText": patch}, make_ctx(project))
    # the last "end" (with trailing blanks) changed, not the first
    assert (project / "a.txt").read_text() == "x\nend\nmiddle\nEND\n"


async def test_apply_patch_outside_the_location_asks_before_touching_anything(project: Path, tmp_path: Path):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (project / "a.txt").write_text("a\n")
    patch = (f"*** Begin Patch\n*** Delete File: a.txt\n*** Add File: {outside}/b.txt\n+b\n*** End Patch")
    result = await settle_err("apply_patch", {"patchText": patch}, make_ctx(project))
    assert result.error.type == session_errors.PERMISSION_REQUIRED
    assert (project / "a.txt").exists() and not (outside / "b.txt").exists()
    refused = RecordingAsker(refuse=True)
    await settle_err("apply_patch", {"patchText": patch}, make_ctx(project, asker=refused))
    assert [a.action for a in refused.asked] == ["external_directory"]
    assert (project / "a.txt").exists() and not (outside / "b.txt").exists()


def test_write_atomic_leaves_no_temp_file_when_the_write_fails(tmp_path: Path, monkeypatch):
    (tmp_path / "d").mkdir()
    target = tmp_path / "d/f.txt"
    target.write_text("old")

    def broken_replace(src: str, dst: object) -> None:
        raise OSError(5, "I/O error")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError):
        files.write_atomic(target, "new")
    assert target.read_text() == "old"
    assert [p.name for p in (tmp_path / "d").iterdir()] == ["f.txt"]


async def test_two_edits_of_one_file_in_the_same_step_both_land(project: Path):
    # A model may call edit twice on one file in one Step; both calls run at once and each must see the other's change.
    (project / "two.txt").write_text("alpha\nbeta\n")
    ctx = make_ctx(project)
    async with anyio.create_task_group() as tg:
        tg.start_soon(settle_ok, "edit", {"path": "two.txt", "oldString": "alpha", "newString": "ALPHA"}, ctx)
        tg.start_soon(settle_ok, "edit", {"path": "two.txt", "oldString": "beta", "newString": "BETA"}, ctx)
    assert (project / "two.txt").read_text() == "ALPHA\nBETA\n"
