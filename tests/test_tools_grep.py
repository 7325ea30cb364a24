"""grep against a real project, through ripgrep and through the pure-Python fallback: the same output either way."""

from __future__ import annotations

import os
import shutil
import subprocess
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


# --- ignore files: both engines, and glob, see what ripgrep sees ----------------------------------------------------


@pytest.fixture
def ignoring(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A repository whose ignore files say what a search skips, every file holding TOKEN; and the environment (its
    HOME has a global excludes file)."""
    home = tmp_path / "home"
    (home / ".config" / "git").mkdir(parents=True)
    (home / ".config" / "git" / "ignore").write_text("*.global\n")
    root = tmp_path / "repo"
    files = {
        ".gitignore": "*.log\nbuild/\n!keep.log\n/top-only.txt\n",
        ".ignore": "*.ign\n",
        ".rgignore": "!special.ign\n",
        ".git/info/exclude": "*.excl\n",
        "sub/.gitignore": "*.tmp\n!important.log\n",
        "nested/.git/HEAD": "",  # a repository of its own: the outer one's rules stop at it
    }
    for name in ["a.log", "keep.log", "top-only.txt", "plain.txt", "x.ign", "special.ign", "y.excl", "z.global",
                 ".hidden.txt", ".dotdir/inner.txt", "build/out.txt", "sub/top-only.txt", "sub/s.tmp",
                 "sub/important.log", "sub/deep/d.log", "sub/deep/d.txt", "nested/n.log", "node_modules/m.txt",
                 ".git/objects.txt"]:
        files[name] = "TOKEN\n"
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root, {"HOME": str(home)}


SEEN = [".hidden.txt", ".dotdir/inner.txt", "keep.log", "plain.txt", "special.ign", "sub/top-only.txt",
        "sub/important.log", "sub/deep/d.txt", "nested/n.log"]


async def test_both_engines_honour_ignore_files_as_ripgrep_does(ignoring: tuple[Path, dict[str, str]],
                                                               engine: dict[str, str]):
    root, env = ignoring
    ctx = make_ctx(root, env={**engine, **env})
    cases = [
        (None, SEEN),
        # a glob takes precedence, as ripgrep's --glob: a file it names is searched even if ignored, unless it is
        # in an ignored directory (or .git / node_modules)
        ("*.log", ["a.log", "keep.log", "sub/important.log", "sub/deep/d.log", "nested/n.log"]),
        ("sub/**", ["sub/top-only.txt", "sub/s.tmp", "sub/important.log", "sub/deep/d.log", "sub/deep/d.txt"]),
        ("*.txt", [".hidden.txt", ".dotdir/inner.txt", "top-only.txt", "plain.txt", "sub/top-only.txt",
                   "sub/deep/d.txt"]),
    ]
    for include, expected in cases:
        arguments = {"pattern": "TOKEN", "limit": 1000, **({"include": include} if include else {})}
        out = await settle_ok("grep", arguments, ctx)
        found = sorted(line[:-1] for line in out.text().splitlines() if line.endswith(":"))
        assert found == sorted(f"{root.resolve()}/{name}" for name in expected), include


@pytest.mark.skipif(not HAVE_RG, reason="ripgrep is not installed next to the interpreter (the pinned wheel)")
async def test_glob_lists_what_ripgrep_lists(ignoring: tuple[Path, dict[str, str]]):
    root, env = ignoring
    ctx = make_ctx(root, env={"PATH": VENV_BIN, **env})
    for pattern in ("**/*", "*.log", "*.txt", "sub/**", "**/*.{txt,ign}"):
        out = await settle_ok("glob", {"pattern": pattern, "limit": 1000}, ctx)
        listed = sorted(out.text().splitlines())
        rg = subprocess.run([shutil.which("rg", path=VENV_BIN), "--files", "--hidden", "--no-config", "--glob",
                             pattern, "--glob", "!.git", "--glob", "!node_modules", "."], cwd=root,
                            env={"PATH": VENV_BIN, **env}, capture_output=True, text=True, check=True)
        assert listed == sorted(os.path.normpath(root.resolve() / p) for p in rg.stdout.splitlines()), pattern
    out = await settle_ok("glob", {"pattern": "*.log"}, ctx)
    assert f"{root.resolve()}/sub/deep/d.log" in out.text()  # named by the pattern: listed though ignored
    out = await settle_ok("glob", {"pattern": "**/*.txt"}, ctx)
    assert "build" not in out.text() and "top-only" in out.text()


async def test_outside_a_repository_only_ignore_files_that_are_not_git_s_apply(tmp_path: Path, engine: dict[str, str]):
    root = tmp_path / "plain"
    root.mkdir()
    (root / ".gitignore").write_text("*.log\n")
    (root / ".ignore").write_text("*.ign\n")
    for name in ("a.log", "b.ign", "c.txt"):
        (root / name).write_text("TOKEN\n")
    out = await settle_ok("grep", {"pattern": "TOKEN", "include": "[abc].*"}, make_ctx(root, env=engine))
    assert sorted(line for line in out.text().splitlines() if line.endswith(":")) == [
        f"{root.resolve()}/a.log:", f"{root.resolve()}/b.ign:", f"{root.resolve()}/c.txt:"]
    out = await settle_ok("grep", {"pattern": "TOKEN"}, make_ctx(root, env=engine))
    assert sorted(line for line in out.text().splitlines() if line.endswith(":")) == [
        f"{root.resolve()}/a.log:", f"{root.resolve()}/c.txt:"]
