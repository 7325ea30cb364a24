"""Token estimates without a tokenizer: a character-class heuristic, cached per history-entry revision so a Step
re-estimates only what changed, and calibrated per model by the input usage providers report."""

from __future__ import annotations

import json
import operator
import re
from collections import OrderedDict
from dataclasses import dataclass, field
from itertools import compress, count
from typing import Any

from ...schema import message_data as md
from ..llm import model as llm
from ..session.history import HistoryEntry
from ..tools.output import settled_text

IMAGE_TOKEN_ESTIMATE = 1_500
PDF_TOKEN_ESTIMATE = 2_000
MESSAGE_OVERHEAD = 4  # role and framing tokens every message costs
_PUNCT = re.compile(r"[^\w\s]", re.ASCII)
_SPACE = re.compile(r"\s")
_CALIBRATION_BOUNDS = (0.5, 4.0)


def text_tokens(text: str) -> int:
    """Tokens of `text` by character class: words cost about a quarter token a character, punctuation more,
    whitespace less, and non-ASCII characters (often a token each) the most. Errs high for English and code."""
    if not text:
        return 0
    n = len(text)
    non_ascii = 0 if text.isascii() else n - len(text.encode("ascii", "ignore"))
    punct = len(_PUNCT.findall(text))
    space = len(_SPACE.findall(text))
    word = max(0, n - non_ascii - punct - space)
    return int(word * 0.3 + punct * 0.6 + space * 0.2 + non_ascii * 1.0) + 1


def _file_tokens(mime: str) -> int:
    return PDF_TOKEN_ESTIMATE if mime == "application/pdf" else IMAGE_TOKEN_ESTIMATE


def _tool_result_text(state: Any) -> str:
    if state["status"] == "error":
        return str(state["error"]["message"])
    return settled_text(state)  # a structured-only result costs its JSON


def message_tokens(message: md.SessionMessageData) -> int:
    """What one projected message costs in a request (agent and model switches cost nothing)."""
    if message["type"] == "user":
        files = message.get("files") or ()
        return MESSAGE_OVERHEAD + text_tokens(message.get("text") or "") + sum(_file_tokens(f["mime"]) for f in files)
    if message["type"] == "synthetic" or message["type"] == "system":
        return MESSAGE_OVERHEAD + text_tokens(message["text"])
    if message["type"] == "shell":
        return MESSAGE_OVERHEAD + text_tokens(f"{message['command']}\n{message['output']}")
    if message["type"] == "compaction":
        return MESSAGE_OVERHEAD + text_tokens(message["summary"]) + text_tokens(message["recent"]) + 40
    if message["type"] == "assistant":
        total = MESSAGE_OVERHEAD
        for part in message["content"]:
            if part["type"] == "text" or part["type"] == "reasoning":
                total += text_tokens(part["text"])
            elif part["type"] == "tool":
                state = part["state"]
                total += MESSAGE_OVERHEAD + text_tokens(part["name"])
                total += text_tokens(json.dumps(state.get("input") or {}, ensure_ascii=False))
                if state["status"] == "completed" or state["status"] == "error":
                    total += MESSAGE_OVERHEAD + text_tokens(_tool_result_text(state))
        return total
    return 0


def entry_tokens(entry: HistoryEntry) -> int:
    """`message_tokens` of a cached history entry, computed once per revision."""
    cached = entry.derived.get("tokens")
    if cached is None:
        cached = entry.derived["tokens"] = message_tokens(entry.message)
    return int(cached)


def llm_message_tokens(message: llm.LLMMessage) -> int:
    """What an extra request message (not from history) costs."""
    if isinstance(message, (llm.SystemUpdate, llm.ToolResultMessage)):
        return MESSAGE_OVERHEAD + text_tokens(message.text)
    total = MESSAGE_OVERHEAD
    for part in message.parts:
        if isinstance(part, (llm.TextPart, llm.ReasoningPart)):
            total += text_tokens(part.text)
        elif isinstance(part, llm.FilePart):
            total += _file_tokens(part.mime)
        else:
            total += text_tokens(part.name) + text_tokens(json.dumps(part.input, ensure_ascii=False))
    return total


