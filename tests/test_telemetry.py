"""Observability end to end: `ocs serve` with the standard OTEL_* variables exports the spans of a tool turn to a
loopback OTLP/HTTP collector (decoded with opentelemetry-proto) under the caller's trace; GET /metrics (parsed with
prometheus_client's parser) counts a turn, a retry and a failed tool; and what is on when nothing is configured."""

from __future__ import annotations

import base64
import json
import logging
import subprocess
import sys

import httpx2
import pytest
from prometheus_client.parser import text_string_to_metric_families

from opencode_session.client import CallOptions, OpenCodeClient
from opencode_session.core.telemetry import hooks, telemetry, tracing_settings
from opencode_session.core.telemetry.logs import JsonFormatter
from tests.support import fake_openai as fake
from tests.support.config import write_global_config
from tests.support.e2e import durable_log
from tests.support.otlp import OtlpReceiver
from tests.support.server import isolated_env, start_configured, start_server

pytestmark = pytest.mark.anyio

CALLER_TRACE = "0af7651916cd43dd8448eb211c80319c"
CALLER_SPAN = "b7ad6b7169203331"
TRACEPARENT = f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"
PASSWORD = "metrics-secret"


@pytest.fixture(scope="module")
def collector():
    with OtlpReceiver() as receiver:
        yield receiver


@pytest.fixture(scope="module")
def traced(tmp_path_factory, loop_provider, collector):
    config = loop_provider.serve_config({"fake-model": {}}, model="loop/fake-model", permission={"bash": "allow"})
    root = tmp_path_factory.mktemp("traced")
    env = isolated_env(root, OTEL_EXPORTER_OTLP_ENDPOINT=collector.url, OTEL_BSP_SCHEDULE_DELAY="50",
                       OTEL_SERVICE_NAME="ocs-under-test", OCS_RETRY_BASE_DELAY_MS="10",
                       OTEL_METRIC_EXPORT_INTERVAL="200")
    write_global_config(env["XDG_CONFIG_HOME"], config)
    srv = start_server(root, env=env, args=["--log-format", "json"])
    yield srv
    assert srv.stop() == 0, "".join(srv.stderr_lines)


@pytest.fixture(scope="module")
def counted(tmp_path_factory, loop_provider):
    config = loop_provider.serve_config({"fake-model": {"cost": {"input": 1, "output": 2}}}, model="loop/fake-model")
    srv, work = start_configured(tmp_path_factory.mktemp("counted"), config, OCS_RETRY_BASE_DELAY_MS="10",
                                 OPENCODE_SERVER_PASSWORD=PASSWORD)
    yield srv
    assert srv.stop() == 0, "".join(srv.stderr_lines)


def _ours(provider, text: str) -> list[fake.RecordedRequest]:
    """The provider requests of the session's Steps (not its background title)."""
    return [r for r in provider.requests if text in json.dumps(r.json.get("messages", []))
            and "Generate a title" not in json.dumps(r.json)]


