"""Locations: where a Session works (a directory, optionally a workspace) and its project."""

from __future__ import annotations

from .base import Struct
from .ids import WorkspaceID


class LocationProject(Struct):
    id: str
    directory: str


class LocationInfo(Struct):
    directory: str
    workspaceID: WorkspaceID | None = None
    project: LocationProject
