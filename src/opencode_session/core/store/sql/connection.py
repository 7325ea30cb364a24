"""What the shared SQL needs of a database connection: `execute` and `executemany` with `?` parameters, cursors
that fetch rows readable by position and by column name. sqlite3 is one as it is; PostgreSQL's adapts to it."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Protocol


class Row(Protocol):
    def __getitem__(self, key: int | str) -> Any: ...

    def __len__(self) -> int: ...

    def __iter__(self) -> Iterator[Any]: ...


class Cursor(Protocol):
    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...


class Connection(Protocol):
    def execute(self, sql: str, parameters: Sequence[Any] = ..., /) -> Any: ...

    def executemany(self, sql: str, parameters: Iterable[Sequence[Any]], /) -> Any: ...
