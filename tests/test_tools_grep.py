"""grep against a real project, through ripgrep and through the pure-Python fallback: the same output either way."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from opencode_session.schema import session_errors
from tests.support.tools import make_ctx, settle_err, settle_ok

pytestmark = pytest.mark.anyio

# ripgrep comes from the pinned `ripgrep` wheel, installed next to the interpreter; the fallback gets a PATH without it.
VENV_BIN = str(Path(sys.executable).parent)
HAVE_RG = shutil.which("rg", path=VENV_BIN) is not None


@pytest.fixture(params=["ripgrep", "python"])
def engine(request, tmp_path: Path) -> dict[str, str]:
    """The environment a search runs with: PATH decides which engine is used."""
    if request.param == "ripgrep":
        if not HAVE_RG:
            pytest.skip("ripgrep is not installed next to the interpreter (the pinned `ripgrep` wheel is missing)")
        return {"PATH": VENV_BIN}
    empty = tmp_path / "no-rg"
    empty.mkdir(exist_ok=True)
    return {"PATH": str(empty)}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / "src/pkg").mkdir(parents=True)
    (root / "src/a.py").write_text("def alpha():\n    return 'TODO: alpha'\n")
    (root / "src/pkg/b.py").write_text("# TODO first\nx = 1\n# todo lower\n# TODO third\n")
    (root / "notes.md").write_text("TODO write notes\r\n")
    (root / ".hidden.txt").write_text("TODO hidden\n")
    (root / ".git").mkdir()
    (root / ".git/config").write_text("TODO in git\n")
    (root / "node_modules").mkdir()
    (root / "node_modules/x.js").write_text("TODO dep\n")
    (root / "blob.bin").write_bytes(b"TODO\x00binary")
    (root / "unicode.txt").write_text("café TODO ünïcode\n")
    # mtimes make the file order deterministic: newest first
    for age, name in enumerate(["src/pkg/b.py", "src/a.py", "notes.md", ".hidden.txt", "unicode.txt"]):
        os.utime(root / name, (1_700_000_000 - age * 100, 1_700_000_000 - age * 100))
    return root


async def test_grep_groups_matches_by_file_newest_first(project: Path, engine: dict[str, str]):
    out = await settle_ok("grep", {"pattern": "TODO"}, make_ctx(project, env=engine))
    root = project.resolve()
    assert out.text() == "\n".join([
        "Found 6 matches",
        f"{root}/src/pkg/b.py:",
        "  Line 1: # TODO first",
        "  Line 4: # TODO third",
        "",
        f"{root}/src/a.py:",
        "  Line 2:     return 'TODO: alpha'",
        "",
        f"{root}/notes.md:",
        "  Line 1: TODO write notes",
        "",
        f"{root}/.hidden.txt:",
        "  Line 1: TODO hidden",
        "",
        f"{root}/unicode.txt:",
        "  Line 1: café TODO ünïcode",
    ])
    assert out.structured == {"matches": 6, "truncated": False}


async def test_grep_include_path_limit_and_no_matches(project: Path, engine: dict[str, str]):
    ctx = make_ctx(project, env=engine)
    out = await settle_ok("grep", {"pattern": r"TODO|def \w+", "include": "*.py", "limit": 2}, ctx)
    lines = out.text().splitlines()
    assert lines[0] == "Found 4 matches"
    assert "Showing 2 of 4 matches" in out.text() and out.structured["truncated"] is True
    out = await settle_ok("grep", {"pattern": "alpha", "path": "src/a.py"}, ctx)
    assert out.text().splitlines()[1:] == [f"{project.resolve()}/src/a.py:", "  Line 1: def alpha():",
                                           "  Line 2:     return 'TODO: alpha'"]
    out = await settle_ok("grep", {"pattern": "nothing-here"}, ctx)
    assert out.text() == "No matches found"


async def test_grep_reports_an_invalid_pattern(project: Path, engine: dict[str, str]):
    result = await settle_err("grep", {"pattern": "(unclosed"}, make_ctx(project, env=engine))
    assert result.error.message.startswith("Invalid search")


async def test_grep_outside_the_location_asks_and_symlinks_are_not_followed(project: Path, tmp_path: Path,
                                                                           engine: dict[str, str]):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("TODO secret\n")
    result = await settle_err("grep", {"pattern": "TODO", "path": str(outside)}, make_ctx(project, env=engine))
    assert result.error.type == session_errors.PERMISSION_REQUIRED
    result = await settle_err("grep", {"pattern": "TODO", "path": "../outside"}, make_ctx(project, env=engine))
    assert result.error.type == session_errors.PERMISSION_REQUIRED
    (project / "link").symlink_to(outside)
    (project / "link.txt").symlink_to(outside / "secret.txt")
    out = await settle_ok("grep", {"pattern": "secret"}, make_ctx(project, env=engine))
    assert out.text() == "No matches found"


async def test_grep_anchors_match_per_line_and_crlf_lines_in_both_engines(project: Path, engine: dict[str, str]):
    (project / "anchors.txt").write_text("alpha end\r\nbeta\nend gamma\n")
    ctx = make_ctx(project, env=engine)
    for pattern, expected in ((r"end$", ["  Line 1: alpha end"]), (r"^end", ["  Line 3: end gamma"]),
                              (r"\Aend", ["  Line 3: end gamma"]), (r"^beta$", ["  Line 2: beta"])):
        out = await settle_ok("grep", {"pattern": pattern, "include": "anchors.txt"}, ctx)
        assert out.text().splitlines()[2:] == expected, pattern
