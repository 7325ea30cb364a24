"""The store backends the contract suite runs on: each makes fresh, empty databases for one test."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path

from opencode_session.core.store import Backend
from opencode_session.core.store.postgres import PostgresBackend
from opencode_session.core.store.sqlite import SqliteBackend
from tests.support.postgres import fresh_schema


@dataclass
class BackendFactory:
    name: str
    _root: Path | None = field(default=None, repr=False)
    _url: str | None = field(default=None, repr=False)

    def prepare(self, tmp_path: Path, stack: contextlib.ExitStack) -> None:
        self._root = tmp_path
        if self.name == "postgres":
            self._url = stack.enter_context(fresh_schema())

    def backend(self) -> Backend:
        """A backend on this test's database (the same one each call, so a test can reopen it)."""
        if self._url is not None:
            return PostgresBackend(self._url)
        assert self._root is not None
        return SqliteBackend(self._root / "contract.sqlite")


BACKENDS = [BackendFactory("sqlite"), BackendFactory("postgres")]
