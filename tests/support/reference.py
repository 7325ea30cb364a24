"""The reference wire contract (OpenCode's OpenAPI document) the protocol tests compare against."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

REFERENCE = Path(__file__).resolve().parents[2].parent / "shared" / "reference" / "opencode-v2-openapi.json"


def load_reference(path: Path, env: Mapping[str, str]) -> dict[str, Any]:
    """The reference document. Missing, its tests are skipped on a developer's machine, but fail under CI (`CI` set),
    where a silently skipped contract check would pass a build that checked nothing."""
    if not path.exists():
        message = f"reference document not found at {path}"
        if env.get("CI", "").lower() not in ("", "0", "false"):
            pytest.fail(f"{message}; CI is set, so the contract tests must run", pytrace=False)
        pytest.skip(message)
    document: dict[str, Any] = json.loads(path.read_text())
    return document
