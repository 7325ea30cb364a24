"""`opencode_session.core` is a namespace of modules: importing the package alone loads none of them, so importing one
submodule (`core.config`, say) loads only what it needs."""

from __future__ import annotations

import json
import subprocess
import sys


def test_importing_core_alone_loads_none_of_its_modules():
    code = ("import json, sys\nimport opencode_session.core\n"
            "print(json.dumps(sorted(m for m in sys.modules if m.startswith('opencode_session.core.'))))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert json.loads(out.stdout) == []
