"""File snapshots in a shadow git repository, against a real project on disk and the real `git`: what a capture
keeps (ignored files and the user's own `.git` left alone, large files listed rather than stored), restoring
created, modified, deleted and chmod-ed files, diffs, a Location below the project root, surviving a restart, and
the 7-day sweep."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from opencode_session.core.config import Config
from opencode_session.core.location import resolve_location
from opencode_session.core.snapshot import Snapshots, off_reason
from opencode_session.core.snapshot.git import USED_MARK
from opencode_session.core.snapshot.service import RETENTION_DAYS, TOO_LARGE
from tests.support.git import STARTING
from tests.support.git import git_project as new_git_project

pytestmark = pytest.mark.anyio


def git_project(root: Path) -> Path:
    return new_git_project(root / "project", {".gitignore": "build/\n", "src/app.py": "print('one')\n", **STARTING,
                                               "build/out.o": "ignored\n"})


def user_git_state(project: Path) -> dict[str, tuple[int, int]]:
    """Every file under the user's own `.git` with its size and modification time."""
    out = {}
    for folder, _dirs, files in os.walk(project / ".git"):
        for name in files:
            stat = os.stat(Path(folder) / name)
            out[str(Path(folder) / name)] = (stat.st_size, stat.st_mtime_ns)
    return out


def turn(project: Path) -> None:
    """What an agent's turn does: create, modify, delete, chmod."""
    (project / "src" / "new.py").write_text("created\n")
    (project / "notes.txt").write_text("alpha\nBETA\ngamma\n")
    (project / "old.txt").unlink()
    (project / "run.sh").chmod(0o755)
    (project / "build" / "out.o").write_text("rebuilt\n")


async def test_restore_puts_back_created_modified_deleted_and_chmoded_files(tmp_path):
    project = git_project(tmp_path)
    before_git = user_git_state(project)
    snaps = Snapshots(tmp_path / "data" / "snapshot", os.environ).at(resolve_location(project))
    start = await snaps.capture()
    turn(project)
    end = await snaps.capture()
    assert start is not None and end is not None and start != end
    changed = await snaps.changed(start, end)
    assert changed == ["notes.txt", "old.txt", "run.sh", "src/new.py"]  # build/ is ignored
    left = await snaps.restore(dict.fromkeys(changed, start))
    assert left == {}
    assert not (project / "src" / "new.py").exists() and (project / "src").is_dir()
    assert (project / "notes.txt").read_text() == "alpha\nbeta\n"
    assert (project / "old.txt").read_text() == "going away\n"
    assert not os.access(project / "run.sh", os.X_OK)
    assert (project / "build" / "out.o").read_text() == "rebuilt\n"  # never tracked, never touched
    diffs = {d.path: d for d in await snaps.diffs(end, dict.fromkeys(changed, start))}
    assert {p: d.status for p, d in diffs.items()} == {"notes.txt": "modified", "old.txt": "added",
                                                       "run.sh": "modified", "src/new.py": "deleted"}
    assert (diffs["notes.txt"].additions, diffs["notes.txt"].deletions) == (1, 2)
    assert "-BETA\n" in diffs["notes.txt"].patch and "+beta\n" in diffs["notes.txt"].patch
    assert "old mode 100755\nnew mode 100644\n" in diffs["run.sh"].patch
    # and back again, as the agent left them
    assert await snaps.restore(dict.fromkeys(changed, end)) == {}
    assert (project / "src" / "new.py").read_text() == "created\n" and not (project / "old.txt").exists()
    assert os.access(project / "run.sh", os.X_OK)
    assert user_git_state(project) == before_git  # the user's repository was never written


async def test_a_large_diff_is_counted_but_its_patch_left_out(tmp_path):
    project = git_project(tmp_path)
    snaps = Snapshots(tmp_path / "snapshot", os.environ).at(resolve_location(project))
    start = await snaps.capture()
    (project / "notes.txt").write_text("".join(f"line {n} of a long rewrite\n" for n in range(5000)))
    end = await snaps.capture()
    assert start is not None and end is not None
    (diff,) = await snaps.diffs(end, {"notes.txt": start})
    assert (diff.status, diff.additions, diff.deletions, diff.patch) == ("modified", 2, 5000, "")


async def test_a_location_below_the_project_root_sees_only_its_own_files_and_the_root_gitignore(tmp_path):
    project = git_project(tmp_path)
    (project / "src" / "build").mkdir()
    (project / "src" / "build" / "gen.py").write_text("ignored by the root .gitignore\n")
    snaps = Snapshots(tmp_path / "snapshot", os.environ).at(resolve_location(project / "src"))
    start = await snaps.capture()
    (project / "src" / "app.py").write_text("print('two')\n")
    (project / "src" / "build" / "gen.py").write_text("changed, still ignored\n")
    (project / "notes.txt").write_text("outside the location\n")
    end = await snaps.capture()
    assert start is not None and end is not None
    assert await snaps.changed(start, end) == ["app.py"]  # relative to the Location
    await snaps.restore({"app.py": start})
    assert (project / "src" / "app.py").read_text() == "print('one')\n"


