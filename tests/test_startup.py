"""Start-up loads what serving needs and nothing heavier: provider SDKs, their HTTP client and the terminal UI load
when first used (a fast `ocs serve` start and a small idle footprint depend on it)."""

from __future__ import annotations

import json
import subprocess
import sys

LAZY = ("httpx2", "openai", "anthropic", "rich")


def test_serving_imports_leave_provider_sdks_and_rich_unloaded() -> None:
    code = ("import json, sys\n"
            "from opencode_session.cli.main import app\n"
            "from opencode_session.cli import serving\n"
            "from opencode_session.server import app as server_app, serve\n"
            "from opencode_session.core import runtime\n"
            f"print(json.dumps(sorted(m for m in {LAZY!r} if m in sys.modules)))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert json.loads(out.stdout) == []

