"""Core's patches of its dependencies' private names are checked against the versions they were written for: the
installed (locked) versions pass, and another installed version stops core from importing, naming the package."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from opencode_session.core import compat


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


def test_core_does_not_import_with_another_version_installed():
    code = ("import importlib.metadata as metadata\n"
            "real = metadata.version\n"
            "metadata.version = lambda name: '9.9.9' if name == 'anthropic' else real(name)\n"
            "from opencode_session.core import runtime\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode != 0
    assert "IncompatibleDependencyError: anthropic is installed at 9.9.9" in out.stderr
