"""The trace of a turn, read from the durable log: the execution an answer belongs to, its Steps with where their time
went (waiting for the first token, streaming, each tool call and its waits for the user's permission, retry back-off)
as a waterfall, their tokens and cost, and each tool call's input, output and error. A value for trace.html, and its
route."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from ...core.permission import PermissionWait, recorded_waits
from ...core.runtime import Runtime
from ...schema import events as ev
from ...schema.errors import TaggedError
from ...schema.events import EventRecord
from ...schema.session import SessionV2Info
from .pages import html, render
from .parts import step_page

EXECUTION_ENDED = (ev.ExecutionSucceeded, ev.ExecutionFailed, ev.ExecutionInterrupted)
_OUTPUT = (ev.TextStarted, ev.TextEnded, ev.ReasoningStarted, ev.ReasoningEnded, ev.ToolInputStarted,
           ev.ToolInputEnded, ev.ToolCalled)  # the model's output as the log marks it


@dataclass
class Span:
    """A stretch of time on the waterfall: `kind` is waiting, streaming, back-off, tool or permission (a call waiting
    for the user's answer)."""

    kind: str
    start: int
    end: int


@dataclass
class Call:
    """One tool call of a Step: when it ran and how it settled (its part, for the input and output shown)."""

    call_id: str
    name: str
    started: int
    ended: int | None = None
    status: str = "running"
    part: dict[str, Any] = field(default_factory=dict)
    waits: list[PermissionWait] = field(default_factory=list)  # recorded with its settlement

    @property
    def segments(self) -> list[Span]:
        """Its bar in pieces: running (`tool`) and waiting for the user (`permission`), in time order."""
        end = self.ended if self.ended is not None else max([self.started, *(w.replied for w in self.waits)])
        found, at = [], self.started
        for wait in sorted(self.waits, key=lambda w: w.asked):
            start, stop = max(at, wait.asked), min(end, max(wait.replied, wait.asked))
            if stop <= start:
                continue
            if start > at:
                found.append(Span("tool", at, start))
            found.append(Span("permission", start, stop))
            at = stop
        if end > at or not found:
            found.append(Span("tool", at, end))
        return found


@dataclass
class TraceStep:
    message_id: str
    agent: str
    model: str
    started: int
    ended: int | None = None
    finish: str | None = None
    tokens: dict[str, Any] | None = None
    cost: float | None = None
    error: dict[str, Any] | None = None
    spans: list[Span] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)
    retries: list[dict[str, Any]] = field(default_factory=list)
    _attempt: int = 0  # when the current attempt began (the Step's start, or the end of a back-off)
    _first: int | None = None  # the attempt's first output
    _last: int | None = None  # its latest output

    def close_attempt(self, at: int) -> None:
        """The attempt that began at `_attempt` ends at `at`: its wait for a first token, then its streaming."""
        first = self._first if self._first is not None else at
        if first > self._attempt:
            self.spans.append(Span("waiting", self._attempt, first))
        last = self._last if self._last is not None else first
        if self._first is not None and last > first:
            self.spans.append(Span("streaming", first, last))
        self._first = self._last = None

    @property
    def duration_ms(self) -> int | None:
        return None if self.ended is None else self.ended - self.started

    def total(self, kind: str) -> int:
        return sum(s.end - s.start for s in self.spans if s.kind == kind)


@dataclass
class Trace:
    """The execution a Step belongs to: its prompts, Steps, bounds and totals."""

    started: int
    ended: int | None
    steps: list[TraceStep]
    prompts: list[dict[str, Any]]
    outcome: str
    error: dict[str, Any] | None = None

    @property
    def span_ms(self) -> int:
        last = max([self.ended or 0, *(s.ended or s.started for s in self.steps),
                    *(c.ended or c.started for s in self.steps for c in s.calls)])
        return max(1, last - self.started)

    def at(self, when: int) -> float:
        """`when` as a percentage of the waterfall's width."""
        return round(100 * (when - self.started) / self.span_ms, 2)

    def width(self, start: int, end: int | None) -> float:
        return max(0.4, round(100 * ((end or start) - start) / self.span_ms, 2))

    @property
    def tokens(self) -> dict[str, int]:
        found = {"input": 0, "output": 0, "reasoning": 0, "read": 0, "write": 0}
        for s in self.steps:
            t = s.tokens or {}
            for k in ("input", "output", "reasoning"):
                found[k] += int(t.get(k) or 0)
            for k in ("read", "write"):
                found[k] += int((t.get("cache") or {}).get(k) or 0)
        return found

    @property
    def cost(self) -> float:
        return sum(s.cost or 0 for s in self.steps)


def _bounds(records: list[EventRecord], message_id: str) -> tuple[int, int] | None:
    """The slice of the log holding the execution of the Step `message_id`: from its ExecutionStarted (or the log's
    start) through the execution's end (or the log's end); None when no Step has that ID."""
    found = next((n for n, r in enumerate(records)
                  if isinstance(r.data, ev.StepStarted) and r.data.assistantMessageID == message_id), None)
    if found is None:
        return None
    start = next((n for n in range(found, -1, -1) if isinstance(records[n].data, ev.ExecutionStarted)), 0)
    end = next((n for n in range(found, len(records)) if isinstance(records[n].data, EXECUTION_ENDED)),
               len(records) - 1)
    return start, end


