"""What `ocs` tells a user when it starts: which config files it read and what is wrong in them, which model
will answer, whether the server asks for a password, and the one-line reasons it cannot start."""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import platformdirs

if TYPE_CHECKING:
    from ..core.config import ConfigReport

APP_NAME = "opencode-session"


def say_stderr(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


class StartupError(Exception):
    """Why a command cannot start, in one line that says what to do about it."""


def default_db_path() -> Path:
    """The database under the user's data directory (XDG_DATA_HOME on Linux), which is ours alone: 0700, also when
    an older version created it readable by others."""
    folder = Path(platformdirs.user_data_dir(APP_NAME, appauthor=False))
    if folder.is_dir():
        folder.chmod(0o700)
    return folder / "sessions.db"


def missing_database(path: str | Path) -> StartupError:
    """Why a command that only reads a database cannot run: it does not exist (and is not created for it)."""
    return StartupError(f"the database {path} does not exist (this command only reads one: `ocs run` creates it;"
                        " choose another with --db)")


def require_directory(directory: Path) -> Path:
    if not directory.is_dir():
        raise StartupError(f"the directory {directory} does not exist (or is not a directory)")
    return directory.resolve()


@dataclass
class Survey:
    """The configuration of one directory as a user needs to hear it at start."""

    report: ConfigReport
    model: str | None = None  # "provider/model" that will answer
    model_problem: str | None = None  # why no model will answer, with how to fix it

    @property
    def config_files(self) -> str:
        if self.report.files:
            return ", ".join(str(f) for f in self.report.files)
        return "no opencode.json found (looked in the project and in the global config directory)"


def survey(directory: Path, env: Mapping[str, str], *, model: str | None = None, agent: str | None = None) -> Survey:
    """Read the config of `directory` and say which model `agent` (default: the default agent) would use, `model`
    overriding it. A config that cannot be read leaves `report.error` set."""
    # core (and the provider SDK under it) loads only for commands that read the config
    from ..core.agents import AgentNotFoundError, resolve_agent
    from ..core.config import inspect_config
    from ..core.llm.catalog import model_ref_from_string, resolve_model
    from ..core.llm.errors import ModelNotFoundError, NoModelConfiguredError
    from ..core.location import resolve_location

    result = Survey(inspect_config(directory, resolve_location(directory).project_root, env))
    config = result.report.config
    if config is None:
        return result
    try:
        ref = model_ref_from_string(model) if model else resolve_agent(config, agent).model
        resolved = resolve_model(config, ref, env)
        result.model = f"{resolved.provider_id}/{resolved.model_id}"
    except (NoModelConfiguredError, ModelNotFoundError) as missing:
        result.model_problem = missing.message
    except AgentNotFoundError as unknown:
        result.model_problem = str(unknown)
    return result


def report_config(found: Survey, say: Callable[[str], None]) -> None:
    """Warnings about the config and the keys it sets that are not acted on, one line each; raises StartupError
    for a config that cannot be used."""
    for warning in found.report.warnings:
        say(f"warning: {warning}")
    for ignored in found.report.ignored.values():
        say(f"note: {ignored}")
    if found.report.error is not None:
        raise StartupError(str(found.report.error))


def auth_line(env: Mapping[str, str]) -> str:
    if env.get("OPENCODE_SERVER_PASSWORD"):
        return f"on (HTTP basic, user {env.get('OPENCODE_SERVER_USERNAME') or 'opencode'})"
    return "off (set OPENCODE_SERVER_PASSWORD to require a password)"