async def test_a_tool_turn_is_exported_as_one_trace_under_the_callers_span(traced, loop_provider, collector):
    text = "run the echo"
    loop_provider.enqueue(
        fake.completion(fake.tool_call_deltas(0, "call_1", "bash", json.dumps({"command": 'echo "tp=$TRACEPARENT"'})),
                        finish_reason="tool_calls", usage=fake.usage_block(120, 7)),
        fake.completion(fake.text_deltas("done"), usage=fake.usage_block(150, 3)))
    async with OpenCodeClient(traced.url) as client:
        sid = (await client.session.create()).id
        await client.session.prompt(sid, prompt={"text": text}, options=CallOptions(headers={
            "traceparent": TRACEPARENT}))
        await client.session.wait(sid)
        log = await durable_log(client, sid)
    spans = collector.wait_for(lambda got: any(s.name.startswith("invoke_agent") and s.trace_id == CALLER_TRACE
                                               for s in got))
    trace = [s for s in spans if s.trace_id == CALLER_TRACE]
    by_name = {s.name: s for s in trace}
    agent = by_name["invoke_agent build"]
    assert agent.parent_span_id == CALLER_SPAN  # a child of the caller's span, in the caller's trace
    assert agent.attributes["session.id"] == sid and agent.attributes["gen_ai.agent.name"] == "build"
    assert agent.attributes["host.name"] and agent.resource["service.name"] == "ocs-under-test"
    steps = [s for s in trace if s.name == "step"]
    assert len(steps) == 2 and all(s.parent_span_id == agent.span_id for s in steps)
    assert [s.attributes["ocs.step.outcome"] for s in steps] == ["ended", "ended"]
    chats = sorted((s for s in trace if s.name == "chat fake-model"), key=lambda s: s.attributes[
        "gen_ai.usage.input_tokens"])
    assert [c.parent_span_id for c in chats] == [s.span_id for s in sorted(steps, key=lambda s: s.attributes[
        "ocs.step.index"])]
    first, second = chats
    assert first.kind == 3  # SPAN_KIND_CLIENT
    assert first.attributes["gen_ai.operation.name"] == "chat" and first.attributes["gen_ai.provider.name"] == "loop"
    assert first.attributes["gen_ai.request.model"] == "fake-model"
    assert (first.attributes["gen_ai.usage.input_tokens"], first.attributes["gen_ai.usage.output_tokens"]) == (120, 7)
    assert first.attributes["gen_ai.response.finish_reasons"] == ["tool-calls"]
    assert second.attributes["gen_ai.response.finish_reasons"] == ["stop"]
    assert [name for name, _ in first.events] == ["gen_ai.first_token"]
    # no prompt or output text unless OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true
    assert not any(key.startswith(("gen_ai.input", "gen_ai.output", "gen_ai.system")) for s in trace
                   for key in s.attributes)
    tool = by_name["execute_tool bash"]
    assert tool.parent_span_id == steps[0].span_id or tool.parent_span_id == steps[1].span_id
    assert tool.parent_span_id == first.parent_span_id  # the Step that asked for it
    assert tool.attributes["gen_ai.tool.name"] == "bash" and tool.attributes["gen_ai.tool.call.id"] == "call_1"
    assert tool.attributes["ocs.tool.outcome"] == "success"
    # the provider requests carry their attempt's traceparent, and bash got the tool call's as TRACEPARENT
    sent = _ours(loop_provider, text)
    assert [r.headers["traceparent"] for r in sent] == [f"00-{CALLER_TRACE}-{c.span_id}-01" for c in chats]
    output = next(e for e in log if e.type == "session.tool.success").data.content[0].text
    assert f"tp=00-{CALLER_TRACE}-{tool.span_id}-01" in output


def test_json_log_format_makes_every_stderr_line_a_json_object(traced, collector):
    lines = [json.loads(line) for line in traced.stderr_lines]  # raises on a line that is not JSON
    said = [line["message"] for line in lines if line["logger"] == "opencode_session.serve"]
    assert any(m.startswith("API document") for m in said)
    assert f"traces        OTLP/HTTP {collector.url}/v1/traces as ocs-under-test".strip() in said


async def test_a_prompt_without_traceparent_starts_a_trace_of_its_own(traced, loop_provider, collector):
    loop_provider.enqueue(fake.completion(fake.text_deltas("hi")))
    async with OpenCodeClient(traced.url) as client:
        sid = (await client.session.create()).id
        await client.session.prompt(sid, prompt={"text": "hello"}, options=CallOptions(headers={
            "traceparent": "00-" + "0" * 32 + "-" + "0" * 16 + "-01"}))  # invalid: ignored
        await client.session.wait(sid)
    spans = collector.wait_for(lambda got: any(s.name.startswith("invoke_agent") and
                                               s.attributes.get("session.id") == sid for s in got))
    agent = next(s for s in spans if s.name.startswith("invoke_agent") and s.attributes.get("session.id") == sid)
    assert agent.parent_span_id == "" and agent.trace_id != CALLER_TRACE


