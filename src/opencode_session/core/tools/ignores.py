"""Which files a search sees, by the rules ripgrep applies as `grep` runs it (`--hidden`, ignore files on), so the
pure-Python searches (`glob`, the `grep` fallback) see exactly what ripgrep does.

Hidden files are seen; `.git` and `node_modules` never are; symlinks are not followed. Ignore files apply to their
directory and below, the nearest first, the last matching line of a file deciding (`!` re-includes): `.rgignore`,
then `.ignore`, then, inside a git repository only, `.gitignore`, `.git/info/exclude` and the global excludes file
(git's `core.excludesFile`, else `$XDG_CONFIG_HOME/git/ignore`). A repository's `.gitignore` files stop at its root,
and an ignored directory is not entered. A search glob (`glob`'s pattern, `grep`'s `include`) takes precedence, as
ripgrep's `--glob` does: a file it matches is seen even if ignored, unless it lies in an ignored directory."""

from __future__ import annotations

import os
import pwd
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pathspec

SKIPPED = frozenset({".git", "node_modules"})
# Whether a search glob names an entry, given its path below the search root, its name and whether it is a directory.
SearchGlob = Callable[[str, str, bool], bool]
_EXCLUDES_FILE = re.compile(r"(?im)^\s*excludesfile\s*=\s*\"?\s*(\S+?)\s*\"?\s*$")


@dataclass
class _Level:
    """The ignore files of one directory."""

    directory: str
    custom: pathspec.GitIgnoreSpec | None  # .rgignore
    ignore: pathspec.GitIgnoreSpec | None  # .ignore
    git: pathspec.GitIgnoreSpec | None  # .gitignore
    exclude: pathspec.GitIgnoreSpec | None  # .git/info/exclude, where the repository's root is
    has_git: bool


def named_by(matcher: Any, anchored: bool) -> SearchGlob:
    """The search glob of a compiled wcmatch glob: it matches the path below the root when `anchored` (the pattern
    has a `/`), else the name."""

    def names(relative: str, name: str, _is_dir: bool) -> bool:
        return bool(matcher.match(relative if anchored else name))

    return names


def walk(root: Path, env: Mapping[str, str], search_glob: SearchGlob | None = None,
         ) -> Iterator[tuple[str, list[str], list[str]]]:
    """Like os.walk, top-down and sorted: each directory a search of `root` enters, with the subdirectories it will
    enter (callers may prune them further) and the files it sees."""
    rules = _Rules(env)
    for directory, dirs, files in os.walk(root):
        chain = rules.chain(directory)
        relative = os.path.relpath(directory, root)
        prefix = "" if relative == "." else relative.replace(os.sep, "/") + "/"

        def seen(name: str, is_dir: bool, directory: str = directory, prefix: str = prefix,
                 chain: tuple[list[_Level], bool] = chain) -> bool:
            full = os.path.join(directory, name)
            if name in SKIPPED or os.path.islink(full):
                return False
            if search_glob is not None:
                if search_glob(prefix + name, name, is_dir):
                    return True
                if not is_dir:
                    return False  # a file the glob does not name is not searched
            return not rules.ignored(chain, full, is_dir)

        dirs[:] = [d for d in sorted(dirs) if seen(d, True)]
        yield directory, dirs, [f for f in sorted(files) if seen(f, False)]


