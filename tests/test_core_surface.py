"""`opencode_session.core` names what the layers above it use: every name resolves to the object its module defines,
and importing the package alone loads none of its modules."""

from __future__ import annotations

import json
import subprocess
import sys

import opencode_session.core as core
from opencode_session.core.runtime import Runtime
from opencode_session.core.tools.tool import ToolContext


def test_every_exported_name_resolves():
    assert core.__all__ == sorted(core.__all__)
    for name in core.__all__:
        assert getattr(core, name) is not None, name
    assert core.Runtime is Runtime and core.ToolContext is ToolContext


def test_importing_core_alone_loads_none_of_its_modules():
    code = ("import json, sys\nimport opencode_session.core\n"
            "print(json.dumps(sorted(m for m in sys.modules if m.startswith('opencode_session.core.'))))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert json.loads(out.stdout) == []
