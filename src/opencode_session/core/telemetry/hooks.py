"""The instrumentation points core calls: spans (GenAI semantic conventions where they exist) and metrics for an
execution, a Step, a provider attempt, a tool or MCP call, a compaction and a retry's back-off, and `traceparent`
in and out. While tracing and metrics are both off each is one attribute check and returns None or a shared no-op
context manager; OpenTelemetry is imported only once tracing is on."""

from __future__ import annotations

import contextlib
import json
import re
import time
from collections.abc import Iterator
from dataclasses import asdict, is_dataclass
from typing import Any

from .state import telemetry

_OFF = contextlib.nullcontext()
_TRACEPARENT = re.compile(r"^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$")


def valid_traceparent(value: str | None) -> str | None:
    """`value` when it is a W3C traceparent (version 00 shape, not all-zero ids); else None (it is ignored)."""
    if value is None:
        return None
    value = value.strip().lower()
    if not _TRACEPARENT.match(value) or value[3:35] == "0" * 32 or value[36:52] == "0" * 16:
        return None
    return value


def _parent(traceparent: str | None) -> Any:
    """The OpenTelemetry context whose parent is `traceparent` (None: the current context)."""
    if traceparent is None:
        return None
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    return TraceContextTextMapPropagator().extract({"traceparent": traceparent})


def with_traceparent(env: dict[str, str]) -> dict[str, str]:
    """A child process's environment `env` with TRACEPARENT (and TRACESTATE) of the current span, when tracing."""
    if telemetry.tracer is not None:
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        carrier: dict[str, str] = {}
        TraceContextTextMapPropagator().inject(carrier)
        if "traceparent" in carrier:
            env["TRACEPARENT"] = carrier["traceparent"]
        if "tracestate" in carrier:
            env["TRACESTATE"] = carrier["tracestate"]
    return env


async def inject_traceparent(request: Any) -> None:
    """An httpx request hook: the request carries the current span's `traceparent` (a provider attempt's)."""
    if telemetry.tracer is not None:
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        TraceContextTextMapPropagator().inject(request.headers)


# --- admission -------------------------------------------------------------------------------------------------


def prompt_admitted(delivery: str) -> None:
    if telemetry.metrics is not None:
        telemetry.metrics.prompts_admitted.labels(delivery).inc()


# --- an execution (one drain) --------------------------------------------------------------------------------------


def execution(session_id: str, host: str, traceparent: str | None) -> contextlib.AbstractContextManager[Any]:
    """The span of one execution of the session (a drain), a child of `traceparent` (the caller's trace, stored
    with the admitted input) when given."""
    tracer = telemetry.tracer
    if tracer is None:
        return _OFF
    return tracer.start_as_current_span(
        "invoke_agent", context=_parent(traceparent),
        attributes={"gen_ai.operation.name": "invoke_agent", "session.id": session_id,
                    "gen_ai.conversation.id": session_id, "host.name": host})


# --- a Step ---------------------------------------------------------------------------------------------------------


class StepTrace:
    """One Step's span (when tracing) and its outcome's count (when counting)."""

    def __init__(self, span: Any) -> None:
        self.span = span

    def settled(self, assistant_id: str, outcome: Any) -> None:
        """`outcome` is the Step's StepOutcome, or None when history was compacted instead of sending it."""
        if outcome is None:
            label = "compacted"
        elif outcome.overflow:
            label = "overflow"
        elif outcome.retry:
            label = "retry"
        elif outcome.failure is not None:
            label = "failed"
        else:
            label = "ended"
        if telemetry.metrics is not None and outcome is not None:
            telemetry.metrics.steps.labels(label).inc()
        if self.span is not None:
            self.span.set_attribute("ocs.message.id", assistant_id)
            self.span.set_attribute("ocs.step.outcome", label)
            if outcome is not None and outcome.failure is not None:
                self.span.set_attribute("error.type", outcome.failure.type)
                from opentelemetry.trace import Status, StatusCode

                self.span.set_status(Status(StatusCode.ERROR, outcome.failure.type))


@contextlib.contextmanager
def _step(session_id: str, agent: str, index: int, attempt: int) -> Iterator[StepTrace]:
    tracer = telemetry.tracer
    if tracer is None:
        yield StepTrace(None)
        return
    if index == 1 and attempt == 1:  # the execution's span names its agent (the first Step's)
        from opentelemetry import trace

        current = trace.get_current_span()
        current.update_name(f"invoke_agent {agent}")
        current.set_attribute("gen_ai.agent.name", agent)
    with tracer.start_as_current_span("step", attributes={
            "session.id": session_id, "gen_ai.agent.name": agent, "ocs.step.index": index,
            "ocs.step.attempt": attempt}, record_exception=False) as span:
        yield StepTrace(span)


