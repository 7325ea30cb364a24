"""Compaction runs: when a Step's request would not fit, which older history a rolling summary replaces and which
recent tail is kept, the summary calls (chunked so each fits, validated against the template, retried like Steps),
and the durable events that make the cutover."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ...schema import events as ev
from ...schema import message_data as md
from ...schema import session_errors
from ...schema.common import SessionErrorInfo, TokenCache, Tokens
from ...schema.ids import message_id
from ..cancellation import shielded
from ..llm import model as llm
from ..llm.catalog import step_cost
from ..llm.errors import ProviderError
from ..llm.retry import BASE_DELAY_MS, Clock, may_retry, retry_delay_ms
from ..session.history import HistoryEntry
from ..store import Store, Tx, confirm_lease
from ..telemetry import hooks
from . import render
from .tokens import TokenEstimator, text_tokens

DEFAULT_BUFFER = 20_000
DEFAULT_KEEP_TOKENS = 15_000
OUTPUT_TOKEN_MAX = 32_000
SUMMARY_MARGIN = 256  # tokens of framing around the transcript in a summary request

NOTHING_TO_COMPACT = "Nothing to compact yet"
OFF_TEMPLATE = "The compaction summary did not match the required template"
NO_SUMMARY = "Compaction produced no summary"
SUMMARY_TOO_LONG = "Compaction summary reached the output token limit"
SUMMARY_BLOCKED = "Compaction summary was blocked by the provider"
INTERRUPTED = "Compaction was interrupted"
EARLIER_CUT = "[the start of the recent context was cut]\n"
# where the input an automatic compaction is made for stood in the recent context: it follows the checkpoint verbatim
REPLAYED_INPUT = "[User]: (this request follows the checkpoint, word for word)"


@dataclass(frozen=True)
class CompactionSettings:
    """The `compaction` config: `auto` (default on), `buffer` (alias `reserved`: tokens of headroom kept free
    below the window) and `tokens` (the recent tail kept verbatim)."""

    auto: bool = True
    buffer: int = DEFAULT_BUFFER
    keep_tokens: int = DEFAULT_KEEP_TOKENS

    @classmethod
    def of(cls, raw: Any) -> CompactionSettings:
        if not isinstance(raw, dict):
            return cls()

        def _count(value: Any, default: int) -> int:
            ok = isinstance(value, int) and not isinstance(value, bool) and value >= 0
            return value if ok else default

        return cls(auto=raw.get("auto") is not False,
                   buffer=_count(raw.get("buffer", raw.get("reserved")), DEFAULT_BUFFER),
                   keep_tokens=_count(raw.get("tokens"), DEFAULT_KEEP_TOKENS))


def ceiling(model: llm.ResolvedModel, settings: CompactionSettings) -> int | None:
    """The most input tokens a request to `model` may carry, or None when its limits are unknown."""
    if not model.context_limit or model.context_limit <= 0:
        return None
    output = min(model.output_limit or OUTPUT_TOKEN_MAX, OUTPUT_TOKEN_MAX)
    limit = model.context_limit - max(output, settings.buffer)
    if model.input_limit:
        limit = min(limit, model.input_limit - settings.buffer)
    return limit


class CompactionFailure(Exception):
    def __init__(self, error: SessionErrorInfo) -> None:
        super().__init__(error.message)
        self.error = error


def _failure(kind: str, message: str) -> CompactionFailure:
    return CompactionFailure(SessionErrorInfo(type=kind, message=message))


def _serialized(entry: HistoryEntry) -> str:
    cached = entry.derived.get("serialized")
    if cached is None:
        cached = entry.derived["serialized"] = render.serialize(entry.message)
    return str(cached)


def _is_checkpoint(message: md.SessionMessageData) -> bool:
    return message["type"] == "compaction" and message.get("status", "completed") == "completed"


def _fresh_checkpoint(entries: list[HistoryEntry]) -> bool:
    """History starts from a checkpoint with nothing after it but the input it was made for."""
    return bool(entries) and _is_checkpoint(entries[0].message) and all(e.replayed for e in entries[1:])


def trigger_of(entries: list[HistoryEntry]) -> HistoryEntry | None:
    """The input an automatic compaction of `entries` is made for: the newest user message, which the history sends
    again after the checkpoint (`HistoryCache.load`), so the rebuilt Step answers it as its latest user message."""
    return next((e for e in reversed(entries) if e.message["type"] == "user"), None)


@dataclass
class Split:
    """Active history cut in two: `head` is summarised (with the earlier checkpoint, if any), `tail` is kept."""

    previous: md.SessionMessageCompactionData | None
    head: list[HistoryEntry]
    tail: list[HistoryEntry]
    keep_tokens: int
    trigger: HistoryEntry | None = None  # the input sent again after the checkpoint: only its place stays in `recent`

    @property
    def recent(self) -> str:
        """The tail as transcript text, at most twice `keep_tokens`: a newest message too long for that (a huge
        answer) keeps its end, which is what the next Step continues from."""
        text = "\n\n".join(text for text in (REPLAYED_INPUT if e is self.trigger else _serialized(e)
                                               for e in self.tail) if text)
        size = text_tokens(text)
        if size <= 2 * self.keep_tokens:
            return text
        keep = int(len(text) * 2 * self.keep_tokens / size * 0.9)
        return EARLIER_CUT + text[len(text) - keep:]


def split(entries: list[HistoryEntry], keep_tokens: int, trigger: HistoryEntry | None = None) -> Split | None:
    """Keep the newest messages up to `keep_tokens` (always the newest one), starting at a user message when that
    keeps the tail within twice the budget (a cut between assistant messages never separates a tool call from its
    result: both live in one message). None when nothing older than the tail is left to summarise. `trigger` is the
    input an automatic compaction is made for (`trigger_of`)."""
    previous = None
    body = entries
    if body and body[0].message["type"] == "compaction" and _is_checkpoint(body[0].message):
        previous = body[0].message
        body = body[1:]
    if not body:
        return None
    sizes = [text_tokens(_serialized(e)) for e in body]
    start, total = 0, 0
    for i in range(len(body) - 1, -1, -1):
        total += sizes[i]
        if total > keep_tokens and i < len(body) - 1:
            start = i + 1
            break
    users = [i for i, e in enumerate(body) if e.message["type"] == "user"]
    if start == 0:
        start = users[-1] if users and users[-1] > 0 else 0  # everything fits: keep only the latest exchange
    else:
        boundary = next((i for i in reversed(users) if 0 < i <= start), None)
        if boundary is not None and sum(sizes[boundary:]) <= 2 * keep_tokens:
            start = boundary
    head, tail = body[:start], body[start:]
    if not any(map(_serialized, head)) and not (previous and previous["recent"]):
        return None
    return Split(previous, head, tail, keep_tokens, trigger)


def _chunks(pieces: list[str], budget: int) -> list[str]:
    """Consecutive pieces joined into texts of at most `budget` tokens each; a piece alone over it is clipped."""
    out: list[str] = []
    current: list[str] = []
    used = 0
    for piece in pieces:
        size = text_tokens(piece)
        while size > budget:
            piece = piece[: max(1, int(len(piece) * budget / size * 0.9))] + render.TRUNCATED
            size = text_tokens(piece)
        if current and used + size > budget:
            out.append("\n\n".join(current))
            current, used = [], 0
        current.append(piece)
        used += size
    if current:
        out.append("\n\n".join(current))
    return out


@dataclass(frozen=True)
class _Target:
    """Where a compaction's summary calls go and whose events they publish."""

    session_id: str
    compaction_id: str
    model: llm.ResolvedModel
    provider: llm.Provider
    secrets: tuple[str, ...]


