"""A terminal's keys, one at a time (cbreak mode), for permission prompts and interactive mode."""

from __future__ import annotations

import asyncio
import codecs
import os
import re
import termios
import tty
from collections.abc import Callable

# Escape sequences (arrows, function keys) are read and ignored: this line editor only appends and erases. A lone
# Esc is passed on as a key.
_ESCAPE = re.compile(r"\x1b(\[[0-?]*[ -/]*[@-~]|O.|.)?", re.S)


class KeyReader:
    """A terminal's keys, one call each, with the terminal in cbreak mode: no echo, no line buffering, and
    Ctrl-C still raising SIGINT. `stop()` puts the terminal back as it was."""

    def __init__(self, fd: int, on_key: Callable[[str], object]) -> None:
        self.fd = fd
        self.on_key = on_key
        self._saved = termios.tcgetattr(fd)
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def start(self) -> None:
        tty.setcbreak(self.fd)
        asyncio.get_running_loop().add_reader(self.fd, self._readable)

    def stop(self) -> None:
        try:
            asyncio.get_running_loop().remove_reader(self.fd)
        except RuntimeError:
            pass  # no running loop: called on the way out
        termios.tcsetattr(self.fd, termios.TCSADRAIN, self._saved)

    def _readable(self) -> None:
        try:
            data = os.read(self.fd, 1024)
        except BlockingIOError:
            return
        if not data:
            self.on_key("\x04")  # end of input reads as Ctrl-D
            return
        text = self._decoder.decode(data)
        position = 0
        while position < len(text):
            if text[position] == "\x1b":
                match = _ESCAPE.match(text, position)
                assert match is not None  # the pattern's tail is optional
                if match.group(1) is None:  # nothing follows: the Esc key (a sequence arrives whole in one read)
                    self.on_key("\x1b")
                position = match.end()
                continue
            self.on_key(text[position])
            position += 1
