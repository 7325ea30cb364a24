"""The import-linter contracts in pyproject.toml (drawn in ARCHITECTURE.md) hold: layers, a network-only client."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _lint_imports() -> str:
    beside = Path(sys.executable).with_name("lint-imports")
    return str(beside) if beside.exists() else (shutil.which("lint-imports") or "lint-imports")


def test_import_contracts_are_kept():
    result = subprocess.run(
        [_lint_imports(), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
