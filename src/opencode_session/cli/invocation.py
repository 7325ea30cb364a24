"""How the user can type `ocs` from where they stand: `python3 run.py ocs` under run.py, `ocs` when PATH finds this
very program (on Debian `/usr/bin/ocs` is cscope's), else the path of the script that is running."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

# run.py sets this to the words that started it (`python3 run.py ocs`) before it becomes `ocs`
LAUNCHER_ENV = "OCS_LAUNCHER"


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _spelled(path: Path) -> str:
    """A path as the user would type it from the working directory: relative when it lies below, else absolute."""
    try:
        relative = path.resolve().relative_to(Path(os.getcwd()).resolve())
    except ValueError:
        return str(path)
    return f"./{relative}" if relative.parts else str(path)


def ocs_command(argv0: str | None = None, environ: dict[str, str] | None = None) -> str:
    """The words that run this program's `ocs` from the working directory."""
    environ = os.environ.copy() if environ is None else environ
    launcher = environ.get(LAUNCHER_ENV, "").strip()
    if launcher:
        return launcher
    script = argv0 if argv0 is not None else sys.argv[0]
    name = Path(script).name
    if name not in ("ocs", "opencode-session"):
        return f"{Path(sys.executable).name} -m opencode_session.cli.main"
    for word in ("ocs", "opencode-session"):
        found = shutil.which(word, path=environ.get("PATH"))
        if found and _same_file(found, script):
            return word
    return _spelled(Path(script))
