"""InstructionDiscovery: ambient global and project `AGENTS.md` files observed as the one
ordered aggregate `core/instructions` source; in a project the user has not trusted, a project `AGENTS.md` that
resolves outside the project root (a symlink a repository ships, to ~/.ssh/... say) is not read (`outside_project`)."""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Final

import anyio

from ..location import dirs_from_root
from .algebra import UNAVAILABLE, Instructions, Unavailable
from .sources import InstructionFile, file_list_instructions, read_instruction_files

__all__ = [
    "AGENTS_FILE",
    "DISCOVERY_KEY",
    "discover_instruction_paths",
    "discovery_instructions",
    "discovery_source",
    "outside_project",
    "scan_discovery",
]

log = logging.getLogger(__name__)

DISCOVERY_KEY: Final = "core/instructions"
AGENTS_FILE: Final = "AGENTS.md"

_WARNED_CAPACITY: Final = 4096
_warned: set[Path] = set()  # the links out already logged (once each per process)
_warned_lock = threading.Lock()


def outside_project(path: Path, root: Path, resolved: Path | None = None) -> bool:
    """Whether a project instruction file resolves (symlinks followed; `resolved` when known) outside `root` (the
    project root, resolved), so that a project not trusted leaves it unread; logged once per file (blocking)."""
    resolved = path.resolve() if resolved is None else resolved
    if resolved.is_relative_to(root):
        return False
    with _warned_lock:
        fresh = path not in _warned and len(_warned) < _WARNED_CAPACITY
        if fresh:
            _warned.add(path)
    if fresh:
        log.warning("%s links outside the project (to %s) and is not read until you trust the project (`ocs trust`)",
                    path, resolved)
    return True


def discover_instruction_paths(
    directory: Path,
    project_root: Path,
    global_config_dir: Path | None,
    disable_project: bool,
    confined: bool = False,
) -> list[Path]:
    """The ambient `AGENTS.md` files, in order (blocking: a worker thread, or the loop on local mounts).

    Order: the global `<global_config_dir>/AGENTS.md` first, then project files from the
    project root DOWN to `directory` (both inclusive), so the most specific file comes last
    and wins where instructions conflict. Paths are resolved and deduplicated (first wins).
    Project files are skipped when `disable_project` is set or `directory` lies outside
    `project_root`, and when `confined` (the project is not trusted) those that resolve outside it;
    the global file stays eligible either way.
    """
    candidates: list[tuple[Path, bool]] = []  # (file, whether it is the project's)
    if global_config_dir is not None:
        candidates.append((Path(global_config_dir).expanduser().resolve() / AGENTS_FILE, False))
    root = Path(project_root).resolve()
    if not disable_project:
        for folder in dirs_from_root(root, Path(directory).resolve()):
            candidates.append((folder / AGENTS_FILE, True))
    seen: set[Path] = set()
    found: list[Path] = []
    for candidate, in_project in candidates:
        if not candidate.is_file():
            continue
        resolved = candidate.resolve()
        if confined and in_project and outside_project(candidate, root, resolved):
            continue
        if resolved in seen:
            continue
        seen.add(resolved)
        found.append(resolved)
    return found


def scan_discovery(
    directory: Path, project_root: Path, global_config_dir: Path | None, disable_project: bool,
    confined: bool = False,
) -> tuple[InstructionFile, ...] | Unavailable:
    """The ambient files read (blocking: a worker thread, or the loop on local mounts); any scan or read error makes
    them unavailable."""
    try:
        paths = discover_instruction_paths(directory, project_root, global_config_dir, disable_project, confined)
        return read_instruction_files(paths)
    except (OSError, ValueError):
        return UNAVAILABLE


def discovery_instructions(files: tuple[InstructionFile, ...] | Unavailable) -> Instructions:
    """The `core/instructions` source of what `scan_discovery` read: no files at all yields EMPTY (an absent
    source), an unreadable one makes the source unavailable."""
    return file_list_instructions(
        DISCOVERY_KEY,
        files,
        header=lambda path: f"Instructions found in {path}:",
        update_intro=(
            "The AGENTS.md instruction files in effect have changed. "
            "The complete current set follows and replaces every set given earlier."
        ),
        removal="No AGENTS.md instruction files are in effect any more; disregard the ones given earlier.",
    )


async def discovery_source(
    directory: Path,
    project_root: Path,
    global_config_dir: Path | None,
    disable_project: bool,
    confined: bool = False,
) -> Instructions:
    """`core/instructions`: the ordered ambient `AGENTS.md` set (see `discover_instruction_paths`), scanned and read
    in a worker thread."""
    files = await anyio.to_thread.run_sync(scan_discovery, directory, project_root, global_config_dir,
                                           disable_project, confined)
    return discovery_instructions(files)