async def test_a_file_over_the_cap_is_listed_not_stored(tmp_path):
    project = git_project(tmp_path)
    snapshots = Snapshots(tmp_path / "snapshot", os.environ, max_file_bytes=1000)
    snaps = snapshots.at(resolve_location(project))
    (project / "big.bin").write_bytes(b"x" * 2000)
    start = await snaps.capture()
    assert start is not None
    (project / "big.bin").write_bytes(b"y" * 3000)
    (project / "huge.log").write_bytes(b"z" * 5000)  # created by the turn
    end = await snaps.capture()
    assert end is not None
    assert await snaps.changed(start, end) == ["big.bin", "huge.log"]
    assert await snaps.unstored(start, ["big.bin", "notes.txt"]) == {"big.bin": TOO_LARGE}
    # a file the snapshot never stored is left alone; one it did not have is removed whatever its size
    assert await snaps.restore({"big.bin": start, "huge.log": start}) == {"big.bin": TOO_LARGE}
    assert (project / "big.bin").read_bytes() == b"y" * 3000 and not (project / "huge.log").exists()
    objects = subprocess.run(["git", "--git-dir", str(snaps.repo.git_dir), "count-objects", "-v"],
                             capture_output=True, text=True, check=True).stdout
    size_kb = int(next(line.split()[1] for line in objects.splitlines() if line.startswith("size:")))
    assert size_kb < 40  # a handful of small files: neither large one went in


async def test_one_snapshot_stores_at_most_its_budget_of_changed_files_and_lists_the_rest(tmp_path):
    project = git_project(tmp_path)
    snaps = Snapshots(tmp_path / "snapshot", os.environ, max_snapshot_bytes=100).at(resolve_location(project))
    assert await snaps.capture() is not None  # the project's own small files: 37 bytes
    for name in ("a.txt", "b.txt", "c.txt"):
        (project / name).write_bytes(b"x" * 60)
    first = await snaps.capture()
    assert first is not None
    assert sorted(snaps.repo.skipped(first)) == ["b.txt", "c.txt"]  # a.txt fit, then the budget ran out
    second = await snaps.capture()  # the next snapshot has a budget of its own
    assert second is not None and sorted(snaps.repo.skipped(second)) == ["c.txt"]


async def test_snapshots_survive_a_restart_and_the_same_files_give_the_same_snapshot(tmp_path):
    project = git_project(tmp_path)
    root = tmp_path / "snapshot"
    start = await Snapshots(root, os.environ).at(resolve_location(project)).capture()
    assert start is not None
    turn(project)
    again = Snapshots(root, os.environ).at(resolve_location(project))  # a new process, the same data directory
    end = await again.capture()
    assert end is not None and await again.capture() == end
    assert await again.restore({"notes.txt": start, "src/new.py": start}) == {}
    assert (project / "notes.txt").read_text() == "alpha\nbeta\n" and not (project / "src" / "new.py").exists()


async def test_the_sweep_drops_repositories_unused_for_a_week_and_keeps_recent_snapshots(tmp_path):
    old_project, new_project = git_project(tmp_path / "old"), git_project(tmp_path / "new")
    snapshots = Snapshots(tmp_path / "snapshot", os.environ)
    old, new = snapshots.at(resolve_location(old_project)), snapshots.at(resolve_location(new_project))
    assert await old.capture() is not None
    kept = await new.capture()
    assert kept is not None
    week_ago = time.time() - RETENTION_DAYS * 24 * 3600 - 60
    os.utime(old.repo.git_dir / USED_MARK, (week_ago, week_ago))
    assert snapshots.sweep() == 1
    assert not old.repo.git_dir.exists() and new.repo.git_dir.exists()
    turn(new_project)
    assert await new.restore({"notes.txt": kept}) == {}  # pruning kept what a recent snapshot needs
    assert (new_project / "notes.txt").read_text() == "alpha\nbeta\n"
    assert await old.capture() is not None  # a dropped repository starts again on next use


def test_snapshots_are_off_outside_git_and_when_configured_off(tmp_path):
    plain = tmp_path / "plain"
    plain.mkdir()
    assert off_reason(resolve_location(plain), None) == "the location is not inside a git repository"
    project = git_project(tmp_path)
    assert off_reason(resolve_location(project), Config()) is None
    assert "snapshot" in (off_reason(resolve_location(project), Config(snapshot=False)) or "")


async def test_the_runtimes_own_files_are_never_in_a_snapshot_even_if_an_older_one_had_them(tmp_path):
    project = git_project(tmp_path)
    (project / ".gitignore").write_text("build/\n!*.db\n")  # the user's ignore files cannot bring them back
    (project / "s.db").write_bytes(b"database\0")
    (project / "s.db-wal").write_bytes(b"wal")
    (project / "tool-output").mkdir()
    (project / "tool-output" / "tool_1").write_text("output\n")

    def listing(commit: str) -> list[str]:
        (repo,) = [p for p in (project / "snapshot").iterdir() if p.is_dir()]
        out = subprocess.run(["git", "--git-dir", str(repo), "ls-tree", "-r", "--name-only", commit],
                             capture_output=True, check=True, text=True).stdout
        return sorted(out.split())

    user = [".gitignore", "notes.txt", "old.txt", "run.sh", "src/app.py"]
    location = resolve_location(project)
    # a snapshot taken before they were left out (the store inside the project, nothing declared its own)
    old = await Snapshots(project / "snapshot", os.environ, own=[]).at(location).capture()
    assert old is not None and "s.db" in listing(old) and "tool-output/tool_1" in listing(old)

    own = [project / "s.db", project / "s.db-wal", project / "tool-output"]
    snaps = Snapshots(project / "snapshot", os.environ, own=own).at(location)
    (project / "s.db").write_bytes(b"database, later\0")
    start = await snaps.capture()
    assert start is not None and listing(start) == user
    (project / "notes.txt").write_text("changed\n")
    end = await snaps.capture()
    assert end is not None and await snaps.changed(start, end) == ["notes.txt"]
