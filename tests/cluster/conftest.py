"""What the cluster tests share: `url`, a fresh PostgreSQL schema of this worker's database, dropped afterwards."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.postgres import fresh_schema


@pytest.fixture
def url() -> Iterator[str]:
    with fresh_schema() as made:
        yield made
