"""Snapshots of Locations, as OpenCode takes them: one shadow git repository per project under the data directory
(its work tree the project, so every `.gitignore` applies; a Location is a scope within it), files over a size cap
listed rather than stored, whole repositories dropped after 7 days unused and pruned hourly otherwise. Paths here
are relative to the Location."""

from __future__ import annotations

import asyncio
import difflib
import functools
import hashlib
import logging
import os
import shutil
import time
from collections.abc import Callable, Iterable, Mapping
from functools import partial
from pathlib import Path
from typing import Literal, TypeVar

import anyio

from ...schema.session import FileDiff
from ..config import Config
from ..location import Location
from .git import Entry, GitError, ShadowRepository

log = logging.getLogger(__name__)

T = TypeVar("T")

SNAPSHOT_DIRECTORY = "snapshot"
MAX_FILE_BYTES = 2 * 1024 * 1024  # OpenCode's cap: a larger file is listed, not stored
MAX_SNAPSHOT_BYTES = 100 * 1024 * 1024  # changed content one snapshot stores at most (the first one of a big project)
RETENTION_DAYS = 7  # like Managed Tool Output Files
SWEEP_INTERVAL_SECONDS = 3600
FIRST_SWEEP_SECONDS = 60
_BINARY_PROBE = 8000  # git's own rule: a NUL in the first 8000 bytes makes a file binary
# A revert's patches are kept on the session record (GET session shows them): one file's at most, and all of them.
MAX_PATCH_CHARS = 64 * 1024
MAX_PATCHES_CHARS = 1024 * 1024

# Why a file a revert wanted to restore was left as it is.
TOO_LARGE = "too large to keep in a snapshot"
UNAVAILABLE = "its snapshot is no longer available"


def off_reason(location: Location, config: Config | None) -> str | None:
    """Why the Location has no snapshots, in words for the user; None when it has them."""
    if config is not None and config.snapshot is False:
        return 'snapshots are off ("snapshot": false in opencode.json)'
    if not location.is_git:
        return "the location is not inside a git repository"
    if not _has_git():
        return "git is not installed"
    return None


@functools.cache
def _has_git() -> bool:
    return shutil.which("git") is not None


class SnapshotUnreadable(Exception):
    """A snapshot a revert needs cannot be read (gone, or its repository damaged); the message says which."""


