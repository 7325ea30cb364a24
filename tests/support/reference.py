"""The reference files (OpenCode's OpenAPI document, its tool table) the contract tests compare against: in
`shared/reference` beside the checkout, or in the directory `OCS_REFERENCE_DIR` names."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

REFERENCE_DIR = Path(os.environ.get("OCS_REFERENCE_DIR")
                     or Path(__file__).resolve().parents[2].parent / "shared" / "reference")
REFERENCE = REFERENCE_DIR / "opencode-v2-openapi.json"


def _set(value: str | None) -> bool:
    return (value or "").lower() not in ("", "0", "false")


def reference_file(path: Path, env: Mapping[str, str]) -> Path:
    """`path`, if it exists. Missing, its tests are skipped on a developer's machine, but fail under CI (`CI` or
    `OCS_REQUIRE_REFERENCE` set), where a silently skipped contract check would pass a build that checked nothing."""
    if not path.exists():
        message = f"reference document not found at {path} (OCS_REFERENCE_DIR may name the directory that holds it)"
        if _set(env.get("CI")) or _set(env.get("OCS_REQUIRE_REFERENCE")):
            pytest.fail(f"{message}; CI (or OCS_REQUIRE_REFERENCE) is set, so the contract tests must run",
                        pytrace=False)
        pytest.skip(message)
    return path


def load_reference(path: Path, env: Mapping[str, str]) -> dict[str, Any]:
    """The reference OpenAPI document at `path` (see `reference_file`)."""
    document: dict[str, Any] = json.loads(reference_file(path, env).read_text())
    return document