def step_ids(records: list[EventRecord], message_id: str) -> list[str]:
    """The Steps of the execution that holds Step `message_id` (none when no Step has that ID)."""
    bounds = _bounds(records, message_id)
    if bounds is None:
        return []
    return [r.data.assistantMessageID for r in records[bounds[0]:bounds[1] + 1] if isinstance(r.data, ev.StepStarted)]


def trace(records: list[EventRecord], message_id: str, messages: dict[str, dict[str, Any]]) -> Trace | None:
    """The trace of the execution holding Step `message_id` (None: no such Step in the log); `messages` the answers
    by ID, whose tool parts give each call's input and output as the transcript shows them."""
    bounds = _bounds(records, message_id)
    if bounds is None:
        return None
    chosen = records[bounds[0]:bounds[1] + 1]
    admitted = {r.data.inputID: r.data.input for r in records[:bounds[1] + 1] if isinstance(r.data, ev.InputAdmitted)}
    steps: dict[str, TraceStep] = {}
    prompts: list[dict[str, Any]] = []
    outcome, error = "running", None
    # the log says when a Step's first output came (its StepStarted waits for it), not when the Step asked its
    # provider: that was at the latest moment the execution moved on before it (its start, a prompt delivered, the
    # Step before it ending)
    moved_on = chosen[0].created
    for r in chosen:
        d = r.data
        if isinstance(d, ev.InputPromoted) and d.inputID in admitted:
            given = admitted[d.inputID]
            prompts.append({"id": d.inputID, "at": r.created, "text": given.data.text,
                            "delivery": given.delivery})
            moved_on = r.created
        elif isinstance(d, ev.ExecutionSucceeded):
            outcome = "succeeded"
        elif isinstance(d, ev.ExecutionFailed):
            outcome, error = "failed", d.error.model_dump(mode="json")
        elif isinstance(d, ev.ExecutionInterrupted):
            outcome = f"interrupted ({d.reason})"
        if not isinstance(d, ev.StepEvent):
            continue
        step = steps.get(d.assistantMessageID)
        if step is None:  # its StepStarted, or a retry scheduled before any output
            step = steps[d.assistantMessageID] = TraceStep(d.assistantMessageID, "", "", moved_on,
                                                           _attempt=moved_on)
        if isinstance(d, ev.StepStarted):
            step.agent, step.model = d.agent, f"{d.model.providerID}/{d.model.id}"
        _step_event(step, r, messages.get(d.assistantMessageID) or {})
        if isinstance(d, ev.StepEnded | ev.StepFailed):
            moved_on = r.created
    ended = chosen[-1].created if outcome != "running" else None
    return Trace(chosen[0].created, ended, list(steps.values()), prompts, outcome, error)


def _step_event(step: TraceStep, r: EventRecord, message: dict[str, Any]) -> None:
    d = r.data
    if isinstance(d, _OUTPUT):
        step._first = r.created if step._first is None else step._first
        step._last = r.created
    if isinstance(d, ev.ToolCalled):
        part = next((c for c in message.get("content") or () if c.get("type") == "tool" and c["id"] == d.callID),
                    {"type": "tool", "id": d.callID, "name": d.name, "state": {"status": "running", "input": d.input}})
        step.calls.append(Call(d.callID, d.name, r.created, part=part))
    elif isinstance(d, ev.ToolSuccess | ev.ToolFailed):
        for call in step.calls:
            if call.call_id == d.callID and call.ended is None:
                call.ended, call.status = r.created, "completed" if isinstance(d, ev.ToolSuccess) else "error"
                call.waits = recorded_waits(d.resultState)
                step.spans.extend(call.segments)
    elif isinstance(d, ev.RetryScheduled):
        step.close_attempt(r.created)
        step.spans.append(Span("back-off", r.created, max(r.created, d.at)))
        step.retries.append({"attempt": d.attempt, "at": r.created, "until": d.at,
                             "error": d.error.model_dump(mode="json")})
        step._attempt = max(r.created, d.at)
    elif isinstance(d, ev.StepEnded | ev.StepFailed):
        step.close_attempt(r.created)
        step.ended, step.cost = r.created, d.cost
        step.tokens = d.tokens.model_dump(mode="json") if d.tokens is not None else None
        if isinstance(d, ev.StepEnded):
            step.finish = d.finish
        else:
            step.error = d.error.model_dump(mode="json")


async def _build(runtime: Runtime, info: SessionV2Info, records: list[EventRecord], message_id: str,
                 signed_in: bool) -> Response:
    answers: dict[str, dict[str, Any]] = {}
    for wanted in step_ids(records, message_id):  # the tool parts of its answers: inputs and outputs as shown
        try:
            answers[wanted] = (await runtime.sessions.message(info.id, wanted)).model_dump(mode="json")
        except TaggedError:
            continue
    found = trace(records, message_id, answers)
    return html(render("trace.html", session=info.model_dump(mode="json"), trace=found, message_id=message_id,
                       signed_in=signed_in), status=200 if found is not None else 404)


async def trace_page(request: Request) -> Response:
    """`/ui/session/{id}/trace/{messageID}`: the trace page of the turn an answer belongs to."""
    return await step_page(request, _build)