class Snapshots:
    """Every shadow repository under `root`; `env` is what git sees (HOME and XDG_CONFIG_HOME locate its global
    excludes file). `own` are the runtime's own files and folders (its database and side files, tool output): no
    snapshot includes them, nor `root`, wherever they are."""

    def __init__(self, root: Path, env: Mapping[str, str], *, max_file_bytes: int = MAX_FILE_BYTES,
                 max_snapshot_bytes: int = MAX_SNAPSHOT_BYTES, own: Iterable[Path] = ()) -> None:
        self.root = root
        self.env = env
        self.own = [root, *own]
        self.max_file_bytes = max_file_bytes
        self.max_snapshot_bytes = max_snapshot_bytes
        self._repos: dict[Path, ShadowRepository] = {}

    def at(self, location: Location) -> LocationSnapshots:
        """The snapshots of `location` (check `off_reason` first)."""
        work_tree = location.project_root
        repo = self._repos.get(work_tree)
        if repo is None:
            key = hashlib.sha256(str(work_tree).encode()).hexdigest()[:20]
            repo = self._repos[work_tree] = ShadowRepository(self.root / key, work_tree, self.env, self.own)
        scope = location.directory.relative_to(work_tree).as_posix()
        return LocationSnapshots(self, repo, "" if scope == "." else scope)

    def release(self, location: Location) -> bool:
        """Remove the shadow repository of `location`'s project (no session works in that project any more); whether
        there was one."""
        work_tree = location.project_root
        key = hashlib.sha256(str(work_tree).encode()).hexdigest()[:20]
        folder = self.root / key
        if not folder.is_dir():
            return False
        repo = self._repos.pop(work_tree, None) or ShadowRepository(folder, work_tree, self.env)
        try:
            with repo.locked():  # not while a capture or a restore runs
                shutil.rmtree(folder)
        except OSError as exc:
            log.warning("could not remove the snapshots in %s: %s", folder, exc)
            return False
        return True

    # --- retention -----------------------------------------------------------------------------------------

    def sweep(self, now: float | None = None) -> int:
        """Remove repositories no snapshot was taken in for the retention period and prune the others; returns how
        many were removed."""
        cutoff = (time.time() if now is None else now) - RETENTION_DAYS * 24 * 3600
        removed = 0
        try:
            folders = [entry for entry in os.scandir(self.root) if entry.is_dir(follow_symlinks=False)]
        except OSError:
            return 0
        for folder in folders:
            # pruning needs no work tree; the lock (a file lock) is the same one captures take
            repo = ShadowRepository(Path(folder.path), Path(folder.path), self.env)
            try:
                with repo.locked():
                    stale = repo.last_used() < cutoff
                    if stale:
                        shutil.rmtree(folder.path)
                        removed += 1
                if not stale:
                    repo.prune(RETENTION_DAYS)
            except (OSError, GitError) as exc:
                log.warning("could not sweep the snapshots in %s: %s", folder.path, exc)
        return removed

    async def sweep_forever(self, interval: float = SWEEP_INTERVAL_SECONDS, first: float = FIRST_SWEEP_SECONDS) -> None:
        """Sweep after `first` seconds (a short-lived `ocs run` never packs a repository), then every `interval`
        seconds, until cancelled."""
        await asyncio.sleep(first)
        while True:
            await anyio.to_thread.run_sync(self.sweep, abandon_on_cancel=True)
            await asyncio.sleep(interval)


