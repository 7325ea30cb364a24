"""Locations: resolving a directory to its project root and a stable project ID, and the Location a request
selects."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from ..schema.errors import InvalidRequestError
from ..schema.location import LocationInfo, LocationProject


def find_git_root(directory: Path) -> Path | None:
    """The nearest ancestor of `directory` (or itself) holding `.git`; None outside any repository."""
    for candidate in (directory, *directory.parents):
        if (candidate / ".git").exists():
            return candidate
    return None


def dirs_from_root(root: Path, directory: Path) -> list[Path]:
    """The directories from `root` down to `directory`, both included, outermost first; empty when `directory` is
    neither `root` nor below it. Lexical: give it resolved paths."""
    try:
        relative = directory.relative_to(root)
    except ValueError:
        return []
    dirs = [root]
    for part in relative.parts:
        dirs.append(dirs[-1] / part)
    return dirs


@dataclass(frozen=True)
class Location:
    directory: Path
    project_root: Path
    is_git: bool
    workspace_id: str | None = None

    @property
    def project_id(self) -> str:
        if not self.is_git:
            return "global"
        return hashlib.sha256(str(self.project_root).encode()).hexdigest()[:16]

    def info(self) -> LocationInfo:
        return LocationInfo(
            directory=str(self.directory),
            workspaceID=self.workspace_id,
            project=LocationProject(id=self.project_id, directory=str(self.project_root)),
        )


def resolve_location(directory: str | Path, workspace_id: str | None = None) -> Location:
    path = Path(directory).expanduser().resolve()
    root = find_git_root(path)
    return Location(directory=path, project_root=root or path, is_git=root is not None, workspace_id=workspace_id)


def require_usable_directory(directory: str, where: str, field: str) -> None:
    """InvalidRequestError for a directory that cannot even be looked up (a NUL byte, a name too long,
    `~nosuchuser`), named as the request's `where` ("query", "body") and `field`."""
    try:
        resolve_location(directory).directory.is_dir()
    except (ValueError, OSError, RuntimeError) as exc:  # RuntimeError: pathlib's expanduser of an unknown ~user
        raise InvalidRequestError(f"Invalid {where}: {field}: unusable directory path ({type(exc).__name__})",
                                  kind=where, field=field) from None


def select_location(default: Location, directory: str | None, workspace: str | None = None) -> Location:
    """The Location a request's `location` query selects: `default` when it names no directory; an existing
    directory otherwise (InvalidRequestError for `location.directory` when it is unusable or missing)."""
    if directory is None:
        return default
    require_usable_directory(directory, "query", "location.directory")
    location = resolve_location(directory, workspace)
    if not location.directory.is_dir():
        raise InvalidRequestError(f"Location directory does not exist: {directory}", kind="query",
                                  field="location.directory")
    return location