def step(session_id: str, agent: str, index: int, attempt: int) -> contextlib.AbstractContextManager[Any]:
    """Around one Step (`index`: its number in the agent's allowance, `attempt`: its try, both from 1): yields a
    StepTrace to report the outcome to, or None while telemetry is off."""
    if not telemetry.on:
        return _OFF
    return _step(session_id, agent, index, attempt)


@contextlib.contextmanager
def backoff(delay_ms: float, reason: str, attempt: int) -> Iterator[None]:
    """A retry's wait before the next attempt: a span of its own, and a retry counted by the failure's type."""
    if telemetry.metrics is not None:
        telemetry.metrics.retries.labels(reason).inc()
    tracer = telemetry.tracer
    if tracer is None:
        yield
        return
    with tracer.start_as_current_span("retry.backoff", attributes={
            "ocs.retry.delay_ms": delay_ms, "ocs.retry.attempt": attempt, "error.type": reason}):
        yield


def retrying(delay_ms: float, reason: str, attempt: int) -> contextlib.AbstractContextManager[Any]:
    if not telemetry.on:
        return _OFF
    return backoff(delay_ms, reason, attempt)


def compaction(session_id: str, trigger: str) -> contextlib.AbstractContextManager[Any]:
    """A compaction of the session's history (`trigger`: overflow, auto or manual)."""
    tracer = telemetry.tracer
    if tracer is None:
        return _OFF
    return tracer.start_as_current_span("compaction", attributes={"session.id": session_id,
                                                                  "ocs.compaction.trigger": trigger})


# --- a provider attempt ---------------------------------------------------------------------------------------


def _content(value: Any) -> str:
    return json.dumps(value, default=lambda v: asdict(v) if is_dataclass(v) and not isinstance(v, type) else str(v),
                      ensure_ascii=False)


class Attempt:
    """One Physical Attempt: a `chat {model}` client span current while its stream is read (so the provider request
    carries its traceparent), time to first output, and its request, latency, tokens and cost counted."""

    def __init__(self, provider: str, model: str, wire_model: str, request: Any) -> None:
        self.provider, self.model = provider, model
        self.label = f"{provider}/{model}"
        self.started = time.perf_counter()
        self.first: float | None = None
        self.span: Any = None
        self.parent: Any = None  # the Step's context: the parent of the Step's tool calls
        self._token: Any = None
        self._output: list[str] | None = None  # the text output, kept only when message content is captured
        tracer = telemetry.tracer
        if tracer is not None:
            from opentelemetry import context, trace

            self.parent = context.get_current()
            self.span = tracer.start_span(f"chat {wire_model}", kind=trace.SpanKind.CLIENT, attributes={
                "gen_ai.operation.name": "chat", "gen_ai.provider.name": provider,
                "gen_ai.request.model": wire_model})
            if telemetry.capture_content:
                self._output = []
                self.span.set_attribute("gen_ai.system_instructions", _content(request.system))
                self.span.set_attribute("gen_ai.input.messages", _content(request.messages))
            self._token = context.attach(trace.set_span_in_context(self.span))

    def first_output(self) -> None:
        if self.first is None:
            self.first = time.perf_counter()
            if self.span is not None:
                self.span.add_event("gen_ai.first_token", {
                    "gen_ai.response.time_to_first_chunk": self.first - self.started})

    def output(self, text: str) -> None:
        """One complete text block of the response (recorded only when message content is captured)."""
        if self._output is not None:
            self._output.append(text)

    def stream_ended(self) -> None:
        """The stream is read: the span is no longer current (the Step's tool calls run under the Step's)."""
        if self._token is not None:
            from opentelemetry import context

            context.detach(self._token)
            self._token = None

    def end(self, finish: str | None, usage: Any, cost: float, error: Any) -> None:
        self.stream_ended()
        elapsed = time.perf_counter() - self.started
        m = telemetry.metrics
        if m is not None:
            m.provider_requests.labels(self.provider, self.model, "error" if error is not None else "ok").inc()
            m.provider_duration.labels(self.provider, self.model).observe(elapsed)
            if self.first is not None:
                m.provider_ttft.labels(self.provider, self.model).observe(self.first - self.started)
            for kind in ("input", "output", "reasoning", "cache_read", "cache_write"):
                count = getattr(usage, kind, 0)
                if count:
                    m.tokens.labels(self.label, kind).inc(count)
            if cost:
                m.cost.labels(self.label).inc(cost)
        span = self.span
        if span is None:
            return
        self.span = None
        span.set_attribute("gen_ai.usage.input_tokens", usage.input + usage.cache_read + usage.cache_write)
        span.set_attribute("gen_ai.usage.output_tokens", usage.output + usage.reasoning)
        if finish is not None:
            span.set_attribute("gen_ai.response.finish_reasons", [finish])
        if self._output is not None:
            span.set_attribute("gen_ai.output.messages", _content([{"role": "assistant", "parts": [
                {"type": "text", "content": text} for text in self._output]}]))
        if error is not None:
            from opentelemetry.trace import Status, StatusCode

            kind = error.to_session_error().type if hasattr(error, "to_session_error") else type(error).__name__
            span.set_attribute("error.type", str(kind))
            span.set_status(Status(StatusCode.ERROR, str(kind)))
        span.end()

    def abandon(self) -> None:
        """The Step ended another way (interrupted, a defect): the span ends as it is."""
        self.stream_ended()
        if self.span is not None:
            span, self.span = self.span, None
            span.end()