class LocationSnapshots:
    """Snapshots of one Location: its scope in its project's shadow repository. Git runs in worker threads."""

    def __init__(self, owner: Snapshots, repo: ShadowRepository, scope: str) -> None:
        self.owner = owner
        self.repo = repo
        self.scope = scope

    def _git_path(self, path: str) -> str:
        return f"{self.scope}/{path}" if self.scope else path

    def _local(self, git_path: str) -> str:
        return git_path[len(self.scope) + 1:] if self.scope else git_path

    async def _run(self, fn: Callable[[], T]) -> T:
        return await anyio.to_thread.run_sync(fn, abandon_on_cancel=True)

    async def capture(self) -> str | None:
        """A snapshot of the Location now; None when it could not be taken (logged: a Step goes on without it)."""
        owner = self.owner
        try:
            captured = await self._run(lambda: self.repo.capture(self.scope, owner.max_file_bytes,
                                                                 owner.max_snapshot_bytes))
        except (OSError, GitError) as exc:
            log.warning("could not snapshot %s: %s", self.repo.work_tree / self.scope, exc)
            return None
        return captured.commit

    async def changed(self, before: str, after: str) -> list[str] | None:
        """The paths that differ between two snapshots; None when that cannot be told (a snapshot is gone)."""
        try:
            paths = await self._run(lambda: self.repo.changed(before, after, self.scope))
        except (OSError, GitError) as exc:
            log.warning("could not compare snapshots of %s: %s", self.repo.work_tree / self.scope, exc)
            return None
        return [self._local(p) for p in paths]

    async def changed_or_refuse(self, before: str, after: str) -> list[str]:
        """The paths that differ between two snapshots; SnapshotUnreadable when that cannot be told."""
        try:
            paths = await self._run(lambda: self.repo.changed(before, after, self.scope))
        except (OSError, GitError) as exc:
            raise SnapshotUnreadable(f"snapshot {before[:12]} or {after[:12]} cannot be read: {exc}") from exc
        return [self._local(p) for p in paths]

    async def too_large(self, snapshot: str, paths: list[str]) -> dict[str, str]:
        """Those of `paths` that `snapshot` lists without storing, each with why; SnapshotUnreadable when the
        snapshot cannot be read."""
        try:
            skipped = await self._run(lambda: self.repo.skipped(snapshot))
        except (OSError, GitError) as exc:
            raise SnapshotUnreadable(f"snapshot {snapshot[:12]} cannot be read: {exc}") from exc
        return {p: TOO_LARGE for p in paths if self._git_path(p) in skipped}

    async def unstored(self, snapshot: str, paths: list[str]) -> dict[str, str]:
        """Those of `paths` that `snapshot` could not give back, each with why (listed as too large, or the
        snapshot itself is gone)."""
        try:
            skipped = await self._run(lambda: self.repo.skipped(snapshot))
        except (OSError, GitError):
            return dict.fromkeys(paths, UNAVAILABLE)
        return {p: TOO_LARGE for p in paths if self._git_path(p) in skipped}

    async def restore(self, files: Mapping[str, str]) -> dict[str, str]:
        """Put each path back as the snapshot it maps to has it, removing it where that snapshot has no such file.
        Returns the paths left as they were, each with why."""
        by_snapshot: dict[str, list[str]] = {}
        for path, snapshot in files.items():
            by_snapshot.setdefault(snapshot, []).append(path)
        left: dict[str, str] = {}
        for snapshot, paths in by_snapshot.items():
            refused = await self.unstored(snapshot, paths)
            left.update(refused)
            wanted = [p for p in paths if p not in refused]
            try:
                await self._run(partial(self._restore, snapshot, wanted))
            except (OSError, GitError) as exc:
                log.warning("could not restore files of %s: %s", self.repo.work_tree / self.scope, exc)
                left.update(dict.fromkeys(wanted, UNAVAILABLE))
        return left

    def _restore(self, snapshot: str, paths: list[str]) -> None:
        stored = self.repo.entries(snapshot, [self._git_path(p) for p in paths])
        self.repo.checkout(snapshot, sorted(stored))
        location = self.repo.work_tree / self.scope
        for path in paths:
            if self._git_path(path) not in stored:
                _remove(location, path)

    async def diffs(self, before: str, files: Mapping[str, str]) -> list[FileDiff]:
        """What putting each path back as `files` names does, from `before` (unchanged files are left out);
        SnapshotUnreadable when a snapshot cannot be read."""
        try:
            return await self._run(lambda: self._diffs(before, files))
        except (OSError, GitError) as exc:
            raise SnapshotUnreadable(f"the snapshots of {self.repo.work_tree / self.scope} cannot be compared: "
                                     f"{exc}") from exc

    def _diffs(self, before: str, files: Mapping[str, str]) -> list[FileDiff]:
        old = self.repo.entries(before, [self._git_path(p) for p in files])
        new: dict[str, Entry] = {}
        by_snapshot: dict[str, list[str]] = {}
        for path, snapshot in files.items():
            by_snapshot.setdefault(snapshot, []).append(self._git_path(path))
        for snapshot, paths in by_snapshot.items():
            new.update(self.repo.entries(snapshot, paths))
        blobs = self.repo.blobs({e.oid for e in (*old.values(), *new.values())})
        out = []
        budget = MAX_PATCHES_CHARS
        for path in sorted(files):
            a, b = old.get(self._git_path(path)), new.get(self._git_path(path))
            if a == b:
                continue
            diff = file_diff(path, None if a is None else (a.mode, blobs[a.oid]),
                             None if b is None else (b.mode, blobs[b.oid]))
            if len(diff.patch) > min(MAX_PATCH_CHARS, budget):
                diff.patch = ""  # the revert state lives on the session record: its counts say enough
            budget -= len(diff.patch)
            out.append(diff)
        return out

    async def compare(self, before: str, after: str | None, context: int | None = None) -> list[FileDiff]:
        """Each file that differs from snapshot `before` to `after` (None: the working copy, snapshotted now), with
        `context` lines around its hunks (None: whole files); a file listed without being stored (over the size cap)
        has no patch. SnapshotUnreadable when a snapshot cannot be read or taken."""
        if after is None:
            after = await self.capture()
            if after is None:
                raise SnapshotUnreadable(f"the working copy of {self.repo.work_tree / self.scope} could not be "
                                         "snapshotted")
        end = after
        try:
            return await self._run(lambda: self._compare(before, end, context))
        except (OSError, GitError) as exc:
            raise SnapshotUnreadable(f"snapshot {before[:12]} or {end[:12]} cannot be read: {exc}") from exc

    def _compare(self, before: str, after: str, context: int | None) -> list[FileDiff]:
        paths = self.repo.changed(before, after, self.scope)
        old, new = self.repo.entries(before, paths), self.repo.entries(after, paths)
        listed = self.repo.skipped(before).keys() | self.repo.skipped(after).keys()
        blobs = self.repo.blobs({e.oid for e in (*old.values(), *new.values())})
        out = []
        for git_path in sorted(paths):
            a, b = old.get(git_path), new.get(git_path)
            path = self._local(git_path)
            if git_path in listed:
                out.append(FileDiff(path=path, status="modified", additions=0, deletions=0, patch=""))
            elif a != b:
                out.append(file_diff(path, None if a is None else (a.mode, blobs[a.oid]),
                                     None if b is None else (b.mode, blobs[b.oid]), context))
        return out


