"""Nearby AGENTS.md injection: after a successful read below the Location, AGENTS.md files between the read path
and the Location root are shown to the model once per Session as a durable synthetic message (in a project not
trusted, not those that resolve outside the project root)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio

from ...schema import events as ev
from ..boundary import Boundary
from ..location import dirs_from_root
from ..store import Store, Tx
from .discovery import AGENTS_FILE, outside_project


def nearby_files(read_path: Path, location_root: Path, confined_to: Path | None = None) -> list[Path]:
    """AGENTS.md files in the directories from `location_root` (exclusive: its files are ambient) down to the
    read path's directory, outermost first; with `confined_to` (an untrusted project's resolved root), none resolving
    outside it."""
    start = read_path if read_path.is_dir() else read_path.parent
    below = dirs_from_root(location_root, start)[1:]
    return [folder / AGENTS_FILE for folder in below if (folder / AGENTS_FILE).is_file()
            and not (confined_to is not None and outside_project(folder / AGENTS_FILE, confined_to))]


class NearbyInstructions:
    """Per-process claims plus a durable check of earlier injections keep each file to one injection per Session."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._claimed: dict[str, set[str]] = {}

    def hook(self, boundary: Boundary, _assistant_id: str) -> Callable[[Path], Awaitable[None]]:
        session_id = boundary.session.id
        root = boundary.location.directory
        project_root = boundary.location.project_root
        confined_to = project_root if boundary.config.confined() else None  # a Location's root is resolved

        async def on_read(path: Path) -> None:
            files = await anyio.to_thread.run_sync(nearby_files, path.resolve(), root, confined_to)
            claimed = self._claimed.setdefault(session_id, set())
            fresh = [f for f in files if str(f) not in claimed]
            if not fresh:
                return
            claimed.update(str(f) for f in fresh)
            contents = await anyio.to_thread.run_sync(_read_all, fresh)
            if not contents:
                return

            def _inject(tx: Tx) -> None:
                done = tx.messages.injected_instruction_paths(session_id)
                todo = [(p, c) for p, c in contents if str(p) not in done]
                if not todo:
                    return
                text = "\n\n".join(f"Instructions found in {p}:\n{c.rstrip()}" for p, c in todo)
                shown = ", ".join(_relative(p, project_root) for p, _ in todo)
                tx.append(ev.Synthetic(sessionID=session_id, text=text, description=f"Loaded {shown}",
                                       metadata={"instruction": {"paths": [str(p) for p, _ in todo]}}))

            await self.store.write(_inject)

        return on_read


def _read_all(paths: list[Path]) -> list[tuple[Path, str]]:
    out = []
    for path in paths:
        try:
            out.append((path, path.read_text(encoding="utf-8")))
        except (OSError, UnicodeDecodeError):
            continue  # an unreadable nearby file is skipped; the read itself already succeeded
    return out


def _relative(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)
