"""`ocs`: the command-line entry point (serve the V2 API; more commands build on the client and SDK)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import platformdirs
import typer

from ..core.execution.runner import runner_drain_factory
from ..core.runtime import RuntimeOptions
from ..core.store import DatabaseInUseError
from ..server.serve import serve as serve_app

app = typer.Typer(add_completion=False, help="opencode-session: durable OpenCode V2 sessions.")

APP_NAME = "opencode-session"


def default_db_path() -> Path:
    """The database under the user's data directory (XDG_DATA_HOME on Linux)."""
    return Path(platformdirs.user_data_dir(APP_NAME, appauthor=False)) / "sessions.db"


@app.command()
def serve(
    host: str = typer.Option("127.0.0.1", help="Interface to listen on."),
    port: int = typer.Option(4096, help="Port to listen on; 0 picks a free port."),
    db: Path = typer.Option(None, help="SQLite database file (default: under the user data directory)."),
    directory: Path = typer.Option(None, help="Default Location for new sessions (default: current directory)."),
    stall_timeout: float = typer.Option(15.0, help="Cut off an event stream whose reader accepts nothing for this "
                                                   "many seconds."),
) -> None:
    """Serve the OpenCode V2 API over HTTP until SIGINT/SIGTERM."""
    db_path = db or default_db_path()
    options = RuntimeOptions(db_path=db_path, directory=directory or Path(os.getcwd()), drain_factory=runner_drain_factory)

    def ready(url: str, _runtime) -> None:
        typer.echo(f"opencode-session listening on {url}", err=False)
        typer.echo(f"database: {db_path}", err=True)

    try:
        asyncio.run(serve_app(options, host, port, on_ready=ready, stall_timeout=stall_timeout))
    except DatabaseInUseError as busy:
        typer.echo(f"ocs serve: {busy}", err=True)
        raise typer.Exit(1) from None


@app.callback()
def _root() -> None:
    """opencode-session command line."""


def main() -> None:
    app()


if __name__ == "__main__":
    main()