class _Rules:
    """The ignore files of the directories one walk meets, read once each."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self._env = env
        self._levels: dict[str, _Level] = {}
        self._chains: dict[str, tuple[list[_Level], bool]] = {}
        self._global: pathspec.GitIgnoreSpec | None | bool = False  # False: not read yet

    def chain(self, directory: str) -> tuple[list[_Level], bool]:
        """The levels that apply in `directory` (it and its ancestors, nearest first), and whether any of them is
        in a git repository."""
        found = self._chains.get(directory)
        if found is None:
            parent = os.path.dirname(directory)
            above, in_git = self.chain(parent) if parent != directory else ([], False)
            level = self._level(directory)
            found = self._chains[directory] = ([level, *above], in_git or level.has_git)
        return found

    def _level(self, directory: str) -> _Level:
        level = self._levels.get(directory)
        if level is None:
            git = os.path.join(directory, ".git")
            has_git = os.path.exists(git)
            level = self._levels[directory] = _Level(
                directory, _read(os.path.join(directory, ".rgignore")), _read(os.path.join(directory, ".ignore")),
                _read(os.path.join(directory, ".gitignore")),
                _read(os.path.join(_git_dir(git), "info", "exclude")) if has_git else None, has_git)
        return level

    def ignored(self, chain: tuple[list[_Level], bool], path: str, is_dir: bool) -> bool:
        levels, in_git = chain
        verdicts: list[bool | None] = [None, None, None, None]
        repository: str | None = None
        for level in levels:
            relative = None  # computed for a level with a file that applies: most have none, and relpath is costly
            in_repository = in_git and repository is None
            for index, spec in enumerate((level.custom, level.ignore, level.git, level.exclude)):
                if verdicts[index] is None and spec is not None and (index < 2 or in_repository):
                    if relative is None:
                        relative = os.path.relpath(path, level.directory).replace(os.sep, "/") + ("/" if is_dir
                                                                                                   else "")
                    verdicts[index] = spec.check_file(relative).include
            if level.has_git and repository is None:
                repository = level.directory  # the repository's root: its own files go no further up
        verdict = next((v for v in verdicts if v is not None), None)
        if verdict is None and in_git and repository is not None and (excludes := self._global_excludes()):
            relative = os.path.relpath(path, repository).replace(os.sep, "/") + ("/" if is_dir else "")
            verdict = excludes.check_file(relative).include
        return verdict is True

    def _global_excludes(self) -> pathspec.GitIgnoreSpec | None:
        if self._global is False:
            self._global = _read(_excludes_file(self._env))
        return None if isinstance(self._global, bool) else self._global


def _read(path: str | None) -> pathspec.GitIgnoreSpec | None:
    if path is None:
        return None
    try:
        with open(path, "rb") as handle:
            text = handle.read().decode("utf-8", "replace")
    except OSError:
        return None
    import pathspec  # loaded with the first ignore file read, not at start-up

    spec = pathspec.GitIgnoreSpec.from_lines(text.splitlines())
    return spec if any(p.include is not None for p in spec.patterns) else None  # comments only: none


def _git_dir(git: str) -> str:
    """Where a repository's files are: `.git` itself, or for a worktree (a `.git` file) its common directory."""
    if os.path.isdir(git):
        return git
    try:
        with open(git, encoding="utf-8", errors="replace") as handle:
            line = handle.readline().strip()
    except OSError:
        return git
    if not line.startswith("gitdir:"):
        return git
    gitdir = os.path.join(os.path.dirname(git), line[len("gitdir:"):].strip())
    try:
        with open(os.path.join(gitdir, "commondir"), encoding="utf-8", errors="replace") as handle:
            return os.path.join(gitdir, handle.readline().strip())
    except OSError:
        return gitdir


def _home(env: Mapping[str, str]) -> str | None:
    # ripgrep falls back to the account's home directory when HOME is unset
    home = env.get("HOME")
    if home:
        return home
    try:
        return pwd.getpwuid(os.getuid()).pw_dir
    except (KeyError, OSError):
        return None


def _excludes_file(env: Mapping[str, str]) -> str | None:
    """The global excludes file: `core.excludesFile` from git's XDG config, else from ~/.gitconfig, else git's
    default (`$XDG_CONFIG_HOME/git/ignore`, or ~/.config/git/ignore)."""
    home = _home(env)
    xdg = env.get("XDG_CONFIG_HOME") or (os.path.join(home, ".config") if home else None)
    for config in (os.path.join(xdg, "git", "config") if xdg else None,
                   os.path.join(home, ".gitconfig") if home else None):
        if config is None:
            continue
        try:
            with open(config, encoding="utf-8", errors="replace") as handle:
                found = _EXCLUDES_FILE.search(handle.read())
        except OSError:
            continue
        if found:
            value = found.group(1)
            return os.path.join(home, value[2:]) if value.startswith("~/") and home else value
    return os.path.join(xdg, "git", "ignore") if xdg else None
