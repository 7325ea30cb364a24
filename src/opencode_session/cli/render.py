"""How `ocs` shows a session: the view interface (prompts, streamed text, tool calls and their bounded results),
its plain-text and JSON-lines forms, and the adapter that turns session events into view calls. The terminal
form, which needs rich, lives in `terminal.py` and is imported only when a terminal is there to draw on."""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Protocol, TextIO

RESULT_LINES = 6  # lines of a tool's result shown under it
RESULT_LINE_CHARS = 160
SUMMARY_CHARS = 72
# The input fields that say best what a call is about, in order of preference (today's and upcoming tools).
_SUMMARY_KEYS = ("command", "path", "pattern", "url", "query", "name", "description")


def tool_summary(tool_input: dict[str, Any] | None) -> str:
    """A short, one-line description of a tool call's input."""
    if not tool_input:
        return ""
    values = [tool_input[k] for k in _SUMMARY_KEYS if isinstance(tool_input.get(k), str)]
    values += [v for k, v in tool_input.items() if k not in _SUMMARY_KEYS and isinstance(v, str)]
    if not values:
        text = json.dumps(tool_input, ensure_ascii=False)
    else:
        text = values[0]
        if tool_input.get("pattern") == text and isinstance(tool_input.get("path"), str):
            text += f" in {tool_input['path']}"
    text = " ".join(text.split())
    return text if len(text) <= SUMMARY_CHARS else text[: SUMMARY_CHARS - 1] + "…"


def bounded_lines(text: str, max_lines: int = RESULT_LINES) -> list[str]:
    """The first lines of a tool result, each cut to a readable width, and a last line saying what was left out."""
    lines = text.rstrip("\n").splitlines()
    shown = [line if len(line) <= RESULT_LINE_CHARS else line[: RESULT_LINE_CHARS - 1] + "…"
             for line in lines[:max_lines]]
    if len(lines) > max_lines:
        shown.append(f"… {len(lines) - max_lines} more lines")
    return shown


def tail_lines(text: str, max_lines: int = RESULT_LINES) -> list[str]:
    """The last lines of a running tool's output so far, each cut to a readable width."""
    lines = text.rstrip("\n").splitlines()[-max_lines:]
    return [line if len(line) <= RESULT_LINE_CHARS else line[: RESULT_LINE_CHARS - 1] + "…" for line in lines]


def retry_notice(data: dict[str, Any], now_ms: float) -> str:
    """What a scheduled provider retry tells the user: how long until it, which attempt, and why."""
    error = data.get("error") or {}
    wait = max(0.0, (float(data.get("at") or now_ms) - now_ms) / 1000)
    when = f"in {wait:.0f} s" if wait >= 1 else "now"
    return f"retrying {when} (attempt {data.get('attempt')}): {error.get('type')}: {error.get('message')}"


def _file(part: dict[str, Any]) -> str:
    return f"[file {part.get('name') or part.get('uri', '')}]"


def content_text(content: list[dict[str, Any]] | None) -> str:
    """The text parts of a tool result's content, joined; file parts are named."""
    parts = []
    for part in content or []:
        if part.get("type") == "text":
            parts.append(part.get("text", ""))
        elif part.get("type") == "file":
            parts.append(_file(part))
    return "\n".join(parts)


def prompt_text(message: dict[str, Any]) -> str:
    """What the user said: the text, then the files and agents attached, by name."""
    attached = [_file(f) for f in message.get("files") or []]
    attached += [f"[agent {a.get('name', '')}]" for a in message.get("agents") or []]
    return " ".join(piece for piece in (message.get("text", ""), *attached) if piece)


class View(Protocol):
    """What a session looks like to its reader, one call per visible thing."""

    def user(self, text: str) -> None: ...
    def text_delta(self, key: str, delta: str) -> None: ...
    def text_end(self, key: str, text: str) -> None: ...
    def tool_started(self, call_id: str, name: str, tool_input: dict[str, Any]) -> None: ...
    def tool_settled(self, call_id: str, name: str, tool_input: dict[str, Any], ok: bool, result: str) -> None: ...
    def tool_progress(self, call_id: str, output: str) -> None: ...
    def usage(self, tokens: int) -> None: ...
    def working(self, on: bool) -> None: ...
    def notice(self, text: str) -> None: ...
    def info(self, text: str) -> None: ...
    def event(self, event: dict[str, Any]) -> None: ...
    def close(self) -> None: ...


