"""The store backends the contract suite runs on: each makes fresh, empty databases for one test."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from opencode_session.core.store import Backend
from opencode_session.core.store.sqlite import SqliteBackend


@dataclass
class BackendFactory:
    name: str
    _root: Path | None = field(default=None, repr=False)

    def prepare(self, tmp_path: Path) -> None:
        self._root = tmp_path

    def backend(self) -> Backend:
        """A backend on this test's database (the same one each call, so a test can reopen it)."""
        assert self._root is not None
        return SqliteBackend(self._root / "contract.sqlite")


BACKENDS = [BackendFactory("sqlite")]