@dataclass
class _Call:
    """What one summary call produced."""

    text: str
    finish: str | None


@dataclass
class Compactor:
    """Estimates each Step's request and compacts a Session's history when it would not fit."""

    store: Store
    clock: Clock = field(default_factory=Clock)
    retry_base_delay_ms: float = BASE_DELAY_MS
    estimator: TokenEstimator = field(default_factory=TokenEstimator)

    # --- the budget -------------------------------------------------------------------------------------

    def over_budget(self, session_id: str, assistant_id: str, settings: CompactionSettings,
                    model: llm.ResolvedModel, entries: list[HistoryEntry], request: llm.LLMRequest,
                    extra: list[llm.LLMMessage]) -> Split | None:
        """The split to compact with before sending `request` (whose messages are `entries` lowered plus
        `extra`), or None to send it: the model's limits are unknown, automatic compaction is off, the estimate
        fits, history already starts from a fresh checkpoint, or nothing older is left to summarise."""
        limit = ceiling(model, settings)
        if limit is None or not settings.auto:
            return None
        self.estimator.observe(session_id, model, entries)
        raw = self.estimator.raw_request_tokens(session_id, request.system, entries, extra, request.tools)
        self.estimator.sent(session_id, assistant_id, raw)
        if self.estimator.calibrated(model, raw) < limit or _fresh_checkpoint(entries):
            return None
        return split(entries, settings.keep_tokens, trigger_of(entries))

    # --- a compaction -----------------------------------------------------------------------------------

    async def compact(self, session_id: str, reason: ev.CompactionReason, settings: CompactionSettings,
                      model: llm.ResolvedModel, provider: llm.Provider, entries: list[HistoryEntry],
                      chosen: Split | None = None, input_id: str | None = None,
                      secrets: tuple[str, ...] = ()) -> SessionErrorInfo | None:
        """Summarise older history durably; returns None once active history starts at the new checkpoint, else
        the typed error of the failed compaction (history is then unchanged)."""
        with hooks.compaction(session_id, reason):
            return await self._compact(session_id, reason, settings, model, provider, entries, chosen, input_id,
                                       secrets)

    async def _compact(self, session_id: str, reason: ev.CompactionReason, settings: CompactionSettings,
                       model: llm.ResolvedModel, provider: llm.Provider, entries: list[HistoryEntry],
                       chosen: Split | None, input_id: str | None, secrets: tuple[str, ...]) -> SessionErrorInfo | None:
        cut = chosen or split(entries, settings.keep_tokens, trigger_of(entries) if reason == "auto" else None)
        if cut is None:
            error = SessionErrorInfo(type=session_errors.COMPACTION_UNAVAILABLE, message=NOTHING_TO_COMPACT)
            await self.store.append(ev.CompactionFailed(sessionID=session_id, reason=reason, error=error,
                                                        inputID=input_id))
            return error
        recent = cut.recent
        compaction_id = input_id or message_id()
        await self.store.append(ev.CompactionStarted(sessionID=session_id, messageID=compaction_id, reason=reason,
                                                     recent=recent, inputID=input_id))
        usage: list[llm.Usage] = []
        try:
            summary = await self._summarise(_Target(session_id, compaction_id, model, provider, secrets), cut,
                                            settings, usage)
        except CompactionFailure as failed:
            await self._settle(session_id, model, usage, ev.CompactionFailed(
                sessionID=session_id, messageID=compaction_id, reason=reason, error=failed.error, inputID=input_id))
            return failed.error
        except BaseException:
            error = SessionErrorInfo(type=session_errors.COMPACTION_INTERRUPTED, message=INTERRUPTED)
            await shielded(self._settle(session_id, model, usage, ev.CompactionFailed(
                sessionID=session_id, messageID=compaction_id, reason=reason, error=error, inputID=input_id)))
            raise
        await self._settle(session_id, model, usage, ev.CompactionEnded(
            sessionID=session_id, messageID=compaction_id, reason=reason, text=summary, recent=recent,
            inputID=input_id))
        return None

    async def _settle(self, session_id: str, model: llm.ResolvedModel, usage: list[llm.Usage],
                      terminal: ev.CompactionEnded | ev.CompactionFailed) -> None:
        total = llm.Usage(*(sum(getattr(u, name) for u in usage)
                            for name in ("input", "output", "reasoning", "cache_read", "cache_write")))

        def _write(tx: Tx) -> None:
            if usage:
                tokens = Tokens(input=total.input, output=total.output, reasoning=total.reasoning,
                                cache=TokenCache(read=total.cache_read, write=total.cache_write))
                tx.append(ev.UsageRecorded(sessionID=session_id, source="compaction",
                                           cost=step_cost(total, model.cost), tokens=tokens))
            tx.append(terminal)

        await self.store.write(_write)

    async def _summarise(self, target: _Target, cut: Split, settings: CompactionSettings,
                         usage: list[llm.Usage]) -> str:
        """The rolling summary: each chunk of older history updates the summary so far, so every request fits."""
        summary = cut.previous["summary"] if cut.previous else None
        pieces = [cut.previous["recent"]] if cut.previous and cut.previous["recent"] else []
        pieces += [text for text in map(_serialized, cut.head) if text]
        limit = ceiling(target.model, settings)
        chunks = ["\n\n".join(pieces)]
        if limit is not None:
            # the summary so far rides along in every chunk's request: reserve room for one of a tail's size
            fixed = text_tokens(render.SUMMARY_SYSTEM) + text_tokens(render.summary_prompt(True)) + SUMMARY_MARGIN
            budget = max(limit - fixed - max(text_tokens(summary or ""), settings.keep_tokens // 2), 256)
            chunks = _chunks(pieces, budget) or [""]
        for index, chunk in enumerate(chunks):
            summary = await self._summary_call(target, summary, chunk, index == len(chunks) - 1, usage)
        assert summary is not None
        return summary

    async def _summary_call(self, target: _Target, summary: str | None, transcript: str, live: bool,
                            usage: list[llm.Usage]) -> str:
        earlier = render.checkpoint_text(summary, "") + "\n\n" if summary else ""
        conversation = f"{earlier}<conversation>\n{transcript}\n</conversation>"
        messages: list[llm.LLMMessage] = [llm.UserMessage([llm.TextPart(conversation),
                                                           llm.TextPart(render.summary_prompt(summary is not None))])]
        call = await self._call(target, messages, live, usage)
        if not render.follows_template(call.text) and call.text.strip() and call.finish == "stop":
            messages += [llm.AssistantMessage([llm.TextPart(call.text)]),
                         llm.UserMessage([llm.TextPart(render.REMINDER)])]
            call = await self._call(target, messages, live, usage)
            if not render.follows_template(call.text) and call.text.strip() and call.finish == "stop":
                raise _failure(session_errors.COMPACTION_FAILED, OFF_TEMPLATE)
        if call.finish == "content-filter":
            raise _failure(session_errors.PROVIDER_CONTENT_FILTER, SUMMARY_BLOCKED)
        if call.finish == "length":
            raise _failure(session_errors.COMPACTION_FAILED, SUMMARY_TOO_LONG)
        if not call.text.strip():
            raise _failure(session_errors.COMPACTION_FAILED, NO_SUMMARY)
        if not render.follows_template(call.text):
            raise _failure(session_errors.COMPACTION_FAILED, OFF_TEMPLATE)
        return call.text.strip()

    async def _call(self, target: _Target, messages: list[llm.LLMMessage], live: bool,
                    usage: list[llm.Usage]) -> _Call:
        """One summary request, retried like a Step's (typed retryable failures before any output)."""
        request = llm.LLMRequest(model=target.model, system=[render.SUMMARY_SYSTEM], messages=messages, tools=[],
                                 tool_choice="none", prompt_cache_key=target.session_id,
                                 controls=llm.GenerationControls(max_output_tokens=target.model.output_limit),
                                 options=target.model.options)
        retries = 0
        while True:
            parts: list[str] = []
            finish: str | None = None
            await confirm_lease()  # nothing leaves for a session whose lease may have lapsed
            try:
                stream = target.provider.stream(request)
                try:
                    async for event in stream:
                        if isinstance(event, llm.TextDelta):
                            parts.append(event.delta)
                            if live:
                                self.store.publish_live(ev.CompactionDelta(
                                    sessionID=target.session_id, messageID=target.compaction_id, text=event.delta),
                                    target.session_id)
                        elif isinstance(event, llm.Finish):
                            finish = event.reason
                            usage.append(event.usage)
                finally:
                    aclose: Callable[[], Any] | None = getattr(stream, "aclose", None)
                    if aclose is not None:
                        await shielded(aclose())
            except ProviderError as error:
                if parts or not may_retry(error, retries_so_far=retries, allowance_left=True):
                    raise CompactionFailure(error.redacted(target.secrets).to_session_error()) from None
                retries += 1
                await self.clock.sleep_ms(retry_delay_ms(retries, error, self.retry_base_delay_ms))
                continue
            return _Call("".join(parts), finish)