def tool_tokens(spec: llm.ToolSpec) -> int:
    return MESSAGE_OVERHEAD + text_tokens(spec.name) + text_tokens(spec.description) + \
        text_tokens(json.dumps(spec.parameters, sort_keys=True))


@dataclass
class _Running:
    """A session's last summed history: the entries seen and their running total."""

    entries: list[HistoryEntry] = field(default_factory=list)
    total: int = 0


@dataclass
class _Sent:
    assistant_id: str
    estimate: int  # uncalibrated


class TokenEstimator:
    """Estimates whole requests. The history sum is kept per session and updated only where entries changed
    (the history cache shares unchanged entries); texts such as the system prompt are memoized. After a Step, the
    input usage its provider reported against what was estimated for it calibrates later estimates for that model."""

    def __init__(self, max_sessions: int = 64, max_texts: int = 256) -> None:
        self.max_sessions = max_sessions
        self.max_texts = max_texts
        self._running: OrderedDict[str, _Running] = OrderedDict()
        self._texts: OrderedDict[str, int] = OrderedDict()
        self._tools: dict[tuple[str, str], int] = {}
        self._sent: dict[str, _Sent] = {}
        self.calibration: dict[tuple[str, str], float] = {}

    def _text(self, text: str) -> int:
        cached = self._texts.get(text)
        if cached is None:
            cached = self._texts[text] = text_tokens(text)
            while len(self._texts) > self.max_texts:
                self._texts.popitem(last=False)
        return cached

    def history_tokens(self, session_id: str, entries: list[HistoryEntry]) -> int:
        """The sum of `entry_tokens` over `entries`, touching only entries that differ from the last call."""
        running = self._running.pop(session_id, None) or _Running()
        seen = running.entries
        if len(entries) < len(seen):
            running = _Running()
            seen = running.entries
        # unchanged entries are the same objects: one C-level identity scan finds the few that changed
        for i in compress(count(), map(operator.is_not, entries, seen)):
            running.total += entry_tokens(entries[i]) - entry_tokens(seen[i])
            seen[i] = entries[i]
        for entry in entries[len(seen):]:
            running.total += entry_tokens(entry)
            seen.append(entry)
        self._running[session_id] = running
        while len(self._running) > self.max_sessions:
            self._running.popitem(last=False)
        return running.total

    def raw_request_tokens(self, session_id: str, system: list[str], entries: list[HistoryEntry],
                           extra: list[llm.LLMMessage], tools: list[llm.ToolSpec]) -> int:
        """The heuristic estimate of a Step's request, before calibration."""
        total = sum(self._text(s) + MESSAGE_OVERHEAD for s in system)
        for spec in tools:
            key = (spec.name, spec.description)
            if key not in self._tools:
                self._tools[key] = tool_tokens(spec)
            total += self._tools[key]
        return total + self.history_tokens(session_id, entries) + sum(map(llm_message_tokens, extra))

    def calibrated(self, model: llm.ResolvedModel, raw: int) -> int:
        return int(raw * self.calibration.get((model.provider_id, model.model_id), 1.0))

    def sent(self, session_id: str, assistant_id: str, raw: int) -> None:
        """Remember the estimate of the request a Step is about to send, to calibrate once its usage is known."""
        self._sent[session_id] = _Sent(assistant_id, raw)

    def observe(self, session_id: str, model: llm.ResolvedModel, entries: list[HistoryEntry]) -> None:
        """Calibrate from the latest Step of this session whose request was estimated here and reported usage."""
        sent = self._sent.get(session_id)
        if sent is None:
            return
        for entry in reversed(entries):
            message = entry.message
            if message["type"] != "assistant":
                continue
            if message["id"] != sent.assistant_id:
                return
            tokens = message.get("tokens")
            reported = 0 if tokens is None else tokens["input"] + tokens["cache"]["read"] + tokens["cache"]["write"]
            if reported > 0 and sent.estimate > 0:
                low, high = _CALIBRATION_BOUNDS
                ratio = min(high, max(low, reported / sent.estimate))
                self.calibration[(model.provider_id, model.model_id)] = ratio
                del self._sent[session_id]
            return