def attempt(provider: str, model: str, wire_model: str, request: Any) -> Attempt | None:
    if not telemetry.on:
        return None
    return Attempt(provider, model, wire_model, request)


# --- tool and MCP calls ----------------------------------------------------------------------------------------


class ToolTrace:
    def __init__(self, name: str, span: Any) -> None:
        self.name = name
        self.span = span
        self.started = time.perf_counter()
        self.outcome = "error"

    def settled(self, error_type: str | None) -> None:
        self.outcome = "success" if error_type is None else "error"
        if self.span is not None:
            self.span.set_attribute("ocs.tool.outcome", self.outcome)
            if error_type is not None:
                from opentelemetry.trace import Status, StatusCode

                self.span.set_attribute("error.type", error_type)
                self.span.set_status(Status(StatusCode.ERROR, error_type))


# The metrics' label of a call to a tool the Step did not offer: the model names tools as it likes, and each new name
# would be new series of every tool metric without bound.
OTHER_TOOL = "other"


@contextlib.contextmanager
def _tool(name: str, call_id: str, parent: Any, known: bool) -> Iterator[ToolTrace]:
    tracer = telemetry.tracer
    span_cm = _OFF if tracer is None else tracer.start_as_current_span(
        f"execute_tool {name}", context=parent, record_exception=False, attributes={
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name, "gen_ai.tool.call.id": call_id})
    with span_cm as span:
        traced = ToolTrace(name, span)
        try:
            yield traced
        finally:
            m = telemetry.metrics
            if m is not None:
                label = name if known else OTHER_TOOL
                m.tool_calls.labels(label, traced.outcome).inc()
                m.tool_duration.labels(label, traced.outcome).observe(time.perf_counter() - traced.started)


def tool_call(name: str, call_id: str, parent: Any = None, *,
              known: bool = True) -> contextlib.AbstractContextManager[Any]:
    """Around one local tool call: yields a ToolTrace to report its settlement to, or None while telemetry is off.
    `parent` is the Step's context (an Attempt's `parent`), so the call is the Step's child, not the attempt's;
    a call to a tool the Step did not offer (`known` false) is counted under the label `other`."""
    if not telemetry.on:
        return _OFF
    return _tool(name, call_id, parent, known)


def mcp_call(server: str, tool: str) -> contextlib.AbstractContextManager[Any]:
    """One MCP `tools/call` to `server`."""
    tracer = telemetry.tracer
    if tracer is None:
        return _OFF
    from opentelemetry.trace import SpanKind

    return tracer.start_as_current_span(f"tools/call {tool}", kind=SpanKind.CLIENT, attributes={
        "mcp.method.name": "tools/call", "gen_ai.tool.name": tool, "ocs.mcp.server": server})


# --- the store, the event streams, the cluster ------------------------------------------------------------------


def committed(seconds: float) -> None:
    if telemetry.metrics is not None:
        telemetry.metrics.store_commit.observe(seconds)


def reader_dropped() -> None:
    if telemetry.metrics is not None:
        telemetry.metrics.sse_dropped.inc()


def lease_taken_over() -> None:
    if telemetry.metrics is not None:
        telemetry.metrics.lease_takeovers.inc()


def write_fenced() -> None:
    if telemetry.metrics is not None:
        telemetry.metrics.fenced_writes.inc()
