"""Local MCP servers die with the process that started them, even one killed with SIGKILL: on Linux each is started
through a tiny wrapper that asks the kernel for SIGKILL when its parent dies (`PR_SET_PDEATHSIG`, kept across
`exec`) and then becomes the server. Elsewhere the server relies on what MCP's stdio transport already gives: its
stdin reaches end of file when the parent is gone, and MCP stdio servers exit on that."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

# argv: [python, -I, -S, -c, WRAPPER, parent pid, program, *args]. Exits 127 (as a shell does) when the program
# cannot be run, and at once when the parent died before the request took hold.
WRAPPER = """\
import ctypes, os, signal, sys
if ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL) != 0 or os.getppid() != int(sys.argv[1]):
    os._exit(1)
try:
    os.execvp(sys.argv[2], sys.argv[2:])
except OSError as e:
    sys.stderr.write("cannot run %s: %s\\n" % (sys.argv[2], e.strerror))
    os._exit(127)
"""


def supported() -> bool:
    return sys.platform.startswith("linux")


def wrapped(command: Sequence[str]) -> list[str]:
    """The argv that runs `command` so that it dies with this process (as it is where that cannot be asked for)."""
    if not supported():
        return list(command)
    return [sys.executable, "-I", "-S", "-c", WRAPPER, str(os.getpid()), *command]


__all__ = ["WRAPPER", "supported", "wrapped"]
