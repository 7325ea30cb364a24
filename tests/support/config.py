"""Writing a global `opencode.json` for tests: the provider `p` declares the models `m` and `a` (never dialled)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

DECLARED: dict[str, Any] = {
    "provider": {"p": {
        "npm": "@ai-sdk/openai-compatible",
        "options": {"baseURL": "http://127.0.0.1:9/v1"},
        "models": {"m": {}, "a": {}},
    }},
}


def write_global_config(config_home: str | Path | None = None, config: dict[str, Any] = DECLARED) -> Path:
    """Write `config` as the global opencode.json under `config_home` (default: $XDG_CONFIG_HOME)."""
    path = Path(config_home or os.environ["XDG_CONFIG_HOME"]) / "opencode" / "opencode.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(config))
    return path
