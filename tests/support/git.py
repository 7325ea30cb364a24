"""A git project for the undo and snapshot tests: a new repository holding the files their turns change."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from pathlib import Path

# What `tests.api.test_undo.file_changing_turn` edits, removes and chmods.
STARTING = {"notes.txt": "alpha\nbeta\n", "old.txt": "going away\n", "run.sh": "echo hi\n"}


def git_project(directory: Path, files: Mapping[str, str | bytes] = STARTING) -> Path:
    """`directory` (made if missing) as a new git repository holding `files`, named relative to it."""
    directory.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", str(directory)], check=True)
    for name, content in files.items():
        path = directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
    return directory
