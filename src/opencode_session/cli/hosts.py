"""Where a command's sessions live: the embedded host on a local database, or a running `ocs serve` reached
through the network client (`--attach URL`). Both are the same client API."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path

from ..client.errors import ClientError
from ..client.generated import OpenCodeClient
from .startup import StartupError, default_db_path


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__


@asynccontextmanager
async def open_host(attach: str | None, db: str | Path | None, directory: Path,
                    env: Mapping[str, str] | None = None, *, plugins: bool = False,
                    create: bool = True) -> AsyncIterator[OpenCodeClient]:
    """The client for this command; raises StartupError when the server cannot be reached or the database opened.
    With `plugins` an embedded host loads the installed Python plugins and opencode.json's (a server has its own);
    without `create` (a command that only reads) a database that does not exist is not created."""
    env = os.environ if env is None else env
    if attach:
        password = env.get("OPENCODE_SERVER_PASSWORD")
        auth = (env.get("OPENCODE_SERVER_USERNAME") or "opencode", password) if password else None
        async with OpenCodeClient(attach, auth=auth) as client:
            try:
                await client.health.get()
            except ClientError as unreachable:
                raise StartupError(f"cannot reach ocs serve at {attach}: {unreachable}") from None
            yield client
        return
    from ..core.store import DatabaseNotFoundError, StoreError, describe_database
    from ..sdk import OpenCode  # the embedded host brings the whole runtime: only when it is used

    path = db or default_db_path()
    host = OpenCode(db=path, directory=directory, env=env, discover_plugins=plugins, create=create)
    try:
        await host.open()
    except DatabaseNotFoundError:
        await host.aclose()
        raise StartupError(f"the database {path} does not exist (this command only reads one: `ocs run` creates it;"
                           " choose another with --db)") from None
    except (OSError, StoreError) as unusable:
        await host.aclose()
        raise StartupError(f"cannot open the database {describe_database(path)}: {_reason(unusable)}"
                           " (choose another with --db)") from None
    try:
        yield host
    finally:
        await host.aclose()
