"""Folders only their owner may use: the runtime's own (tool output, snapshots, each shadow git repository) are made
0700, and one that is there already is used only if it is this user's and nobody else may write in it; another
local user could otherwise plant what the runtime then reads or runs (a git directory whose config names a command
git runs at the next snapshot)."""

from __future__ import annotations

import os
import stat
from pathlib import Path


class UnsafeDirectory(PermissionError):
    """A folder the runtime would keep its files in belongs to another user, is writable by others, or is not a
    plain directory: it is not used."""


def private_directory(path: Path) -> Path:
    """`path` as a directory of this user's alone: made 0700 (with its missing parents) when it is not there;
    refused (UnsafeDirectory) when it is a symlink or not a directory, belongs to another user, or others may write
    in it; its read access for others taken away otherwise (an earlier version's 0755)."""
    missing = [d for d in (path, *path.parents) if not d.exists()]
    for folder in reversed(missing):
        try:
            folder.mkdir(mode=0o700)
        except FileExistsError:
            pass  # made meanwhile: checked below like any other
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode):
        raise UnsafeDirectory(f"{path} is not a directory of its own (a symlink or a file): not used")
    if info.st_uid != os.geteuid():
        raise UnsafeDirectory(f"{path} belongs to another user (uid {info.st_uid}): not used")
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise UnsafeDirectory(f"{path} is writable by other users (mode {stat.S_IMODE(info.st_mode):o}): not used")
    if stat.S_IMODE(info.st_mode) != 0o700:
        os.chmod(path, 0o700)
    return path


__all__ = ["UnsafeDirectory", "private_directory"]
