"""The terminal view (rich): finished paragraphs printed as markdown, and a live area below them with the
paragraph being written, a spinner per running tool with the last lines of its output so far, the running turn's
time and tokens and, in interactive mode, the line being typed."""

from __future__ import annotations

import time
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.markdown import Markdown
from rich.spinner import Spinner
from rich.text import Text

from .render import bounded_lines, tail_lines, tool_summary


def split_finished(text: str) -> tuple[str, str]:
    """(finished paragraphs, the paragraph still being written): split at the last blank line outside a code fence."""
    cut = 0
    fenced = False
    offset = 0
    for line in text.splitlines(keepends=True):
        offset += len(line)
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced and not line.strip() and line.endswith("\n"):
            cut = offset
    return text[:cut], text[cut:]


class TerminalView:
    """Draws on a terminal through rich; `prompt` (interactive mode) is the line being typed, shown last. While a
    turn runs (`busy`) a status line turns below the rest: how long it has run and the tokens its Steps used."""

    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console(highlight=False)
        self._open: dict[str, str] = {}  # text block key -> text not yet printed
        self._printed: dict[str, str] = {}  # text block key -> everything received so far
        # one spinner per running tool and one for the turn, kept: a spinner's frame is the time since its first draw
        self._tools: dict[str, Spinner] = {}
        self._progress: dict[str, list[str]] = {}  # call ID -> the last lines of its output so far
        self._status = Spinner("dots", style="cyan")
        self._busy = False
        self._since = time.monotonic()
        self._tokens = 0
        self.prompt: Text | None = None
        self.ask: Text | None = None  # a permission request waiting for a key, shown above the prompt
        self._live = Live(_Area(self), console=self.console, refresh_per_second=12, transient=True,
                          redirect_stdout=False, redirect_stderr=False)
        self._live.start()

    @property
    def busy(self) -> bool:
        return self._busy

    @busy.setter
    def busy(self, on: bool) -> None:
        if on and not self._busy:  # a new turn: its clock and tokens start over
            self._since, self._tokens = time.monotonic(), 0
            self._status = Spinner("dots", style="cyan")
        self._busy = on

    # --- the live area ---------------------------------------------------------------------------------------

    def area(self) -> RenderableType:
        rows: list[RenderableType] = []
        for pending in self._open.values():
            if pending.strip():
                rows.append(Markdown(pending))
        for call_id, spinner in self._tools.items():
            rows.append(spinner)
            lines = self._progress.get(call_id)
            if lines:
                rows.append(Text("\n".join("  " + line for line in lines), style="dim"))
        if self._busy:
            self._status.update(text=Text(self.status_line(), style="dim"))
            rows.append(self._status)
        if self.ask is not None:
            rows.append(self.ask)
        if self.prompt is not None:
            rows.append(self.prompt)
        return Group(*rows)

    def status_line(self) -> str:
        """"working · 12s · 1,234 tokens": the running turn's time and the tokens its finished Steps used."""
        seconds = int(time.monotonic() - self._since)
        elapsed = f"{seconds // 60}m {seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"
        tokens = f" · {self._tokens:,} tokens" if self._tokens else ""
        return f"working · {elapsed}{tokens}"

    def show_ask(self, line: Text | None) -> None:
        self.ask = line
        self.refresh()

    def refresh(self) -> None:
        self._live.refresh()

    def _print(self, renderable: RenderableType) -> None:
        self._live.console.print(renderable)

    # --- View --------------------------------------------------------------------------------------------------

    def user(self, text: str) -> None:
        self._print(Text.assemble(("› ", "bold magenta"), (text, "bold")))

    def text_delta(self, key: str, delta: str) -> None:
        self._printed[key] = self._printed.get(key, "") + delta
        finished, rest = split_finished(self._open.get(key, "") + delta)
        if finished.strip():
            self._print(Markdown(finished))
            self._print(Text(""))
        self._open[key] = rest
        self.refresh()

    def text_end(self, key: str, text: str) -> None:
        received = self._printed.pop(key, "")
        pending = self._open.pop(key, "")
        if not text.startswith(received):  # deltas were missed: what was shown is incomplete, show it whole
            pending = text
        else:
            pending += text[len(received):]
        if pending.strip():
            self._print(Markdown(pending))
        self.refresh()

    def tool_started(self, call_id: str, name: str, tool_input: dict[str, Any]) -> None:
        self._tools[call_id] = Spinner("dots", _tool_line(name, tool_input), style="cyan")
        self.refresh()

    def tool_progress(self, call_id: str, output: str) -> None:
        if call_id in self._tools:
            self._progress[call_id] = tail_lines(output)
            self.refresh()

    def usage(self, tokens: int) -> None:
        self._tokens += tokens
        self.refresh()

    def working(self, on: bool) -> None:
        self.busy = on
        self.refresh()

    def say(self, text: str) -> None:
        """A line from outside the session's events (Ctrl-C's "interrupting…"): printed above the live area, so
        what the area shows is not left behind on the screen and drawn again."""
        self.notice(text)

    def tool_settled(self, call_id: str, name: str, tool_input: dict[str, Any], ok: bool, result: str) -> None:
        self._tools.pop(call_id, None)
        self._progress.pop(call_id, None)
        mark = Text("✓ ", style="green") if ok else Text("✗ ", style="red")
        self._print(mark + _tool_line(name, tool_input))
        lines = bounded_lines(result)
        if lines:
            self._print(Text("\n".join("  " + line for line in lines), style="dim" if ok else "red"))
        self.refresh()

    def notice(self, text: str) -> None:
        self._print(Text(text, style="yellow"))

    def info(self, text: str) -> None:
        self._print(Text(text, style="dim"))

    def event(self, event: dict[str, Any]) -> None:
        pass

    def close(self) -> None:
        for key in list(self._open):
            self.text_end(key, self._printed.get(key, ""))
        self._tools.clear()
        self._progress.clear()
        self.busy = False
        self.prompt = None
        self.ask = None
        self._live.stop()


def _tool_line(name: str, tool_input: dict[str, Any]) -> Text:
    summary = tool_summary(tool_input)
    return Text.assemble((name, "bold"), (" " + summary if summary else "", "dim"))


class _Area:
    def __init__(self, view: TerminalView) -> None:
        self.view = view

    def __rich__(self) -> RenderableType:
        return self.view.area()