class PlainView:
    """For pipes: the assistant's text on stdout as it arrives, tool calls and notices on stderr, no escape codes."""

    def __init__(self, out: TextIO | None = None, err: TextIO | None = None) -> None:
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self._printed: dict[str, str] = {}
        self._at_line_start = True
        self._blocks = 0  # text blocks begun: the next one starts after a blank line

    def _write(self, text: str) -> None:
        if text:
            self.out.write(text)
            self.out.flush()
            self._at_line_start = text.endswith("\n")

    def _say(self, line: str) -> None:
        self.err.write(line + "\n")
        self.err.flush()

    def user(self, text: str) -> None:
        self._say(f"> {text}")

    def _begin(self, key: str) -> None:
        if key not in self._printed:
            self._printed[key] = ""
            if self._blocks:
                self._write("\n" if self._at_line_start else "\n\n")
            self._blocks += 1

    def text_delta(self, key: str, delta: str) -> None:
        self._begin(key)
        self._printed[key] += delta
        self._write(delta)

    def text_end(self, key: str, text: str) -> None:
        self._begin(key)
        printed = self._printed.pop(key, "")
        # deltas may have been missed (a reader that fell behind): the ended text is the whole truth
        self._write(text[len(printed):] if text.startswith(printed) else ("\n" if printed else "") + text)
        if not self._at_line_start:
            self._write("\n")

    def tool_started(self, call_id: str, name: str, tool_input: dict[str, Any]) -> None:
        pass  # shown once settled: a pipe cannot redraw a spinner

    def tool_settled(self, call_id: str, name: str, tool_input: dict[str, Any], ok: bool, result: str) -> None:
        summary = tool_summary(tool_input)
        self._say(f"{'✓' if ok else '✗'} {name}{' ' + summary if summary else ''}")
        for line in bounded_lines(result):
            self._say(f"  {line}")

    def tool_progress(self, call_id: str, output: str) -> None:
        pass  # a pipe gets the result once, when the call settles

    def usage(self, tokens: int) -> None:
        pass

    def working(self, on: bool) -> None:
        pass

    def notice(self, text: str) -> None:
        self._say(text)

    def info(self, text: str) -> None:
        pass  # context a terminal user likes to see; a pipe's reader did not ask for it

    def event(self, event: dict[str, Any]) -> None:
        pass

    def close(self) -> None:
        if not self._at_line_start:
            self._write("\n")


class JsonView(PlainView):
    """For scripts: each session event as one JSON object per line on stdout; notices still go to stderr."""

    def user(self, text: str) -> None:
        pass

    def text_delta(self, key: str, delta: str) -> None:
        pass

    def text_end(self, key: str, text: str) -> None:
        pass

    def tool_settled(self, call_id: str, name: str, tool_input: dict[str, Any], ok: bool, result: str) -> None:
        pass

    def event(self, event: dict[str, Any]) -> None:
        self.out.write(json.dumps(event, ensure_ascii=False, separators=(",", ":")) + "\n")
        self.out.flush()

    def close(self) -> None:
        pass


@dataclass
class EventAdapter:
    """Feeds a View from session event envelopes (wire dicts, durable or live-only) of one session."""

    view: View
    _calls: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)

    def __call__(self, event: dict[str, Any]) -> None:
        self.view.event(event)
        kind, data = event.get("type", ""), event.get("data") or {}
        key = f"{data.get('assistantMessageID')}/{data.get('ordinal')}"
        if kind == "session.text.delta":
            self.view.text_delta(key, data.get("delta", ""))
        elif kind == "session.text.ended":
            self.view.text_end(key, data.get("text", ""))
        elif kind == "session.tool.called":
            call = self._calls[data["callID"]] = (data.get("name", "tool"), data.get("input") or {})
            self.view.tool_started(data["callID"], *call)
        elif kind in ("session.tool.success", "session.tool.failed"):
            name, tool_input = self._calls.pop(data.get("callID", ""), ("tool", {}))
            ok = kind == "session.tool.success"
            result = content_text(data.get("content")) if ok else (data.get("error") or {}).get("message", "")
            self.view.tool_settled(data.get("callID", ""), name, tool_input, ok, result)
        elif kind == "session.tool.progress":
            self.view.tool_progress(data.get("callID", ""), content_text(data.get("content")))
        elif kind in ("session.step.ended", "session.step.failed"):
            tokens = data.get("tokens") or {}
            self.view.usage(sum(int(tokens.get(k) or 0) for k in ("input", "output", "reasoning")))
        elif kind == "session.retry.scheduled":
            self.view.notice(retry_notice(data, time.time() * 1000))


def show_transcript(view: View, messages: list[dict[str, Any]]) -> None:
    """A session's projected messages, oldest first, in the same view a live turn uses."""
    for message in messages:
        kind = message.get("type")
        if kind == "user":
            view.user(prompt_text(message))
        elif kind == "shell":  # a command the user ran in the session (`session.shell`), with its output
            view.user(f"!{message.get('command', '')}")
            for line in bounded_lines(message.get("output") or ""):
                view.notice(f"  {line}")
        elif kind == "synthetic":
            view.notice(f"[context] {message.get('description') or message.get('text', '')[:SUMMARY_CHARS]}")
        elif kind == "compaction":
            status = message.get("status") or "completed"  # stored before compactions had a status
            outcome = {"completed": "compacted", "failed": "compaction failed"}.get(status, "compacting")
            view.notice(f"[context {outcome} ({message.get('reason')})]")
        elif kind in ("agent-switched", "model-switched"):
            model = message.get("model") or {}
            view.notice(f"[agent {message['agent']}]" if kind == "agent-switched"
                        else f"[model {model.get('providerID')}/{model.get('id')}]")
        elif kind == "assistant":
            for part in message.get("content", []):
                if part.get("type") == "text":
                    view.text_end(f"{message['id']}/{part.get('id')}", part.get("text", ""))
                elif part.get("type") == "tool":
                    state = part.get("state") or {}
                    ok = state.get("status") == "completed"
                    result = content_text(state.get("content")) if ok else (state.get("error") or {}).get(
                        "message", state.get("status", ""))
                    given = state.get("input")
                    tool_input: dict[str, Any] = given if isinstance(given, dict) else {}
                    view.tool_settled(part.get("id", ""), part.get("name", "tool"), tool_input, ok, result)
            if message.get("error"):
                error = message["error"]
                view.notice(f"✗ {error.get('type')}: {error.get('message')}")
        # system messages (Instruction Updates) are for the model; a transcript leaves them out
