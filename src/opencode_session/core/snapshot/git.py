"""One shadow git repository: its own GIT_DIR under the data directory, the user's project as its work tree (the
user's own `.git` is never read or written, only its `info/exclude` copied), driven with the `git` executable.
Every operation is synchronous, serialized per repository within the process and across processes (a lock file)."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import subprocess
import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from ..private import private_directory

# What a snapshot commit says about the files it lists without storing them: path -> (size, mtime in ns).
Skipped = dict[str, tuple[int, int]]

# Settings of the shadow repository itself. Line endings are stored as they are, symlinks as symlinks, the executable
# bit is tracked (a chmod is a change); no background maintenance (the sweeper prunes) and no file-system monitor.
_CONFIG = {
    "core.autocrlf": "false",
    "core.symlinks": "true",
    "core.fileMode": "true",
    "core.quotePath": "false",
    "core.fsmonitor": "false",
    "core.longpaths": "true",
    "gc.auto": "0",
    "maintenance.auto": "false",
    "commit.gpgSign": "false",
}
# Given on every command line, over whatever any config file says: git runs no command of a config's choosing while
# it snapshots (no file-system monitor, no hook) and maintains nothing in the background.
_NOTHING_RUNS = ("-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null",
                 "-c", "gc.auto=0", "-c", "maintenance.auto=false", "-c", "commit.gpgSign=false")
# Snapshot commits carry fixed names and dates: the same files give the same snapshot, however often they are taken.
_IDENTITY = {
    "GIT_AUTHOR_NAME": "opencode-session", "GIT_AUTHOR_EMAIL": "snapshot@opencode-session.invalid",
    "GIT_COMMITTER_NAME": "opencode-session", "GIT_COMMITTER_EMAIL": "snapshot@opencode-session.invalid",
    "GIT_AUTHOR_DATE": "@0 +0000", "GIT_COMMITTER_DATE": "@0 +0000",
}
_CHUNK = 200  # paths per command line where git takes them only as arguments
USED_MARK = "ocs-used"  # touched by every capture: how the sweeper knows a repository is still in use
PRUNED_MARK = "ocs-pruned"  # touched by every prune


class GitError(Exception):
    """A git command failed; the message has its stderr."""


@dataclass(frozen=True)
class Entry:
    """A file in a snapshot: its git mode (100644, 100755, 120000 for a symlink) and object."""

    mode: str
    oid: str


@dataclass(frozen=True)
class Captured:
    """A snapshot taken: its commit, and the files it lists without storing (too large, or over the budget)."""

    commit: str
    skipped: Skipped


class ShadowRepository:
    """The shadow repository of one work tree. Paths given and returned are relative to the work tree, `/`-separated;
    `scope` (a directory relative to it, "" for all of it) limits what a capture looks at."""

    def __init__(self, git_dir: Path, work_tree: Path, env: Mapping[str, str], own: Iterable[Path] = ()) -> None:
        self.git_dir = git_dir
        self.work_tree = work_tree
        self._env = _git_env(env, git_dir, work_tree)
        self._lock = threading.Lock()
        self._manifests: dict[str, Skipped] = {}
        # the runtime's own files and folders (its database, tool output, this store) inside the work tree: never
        # part of a snapshot, wherever they are and whatever the user's ignore files say
        self.own = _inside(work_tree, [git_dir, *own])
        self._own_untracked = not self.own  # whether an earlier snapshot's index was checked for them

    # --- running git -----------------------------------------------------------------------------------

    def _git(self, *args: str, input: bytes | None = None, check: bool = True) -> bytes:
        done = subprocess.run(["git", *_NOTHING_RUNS, *args], input=input, cwd=self.work_tree, env=self._env,
                              capture_output=True, check=False)
        if check and done.returncode != 0:
            raise GitError(f"git {args[0]} failed ({done.returncode}): "
                           f"{done.stderr.decode('utf-8', 'replace').strip()}")
        return done.stdout

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Exclusive use of the repository: against this process's threads and other processes (a lock file)."""
        with self._lock:
            # this user's alone, the folder of every shadow repository too: a git directory someone else made (or
            # could write in) would run their command (`core.fsmonitor`, a hook) as this user
            private_directory(self.git_dir.parent)
            private_directory(self.git_dir)
            fd = os.open(self.git_dir / "ocs.lock", os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                yield
            finally:
                os.close(fd)  # releases the lock

    def _ensure(self) -> None:
        if (self.git_dir / "HEAD").exists():
            return
        self._git("init", "--quiet")
        for key, value in _CONFIG.items():
            self._git("config", key, value)

    def _sync_excludes(self) -> None:
        """The user's `.git/info/exclude` applies here too (git reads the work tree's `.gitignore` files itself)."""
        source = _user_exclude(self.work_tree)
        text = b""
        if source is not None:
            with contextlib.suppress(OSError):
                text = source.read_bytes()
        if self.own:  # anchored: only these paths (git then does not even walk the folders)
            text = text.rstrip(b"\n") + b"\n" + b"".join(_pattern(p) for p in self.own)
        target = self.git_dir / "info" / "exclude"
        try:
            if target.read_bytes() == text:
                return
        except OSError:
            pass
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(text)

    # --- snapshots ---------------------------------------------------------------------------------------

    def capture(self, scope: str, max_file_bytes: int, max_snapshot_bytes: int) -> Captured:
        """Snapshot the files under `scope` as they are now (ignored files left out): every changed file is stored
        but those over `max_file_bytes`, and those after `max_snapshot_bytes` of changed content, which are listed
        with their size and modification time instead."""
        with self.locked():
            self._ensure()
            self._sync_excludes()
            (self.git_dir / USED_MARK).touch()
            if not self._own_untracked:  # a snapshot taken before they were left out may have them: drop them
                tracked = _split(self._git("ls-files", "-z", "--cached", "--", *self.own))
                if tracked:
                    self._git("update-index", "--force-remove", "-z", "--stdin", input=_nul(tracked))
                self._own_untracked = True
            listed = self._git("ls-files", "-z", "-t", "--others", "--modified", "--deleted", "--exclude-standard",
                               "--", scope or ".")
            candidates: dict[str, bool] = {}  # path -> tracked
            for item in _split(listed):
                tag, path = item[:1], item[2:]
                if not path.endswith("/") and not self._is_own(path):  # a nested repository: never snapshotted
                    candidates[path] = candidates.get(path, False) or tag != "?"
            skipped: Skipped = {}
            budget = max_snapshot_bytes
            for path in sorted(candidates):
                try:
                    stat = os.lstat(self.work_tree / path)
                except OSError:
                    continue  # deleted: staged as a removal
                if not _is_regular(stat.st_mode):
                    continue
                if stat.st_size > max_file_bytes or stat.st_size > budget:
                    skipped[path] = (stat.st_size, stat.st_mtime_ns)
                else:
                    budget -= stat.st_size
            # a tracked file that became too large leaves the index: the snapshot lists it instead of an old copy
            dropped = [p for p in skipped if candidates[p]]
            if dropped:
                self._git("update-index", "--force-remove", "-z", "--stdin", input=_nul(dropped))
            # paths, not pathspecs: update-index takes each as it is, in time linear in their number
            changed = [p for p in candidates if p not in skipped]
            if changed:
                self._git("update-index", "--add", "--remove", "-z", "--stdin", input=_nul(changed))
            tree = self._git("write-tree").decode().strip()
            message = json.dumps({"skipped": {p: list(v) for p, v in sorted(skipped.items())}},
                                 separators=(",", ":"))
            # on standard input: a long list would not fit in one argument
            commit = self._git("commit-tree", tree, "-F", "-", input=message.encode()).decode().strip()
            self._manifests[commit] = skipped
            return Captured(commit, skipped)

    def _is_own(self, path: str) -> bool:
        return any(_within(path, own) for own in self.own)

    def skipped(self, snapshot: str) -> Skipped:
        """The files `snapshot` lists without storing them."""
        known = self._manifests.get(snapshot)
        if known is not None:
            return known
        with self.locked():
            raw = self._git("cat-file", "commit", snapshot)
        message = raw.split(b"\n\n", 1)[1] if b"\n\n" in raw else b"{}"
        try:
            listed = json.loads(message).get("skipped", {})
            skipped = {str(p): (int(v[0]), int(v[1])) for p, v in listed.items()}
        except (ValueError, TypeError, AttributeError, IndexError):
            skipped = {}
        self._manifests[snapshot] = skipped
        return skipped

    def changed(self, before: str, after: str, scope: str) -> list[str]:
        """Paths under `scope` that differ between two snapshots (a listed file counts when its size or time did)."""
        with self.locked():
            names = self._git("diff-tree", "-r", "-z", "--name-only", "--no-renames", before, after, "--",
                              scope or ".")
        paths = set(_split(names))
        old, new = self.skipped(before), self.skipped(after)
        paths |= {p for p in old.keys() | new.keys() if old.get(p) != new.get(p) and _within(p, scope)}
        return sorted(paths)

    def entries(self, snapshot: str, paths: Iterable[str]) -> dict[str, Entry]:
        """The stored files among `paths` in `snapshot` (a path it lacks, or lists without storing, is absent)."""
        found: dict[str, Entry] = {}
        wanted = sorted(set(paths))
        with self.locked():
            for start in range(0, len(wanted), _CHUNK):
                listing = self._git("ls-tree", "-z", "-r", snapshot, "--", *wanted[start:start + _CHUNK])
                for item in _split(listing):
                    meta, _, path = item.partition("\t")
                    mode, kind, oid = meta.split(" ")
                    if kind == "blob" and path in wanted:
                        found[path] = Entry(mode, oid)
        return found

    def blobs(self, oids: Iterable[str]) -> dict[str, bytes]:
        """The content of each blob."""
        wanted = sorted(set(oids))
        if not wanted:
            return {}
        with self.locked():
            out = self._git("cat-file", "--batch", input="".join(f"{oid}\n" for oid in wanted).encode())
        contents: dict[str, bytes] = {}
        at = 0
        for oid in wanted:
            end = out.index(b"\n", at)
            header = out[at:end].split(b" ")
            if len(header) != 3:
                raise GitError(f"git cat-file has no blob {oid}")
            size = int(header[2])
            contents[oid] = out[end + 1:end + 1 + size]
            at = end + 1 + size + 1
        return contents

    def checkout(self, snapshot: str, paths: list[str]) -> None:
        """Write `paths` (stored in `snapshot`) into the work tree as the snapshot has them."""
        if not paths:
            return
        with self.locked():
            self._git("checkout", snapshot, "--pathspec-from-file=-", "--pathspec-file-nul", input=_nul(paths))

    def prune(self, older_than_days: int) -> None:
        """Drop what no snapshot of the last `older_than_days` days needs (and pack the rest), unless nothing was
        captured since the last time."""
        mark = self.git_dir / PRUNED_MARK
        with self.locked():
            if not (self.git_dir / "HEAD").exists():
                return
            try:
                if mark.stat().st_mtime >= self.last_used():
                    return
            except OSError:
                pass
            self._git("gc", "--quiet", f"--prune={older_than_days}.days.ago")
            mark.touch()

    def last_used(self) -> float:
        """When a snapshot was last taken here (seconds since the epoch); 0 if never."""
        try:
            return (self.git_dir / USED_MARK).stat().st_mtime
        except OSError:
            return 0.0


def _git_env(env: Mapping[str, str], git_dir: Path, work_tree: Path) -> dict[str, str]:
    """The caller's environment without any GIT_ variable of its own (an index file, an object directory, a
    namespace would redirect the commands), pointed at the shadow repository."""
    clean = {k: v for k, v in env.items() if not k.startswith("GIT_")}
    clean.update(_IDENTITY)
    clean.update(GIT_DIR=str(git_dir), GIT_WORK_TREE=str(work_tree), GIT_LITERAL_PATHSPECS="1",
                 GIT_TERMINAL_PROMPT="0", GIT_OPTIONAL_LOCKS="0", LC_ALL="C")
    for name in ("PATH", "HOME"):
        if name not in clean and name in os.environ:
            clean[name] = os.environ[name]
    return clean


def _user_exclude(work_tree: Path) -> Path | None:
    """The user's repository's `info/exclude` (a worktree's `.git` file points at its git directory, whose
    `commondir` holds the shared one)."""
    dot_git = work_tree / ".git"
    try:
        if dot_git.is_dir():
            return dot_git / "info" / "exclude"
        text = dot_git.read_text(encoding="utf-8").strip()
    except OSError:
        return None
    if not text.startswith("gitdir:"):
        return None
    git_dir = (work_tree / text.removeprefix("gitdir:").strip()).resolve()
    try:
        common = (git_dir / "commondir").read_text(encoding="utf-8").strip()
        git_dir = (git_dir / common).resolve()
    except OSError:
        pass
    return git_dir / "info" / "exclude"


def _inside(work_tree: Path, paths: Iterable[Path]) -> list[str]:
    """Those of `paths` inside `work_tree`, relative to it (`/`-separated; symlinks resolved on both sides)."""
    root = Path(os.path.realpath(work_tree))
    found = []
    for path in paths:
        real = Path(os.path.realpath(path))
        if real != root and real.is_relative_to(root):
            found.append(real.relative_to(root).as_posix())
    return sorted(set(found))


def _pattern(path: str) -> bytes:
    """An exclude line matching exactly `path` (relative to the work tree) and everything under it."""
    escaped = "".join("\\" + c if c in "\\*?[]!# " else c for c in path)
    return ("/" + escaped + "\n").encode("utf-8", "surrogateescape") if "\n" not in path else b""


def _split(output: bytes) -> list[str]:
    return [item for item in output.decode("utf-8", "surrogateescape").split("\0") if item]


def _nul(paths: Iterable[str]) -> bytes:
    return b"".join(p.encode("utf-8", "surrogateescape") + b"\0" for p in paths)


def _is_regular(mode: int) -> bool:
    return (mode & 0o170000) == 0o100000


def _within(path: str, scope: str) -> bool:
    return not scope or path == scope or path.startswith(scope + "/")
