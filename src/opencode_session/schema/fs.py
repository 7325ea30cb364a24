"""Entries of a Location's file tree as the file-system operations list and find them."""

from __future__ import annotations

from typing import Literal

from .base import Struct


class FileSystemEntry(Struct):
    path: str  # relative to the Location directory, `/`-separated
    type: Literal["file", "directory"]
