"""The patches of dependencies' private names are checked against the versions they were written for: the
installed (locked) versions pass, and with another version installed the first use of a patch of it is refused,
naming the package; importing the module reads nothing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from opencode_session import compat


def test_the_locked_versions_are_the_ones_the_patches_were_written_for():
    compat.check_versions()
    lock = (Path(__file__).resolve().parents[1] / "requirements.lock").read_text().splitlines()
    pinned = dict(line.strip().split("==") for line in lock if "==" in line)
    assert {package: pinned[package] for package in compat.WRITTEN_FOR} == dict(compat.WRITTEN_FOR)


def test_another_version_is_refused_naming_the_package():
    with pytest.raises(compat.IncompatibleDependencyError) as refused:
        compat.check_versions({"openai": "0.0.1"})
    message = str(refused.value)
    assert "openai is installed at" in message and "0.0.1" in message
    with pytest.raises(compat.IncompatibleDependencyError, match="no-such-package is not installed"):
        compat.check_versions({"no-such-package": "1.0"})


def test_a_patch_of_another_installed_version_is_refused_at_its_first_use():
    code = ("import importlib.metadata as metadata\n"
            "real = metadata.version\n"
            "metadata.version = lambda name: '9.9.9' if name == 'anthropic' else real(name)\n"
            "from opencode_session.core import runtime\n"  # importing reads no version
            "from opencode_session.compat import pin_sdk_headers, set_network_backend\n"
            "import anthropic, httpx2\n"
            "from opencode_session.client.transport import ProbedBackend\n"
            "set_network_backend(httpx2.AsyncHTTPTransport(), ProbedBackend())\n"  # httpx2's patch: its own check
            "print('imported')\n"
            "pin_sdk_headers(anthropic.AsyncAnthropic(api_key='k'), {})\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode != 0 and out.stdout.strip() == "imported"
    assert "IncompatibleDependencyError: anthropic is installed at 9.9.9" in out.stderr