async def test_a_retry_is_a_failed_step_a_back_off_and_a_second_try(traced, loop_provider, collector):
    loop_provider.enqueue(fake.error(500, "boom", type="server_error"), fake.completion(fake.text_deltas("ok")))
    async with OpenCodeClient(traced.url) as client:
        sid = (await client.session.create()).id
        await client.session.prompt(sid, prompt={"text": "try twice"})
        await client.session.wait(sid)

    def ours(got):
        return [s for s in got if s.attributes.get("session.id") == sid or s.name == "retry.backoff"]

    spans = collector.wait_for(lambda got: any(s.name.startswith("invoke_agent") for s in ours(got)))
    agent = next(s for s in ours(spans) if s.name.startswith("invoke_agent"))
    trace = [s for s in spans if s.trace_id == agent.trace_id]
    steps = sorted((s for s in trace if s.name == "step"), key=lambda s: s.attributes["ocs.step.attempt"])
    assert [(s.attributes["ocs.step.attempt"], s.attributes["ocs.step.outcome"]) for s in steps] == [
        (1, "retry"), (2, "ended")]
    [backoff] = [s for s in trace if s.name == "retry.backoff"]
    assert backoff.parent_span_id == agent.span_id and backoff.attributes["error.type"] == "provider.internal"
    assert backoff.attributes["ocs.retry.attempt"] == 2
    failed = next(s for s in trace if s.name == "chat fake-model" and s.parent_span_id == steps[0].span_id)
    assert failed.status_code == 2 and failed.attributes["error.type"] == "provider.internal"  # STATUS_CODE_ERROR


async def test_with_an_otlp_endpoint_the_metrics_are_exported_there_too(traced, loop_provider, collector):
    loop_provider.enqueue(fake.completion(fake.text_deltas("counted")))
    async with OpenCodeClient(traced.url) as client:
        sid = (await client.session.create()).id
        await client.session.prompt(sid, prompt={"text": "count me"})
        await client.session.wait(sid)
        ended = collector.wait_for_metrics(lambda got: any(
            labels == {"outcome": "ended"} and value >= 1 for labels, value in got.get("ocs_steps", [])))
    assert "ocs_provider_request_duration_seconds_count" in ended and "ocs_active_executions" in ended
    assert any(labels.get("delivery") == "steer" for labels, _ in ended["ocs_prompts_admitted"])


def _auth() -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"opencode:{PASSWORD}".encode()).decode()}


async def _scrape(http: httpx2.AsyncClient) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    answer = await http.get("/metrics", headers=_auth())
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/plain")
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(answer.text) for sample in family.samples}


def _delta(before, after, name: str, **labels: str) -> float:
    key = (name, tuple(sorted(labels.items())))
    return after.get(key, 0.0) - before.get(key, 0.0)


async def test_metrics_count_a_turn_a_retry_and_a_failed_tool(counted, loop_provider):
    loop_provider.enqueue(
        fake.error(500, "boom", type="server_error"),
        fake.completion(fake.tool_call_deltas(0, "call_1", "read", json.dumps({"path": "missing.txt"})),
                        finish_reason="tool_calls", usage=fake.usage_block(1000, 10)),
        fake.completion(fake.text_deltas("no such file"), usage=fake.usage_block(1100, 5)))
    async with httpx2.AsyncClient(base_url=counted.url) as http:
        assert (await http.get("/metrics")).status_code == 401  # behind the password like every route
        before = await _scrape(http)  # the first scrape starts counting
        async with OpenCodeClient(counted.url, auth=("opencode", PASSWORD)) as client:
            sid = (await client.session.create()).id
            await client.session.prompt(sid, prompt={"text": "read missing.txt"})
            await client.session.wait(sid)
        after = await _scrape(http)
    assert _delta(before, after, "ocs_prompts_admitted_total", delivery="steer") == 1
    assert _delta(before, after, "ocs_steps_total", outcome="retry") == 1
    assert _delta(before, after, "ocs_steps_total", outcome="ended") == 2
    assert _delta(before, after, "ocs_provider_retries_total", reason="provider.internal") == 1
    assert _delta(before, after, "ocs_tool_calls_total", tool="read", outcome="error") == 1
    assert _delta(before, after, "ocs_tool_call_duration_seconds_count", tool="read", outcome="error") == 1
    model = {"provider": "loop", "model": "fake-model"}
    assert _delta(before, after, "ocs_provider_requests_total", outcome="error", **model) == 1
    assert _delta(before, after, "ocs_provider_requests_total", outcome="ok", **model) == 2
    assert _delta(before, after, "ocs_provider_request_duration_seconds_count", **model) == 3
    assert _delta(before, after, "ocs_provider_time_to_first_token_seconds_count", **model) == 2
    assert _delta(before, after, "ocs_tokens_total", model="loop/fake-model", kind="input") == 2100
    assert _delta(before, after, "ocs_tokens_total", model="loop/fake-model", kind="output") == 15
    assert _delta(before, after, "ocs_cost_usd_total", model="loop/fake-model") == pytest.approx(2130 / 1e6)
    assert _delta(before, after, "ocs_store_commit_duration_seconds_count") > 0
    assert after[("ocs_active_executions", ())] == 0 and ("ocs_sse_subscribers", ()) in after
    # bounded labels: no session ID anywhere
    assert not any(sid in value for _, labels in after for _, value in labels)


