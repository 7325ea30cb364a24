"""What a terminal shows after a program's output: the output fed to a VT100 emulator (pyte), tall enough that
nothing scrolls away, read back as lines."""

from __future__ import annotations

import pyte


def screen_lines(output: str, columns: int = 100, lines: int = 1000) -> list[str]:
    """The non-empty lines left on screen, right-trimmed (what a person sees once the program is done)."""
    screen = pyte.Screen(columns, lines)
    pyte.Stream(screen).feed(output)
    return [line.rstrip() for line in screen.display if line.strip()]
