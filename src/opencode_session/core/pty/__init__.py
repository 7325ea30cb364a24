"""Pseudo-terminals: the processes a client runs interactively in a Location (terminal.py) and the runtime's set of
them (manager.py)."""

from .manager import FORCED_ENV, MAX_TERMINALS, Terminals
from .terminal import BUFFER_LIMIT, Reader, Terminal

__all__ = ["BUFFER_LIMIT", "FORCED_ENV", "MAX_TERMINALS", "Reader", "Terminal", "Terminals"]
