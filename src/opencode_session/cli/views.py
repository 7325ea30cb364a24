"""Which view shows a session: JSON lines, the terminal view when stdout is a terminal (`terminal.py`, imported only
then: it needs rich), else plain text (`render.py`)."""

from __future__ import annotations

import os
import sys

from .render import JsonView, PlainView, View


def make_view(as_json: bool = False, *, one_stream: bool = False) -> View:
    """JSON lines, the terminal view when stdout is a terminal, else plain text: the answer on stdout and the rest on
    stderr, or (`one_stream`, for a transcript) all of it on stdout in order."""
    if as_json:
        return JsonView()
    if sys.stdout.isatty() and os.environ.get("TERM") != "dumb":
        from .terminal import TerminalView

        return TerminalView()
    return PlainView(err=sys.stdout) if one_stream else PlainView()