def file_diff(path: str, before: tuple[str, bytes] | None, after: tuple[str, bytes] | None,
              context: int | None = 3) -> FileDiff:
    """The change from `before` to `after` (each a git mode and content; None: no such file) as a FileDiff with a
    unified diff showing `context` unchanged lines around each hunk (None: the whole file); a binary file gets no
    patch."""
    status: Literal["added", "modified", "deleted"] = \
        "added" if before is None else "deleted" if after is None else "modified"
    old, new = (before or ("", b""))[1], (after or ("", b""))[1]
    if b"\0" in old[:_BINARY_PROBE] or b"\0" in new[:_BINARY_PROBE]:
        return FileDiff(path=path, status=status, additions=0, deletions=0, patch="")
    header = []
    if before is not None and after is not None and before[0] != after[0]:
        header = [f"old mode {before[0]}\n", f"new mode {after[0]}\n"]
    old_lines, new_lines = _lines(old), _lines(new)
    lines = list(difflib.unified_diff(
        old_lines, new_lines, fromfile="/dev/null" if before is None else f"a/{path}",
        tofile="/dev/null" if after is None else f"b/{path}",
        n=max(len(old_lines), len(new_lines)) if context is None else context))
    body = lines[2:]
    additions = sum(1 for line in body if line.startswith("+"))
    deletions = sum(1 for line in body if line.startswith("-"))
    return FileDiff(path=path, status=status, additions=additions, deletions=deletions,
                    patch="".join(header + lines))


def _lines(content: bytes) -> list[str]:
    lines = content.decode("utf-8", "replace").splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n\\ No newline at end of file\n"
    return lines


def _remove(location: Path, path: str) -> None:
    """Delete a file the snapshot does not have, and the directories that held only it, never leaving
    `location` (a path through a symlinked directory is left alone)."""
    target = location / path
    parent = target.parent
    if ".." in Path(path).parts or not Path(os.path.realpath(parent)).is_relative_to(os.path.realpath(location)):
        return
    try:
        if target.is_symlink() or target.is_file():
            target.unlink()
    except OSError as exc:
        log.warning("could not remove %s: %s", target, exc)
        return
    while parent != location and parent.is_relative_to(location):
        try:
            parent.rmdir()  # only an empty one
        except OSError:
            break
        parent = parent.parent
