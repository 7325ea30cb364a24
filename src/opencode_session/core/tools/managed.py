"""Managed Tool Output Files: the complete text of an output too large for the model, kept in one flat directory
under the data directory (unique names, created exclusively) for 7 days, where ordinary tools may read it."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from pathlib import Path

import anyio

from ...schema.ids import ascending
from ..private import private_directory

log = logging.getLogger(__name__)

MANAGED_DIRECTORY = "tool-output"
RETENTION_SECONDS = 7 * 24 * 3600
SWEEP_INTERVAL_SECONDS = 3600


class ManagedOutputs:
    def __init__(self, root: Path) -> None:
        self.root = root

    def keep(self, text: str) -> Path | None:
        """Write `text` to a new file and return its path; None when it cannot be written (the output is then
        explicitly lossy, and the operator is told once per output)."""
        path = self.root / ascending("tool")
        created = False
        try:
            private_directory(self.root)  # this user's alone, or not used (UnsafeDirectory is an OSError)
            # a new file only, never an existing one (or a link planted under that name); private like the database
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600)
            created = True
            with open(fd, "w", encoding="utf-8", errors="surrogatepass") as out:
                out.write(text)
        except OSError as exc:
            log.warning("could not keep a tool's complete output in %s (%s); the model sees a preview without it",
                        self.root, exc)
            if created:  # a partial file (a full disk) would pass for the complete output
                with contextlib.suppress(OSError):
                    path.unlink()
            return None
        return path

    def sweep(self, now: float | None = None) -> int:
        """Remove files older than the retention period; returns how many were removed."""
        cutoff = (time.time() if now is None else now) - RETENTION_SECONDS
        removed = 0
        try:
            entries = list(os.scandir(self.root))
        except OSError:
            return 0
        for entry in entries:
            try:
                if entry.is_file(follow_symlinks=False) and entry.stat(follow_symlinks=False).st_mtime < cutoff:
                    os.unlink(entry.path)
                    removed += 1
            except OSError:
                continue  # gone already, or not ours to remove: the next sweep tries again
        return removed

    async def sweep_forever(self, interval: float = SWEEP_INTERVAL_SECONDS) -> None:
        """Sweep now, then every `interval` seconds, until cancelled."""
        while True:
            await anyio.to_thread.run_sync(self.sweep, abandon_on_cancel=True)
            await asyncio.sleep(interval)