async def test_the_metrics_route_is_not_part_of_the_v2_document(counted):
    async with httpx2.AsyncClient(base_url=counted.url, headers=_auth()) as http:
        doc = (await http.get("/doc")).json()
    assert "/metrics" not in doc["paths"]


def test_tracing_is_off_unless_the_standard_variables_or_the_config_ask():
    assert tracing_settings({}) is None
    assert tracing_settings({"OTEL_SERVICE_NAME": "x"}) is None
    on = tracing_settings({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318/"})
    assert on is not None and on.endpoint == "http://collector:4318/v1/traces"
    assert on.service_name == "opencode-session" and on.sampler == "parentbased_always_on"
    assert on.metrics_endpoint == "http://collector:4318/v1/metrics"
    quiet = tracing_settings({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c", "OTEL_METRICS_EXPORTER": "none"})
    assert quiet is not None and quiet.metrics_endpoint is None
    assert not on.capture_content
    exact = tracing_settings({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c/t", "OTEL_TRACES_SAMPLER": "traceidratio",
                              "OTEL_TRACES_SAMPLER_ARG": "0.25",
                              "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true"})
    assert exact is not None and exact.endpoint == "http://c/t" and exact.sampler_arg == "0.25"
    assert exact.capture_content
    configured = tracing_settings({}, configured=True)  # opencode.json's experimental.openTelemetry
    assert configured is not None and configured.endpoint == "http://localhost:4318/v1/traces"
    assert tracing_settings({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c", "OTEL_SDK_DISABLED": "true"}) is None
    assert tracing_settings({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c", "OTEL_TRACES_EXPORTER": "none"}) is None
    assert tracing_settings({"OTEL_TRACES_EXPORTER": "otlp"}) is not None


def test_a_traceparent_header_is_taken_only_when_well_formed():
    assert hooks.valid_traceparent(TRACEPARENT.upper()) == TRACEPARENT
    for bad in (None, "", "garbage", f"00-{CALLER_TRACE}-{CALLER_SPAN}", "00-" + "0" * 32 + f"-{CALLER_SPAN}-01",
                f"00-{CALLER_TRACE}-" + "0" * 16 + "-01"):
        assert hooks.valid_traceparent(bad) is None


def test_json_log_lines_carry_the_current_trace_and_span(collector):
    settings = tracing_settings({"OTEL_EXPORTER_OTLP_ENDPOINT": collector.url})
    assert settings is not None and telemetry.tracer is None
    assert telemetry.enable_tracing(settings)
    try:
        record = logging.LogRecord("opencode_session.x", logging.WARNING, __file__, 1, "a %s", ("warning",), None)
        with telemetry.tracer.start_as_current_span("work") as span:
            line = json.loads(JsonFormatter().format(record))
            context = span.get_span_context()
        assert line["message"] == "a warning" and line["level"] == "warning" and line["logger"] == "opencode_session.x"
        assert line["trace_id"] == format(context.trace_id, "032x")
        assert line["span_id"] == format(context.span_id, "016x")
    finally:
        telemetry.disable_tracing()
    untraced = json.loads(JsonFormatter().format(record))
    assert "trace_id" not in untraced


def test_with_nothing_configured_a_runtime_imports_neither_opentelemetry_nor_prometheus(tmp_path):
    code = ("import asyncio, json, sys\n"
            "from opencode_session.core.runtime import Runtime, RuntimeOptions\n"
            "from opencode_session.core.wiring import runner_drain_factory\n"
            "async def main():\n"
            f"    async with Runtime(RuntimeOptions(db_path={str(tmp_path / 'db.sqlite')!r}, env={{}},\n"
            f"        directory={str(tmp_path)!r}, drain_factory=runner_drain_factory)):\n"
            "        pass\n"
            "asyncio.run(main())\n"
            "print(json.dumps(sorted(m for m in ('opentelemetry.sdk', 'prometheus_client') if m in sys.modules)))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


async def test_an_mcp_call_is_a_span_under_its_tool_call_and_the_server_joins_the_trace(tmp_path, collector):
    from tests.support.mcp_harness import local
    from tests.support.scripted import text, tool_call
    from tests.test_mcp import harness

    settings = tracing_settings({"OTEL_EXPORTER_OTLP_ENDPOINT": collector.url})
    assert settings is not None and telemetry.enable_tracing(settings)
    seen = tmp_path / "traceparent"
    try:
        async with harness(tmp_path) as h:
            entry = local("srv")  # started through a shell that notes the TRACEPARENT the server was given
            entry["command"] = ["sh", "-c", f'printf %s "$TRACEPARENT" > "{seen}"; exec "$0" "$@"', *entry["command"]]
            h.configure({"srv": entry})
            sid = (await h.rt.sessions.create()).id
            records = await h.turn(sid, "echo", tool_call("c1", "srv_echo", {"text": "hi"}), text("done"))
    finally:
        telemetry.disable_tracing()  # exports what is left
    assert any(r.type == "session.tool.success" for r in records)
    spans = collector.wait_for(lambda got: any(s.name == "tools/call echo" for s in got))
    call = next(s for s in spans if s.name == "tools/call echo")
    tool = next(s for s in spans if s.name == "execute_tool srv_echo")
    assert call.parent_span_id == tool.span_id and call.kind == 3  # a client span under its tool call
    assert call.attributes["mcp.method.name"] == "tools/call" and call.attributes["ocs.mcp.server"] == "srv"
    assert seen.read_text().split("-")[1] == tool.trace_id  # the server's TRACEPARENT is of the same trace


async def test_message_content_is_recorded_only_when_asked(tmp_path, collector):
    from tests.support.scripted import text
    from tests.test_mcp import harness

    settings = tracing_settings({"OTEL_EXPORTER_OTLP_ENDPOINT": collector.url,
                                 "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true"})
    assert settings is not None and telemetry.enable_tracing(settings)
    try:
        async with harness(tmp_path) as h:
            sid = (await h.rt.sessions.create()).id
            await h.turn(sid, "the secret question", text("the secret answer"))
    finally:
        telemetry.disable_tracing()
    spans = collector.wait_for(lambda got: any(s.name.startswith("chat ") and "gen_ai.input.messages" in s.attributes
                                               for s in got))
    chat = next(s for s in spans if s.name.startswith("chat ") and "gen_ai.input.messages" in s.attributes)
    assert "the secret question" in chat.attributes["gen_ai.input.messages"]
    assert json.loads(chat.attributes["gen_ai.output.messages"]) == [
        {"role": "assistant", "parts": [{"type": "text", "content": "the secret answer"}]}]


async def test_a_fenced_write_is_counted(tmp_path):
    from opencode_session.core.session.projector import project
    from opencode_session.core.store import SessionFencedError, Store, set_fence
    from tests.store.test_backend_contract import _agent, _created

    registry = telemetry.enable_metrics().registry
    before = registry.get_sample_value("ocs_fenced_writes_total") or 0
    async with Store(tmp_path / "db.sqlite", project=project) as store:
        await _created(store, "ses_a")
        former = await store.write(lambda tx: tx.leases.take("ses_a", "host-a", 1_000, 5_000))
        assert await store.write(lambda tx: tx.leases.take("ses_a", "host-b", 6_001, 11_000)) is not None
        set_fence(former)
        try:
            with pytest.raises(SessionFencedError):
                await store.write(_agent("ses_a", "zombie"))
        finally:
            set_fence(None)
    assert registry.get_sample_value("ocs_fenced_writes_total") == before + 1
    assert (registry.get_sample_value("ocs_store_commit_duration_seconds_count") or 0) > 0
