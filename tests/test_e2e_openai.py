"""End to end over HTTP: `ocs serve` runs the real OpenAI Chat Completions adapter against a loopback server
that speaks the streaming wire protocol; the client drives prompts and reads the durable log."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import httpx2
import pytest

from opencode_session.client import CallOptions, ClientError, OpenCodeClient
from tests.support import fake_openai as fake
from tests.support.e2e import durable_log, prompt_and_wait
from tests.support.e2e import types as event_types
from tests.support.server import start_configured

pytestmark = pytest.mark.anyio

RETRY_BASE_MS = 50


@pytest.fixture(scope="module")
def provider(loop_provider):
    return loop_provider


@pytest.fixture(scope="module")
def ocs(tmp_path_factory, provider):
    config = provider.serve_config({"fake-model": {"cost": {"input": 1, "output": 2}}}, model="loop/fake-model")
    # retries without real backoff
    srv, work = start_configured(tmp_path_factory.mktemp("e2e"), config, OCS_RETRY_BASE_DELAY_MS=str(RETRY_BASE_MS))
    (work / "notes.txt").write_text("alpha\nbeta\n")
    yield srv
    assert srv.stop() == 0, "".join(srv.stderr_lines)


@pytest.fixture
async def client(ocs, provider):
    provider.requests.clear()
    async with OpenCodeClient(ocs.url) as c:
        yield c
    assert provider.pending == 0, "a scripted provider response was never requested"


def enqueue_call(provider, name: str, arguments: dict, answer: str) -> None:
    """The model calls one tool, then answers once the call settled."""
    provider.enqueue(fake.completion(fake.tool_call_deltas(0, "call_1", name, json.dumps(arguments)),
                                     finish_reason="tool_calls"),
                     fake.completion(fake.text_deltas(answer)))


async def _run(client, text: str) -> tuple[str, list]:
    sid = (await client.session.create()).id
    await prompt_and_wait(client, sid, text)
    return sid, await durable_log(client, sid)


async def test_text_answer_with_usage_and_cost(client, provider):
    provider.enqueue(fake.completion(fake.text_deltas("Hel", "lo!"), usage=fake.usage_block(1000, 500)))
    sid, log = await _run(client, "say hello")
    assert event_types(log)[-4:] == ["session.text.started", "session.text.ended", "session.step.ended",
                                     "session.execution.succeeded"]
    assistant = [m for m in (await client.session.context(sid)) if m.type == "assistant"][0]
    assert assistant.content[0].text == "Hello!" and assistant.finish == "stop"
    info = await client.session.get(sid)
    assert info.tokens.input == 1000 and info.tokens.output == 500
    assert info.cost == pytest.approx((1000 * 1 + 500 * 2) / 1e6)
    sent = provider.requests[0].json
    assert sent["stream"] is True and sent["messages"][-1] == {"role": "user", "content": "say hello"}
    assert sent["messages"][0]["role"] == "system" and "<env>" in sent["messages"][0]["content"]
    assert "authorization" in {k.lower() for k in provider.requests[0].headers}


async def test_multi_step_tool_loop_with_read(client, provider):
    provider.enqueue(
        fake.completion(fake.tool_call_deltas(0, "call_1", "read", '{"path":', ' "notes.txt"}'),
                        finish_reason="tool_calls"),
        fake.completion(fake.text_deltas("The file says alpha and beta."))
    )
    sid, log = await _run(client, "what is in notes.txt?")
    types = event_types(log)
    assert types.index("session.tool.called") < types.index("session.tool.success") < types.index(
        "session.step.ended")
    assert types.count("session.step.started") == 2 and types[-1] == "session.execution.succeeded"
    second = provider.requests[1].json["messages"]
    assert second[-2]["tool_calls"][0]["function"]["name"] == "read"
    assert second[-1]["role"] == "tool" and "alpha" in second[-1]["content"]


async def test_rate_limit_with_retry_after_then_success(client, provider):
    provider.enqueue(fake.error(429, "slow down", type="rate_limit_error", headers={"retry-after-ms": "600"}),
                     fake.completion(fake.text_deltas("ok")))
    sid, log = await _run(client, "hi")
    retry = [e for e in log if e.type == "session.retry.scheduled"]
    assert len(retry) == 1 and retry[0].data.attempt == 2 and retry[0].data.error.type == "provider.rate-limit"
    # stretched to the provider's 600 ms (the configured first delay is 50 ms); `at` is taken just before the write
    assert retry[0].data.at - retry[0].created > 400
    started = [e for e in log if e.type == "session.step.started"]
    assert started[0].data.assistantMessageID == retry[0].data.assistantMessageID
    assert event_types(log)[-1] == "session.execution.succeeded" and len(provider.requests) == 2


async def test_provider_500_is_retried(client, provider):
    provider.enqueue(fake.error(500, "boom", type="server_error"), fake.completion(fake.text_deltas("fine")))
    _, log = await _run(client, "hi")
    retry = [e for e in log if e.type == "session.retry.scheduled"]
    assert [e.data.error.type for e in retry] == ["provider.internal"]
    # the server's OCS_RETRY_BASE_DELAY_MS, not the default 2 s backoff
    assert retry[0].data.at - retry[0].created <= RETRY_BASE_MS
    assert event_types(log)[-1] == "session.execution.succeeded"


async def test_connection_dropped_before_first_token_is_retried(client, provider):
    provider.enqueue(fake.drop(), fake.completion(fake.text_deltas("recovered")))
    sid, log = await _run(client, "hi")
    assert [e.data.error.type for e in log if e.type == "session.retry.scheduled"] == ["provider.transport"]
    assistant = [m for m in await client.session.context(sid) if m.type == "assistant"]
    assert [c.text for c in assistant[0].content] == ["recovered"]


async def test_connection_dropped_after_first_token_fails_without_retry(client, provider):
    provider.enqueue(fake.completion(fake.text_deltas("partial ", "answer"), drop_after=2, finish_reason=None))
    sid, log = await _run(client, "hi")
    assert "session.retry.scheduled" not in event_types(log)
    failed = [e for e in log if e.type == "session.step.failed"]
    assert failed and failed[0].data.error.type == "provider.transport"
    assert event_types(log)[-1] == "session.execution.failed"
    assistant = [m for m in await client.session.context(sid) if m.type == "assistant"][0]
    assert assistant.content[0].text.startswith("partial")  # partial content stays visible
    assert len(provider.requests) == 1


async def test_provider_400_is_a_failed_step_in_history_and_the_session_goes_on(client, provider):
    provider.enqueue(fake.error(400, "Unsupported parameter: 'temperature'", type="invalid_request_error"),
                     fake.completion(fake.text_deltas("fine now")))
    sid, log = await _run(client, "hi")
    assert [t for t in event_types(log) if t.startswith(("session.step.", "session.execution.", "session.retry."))] == [
        "session.execution.started", "session.step.started", "session.step.failed", "session.execution.failed"]
    step_failed = next(e for e in log if e.type == "session.step.failed")
    assert step_failed.data.error.type == "provider.invalid-request" and step_failed.data.error.status == 400
    assert len(provider.requests) == 1
    messages = (await client.session.messages(sid, order="asc")).items
    assert [m.type for m in messages] == ["user", "assistant"]
    assert messages[1].finish == "error" and messages[1].error == step_failed.data.error
    # the session takes the next prompt normally
    await client.session.prompt(sid, prompt={"text": "again"})
    with anyio.fail_after(40):
        await client.session.wait(sid)
    # the background title may land after the execution ends: it is not what this checks
    log = [e async for e in client.session.log(sid, follow=False) if e.type not in ("log.synced", "session.renamed")]
    assert event_types(log)[-1] == "session.execution.succeeded" and len(provider.requests) == 2


async def test_long_waits_and_quiet_streams_outlast_the_default_timeout(ocs, provider):
    held = fake.completion(fake.text_deltas("late"), hold_after=1)
    provider.enqueue(held)
    async with OpenCodeClient(ocs.url, timeout=0.5) as client:
        sid = (await client.session.create()).id
        stream = client.event.subscribe()
        assert (await stream.__anext__()).type == "server.connected"
        seen: list[str] = []

        async def read_until_idle() -> None:  # reads across the quiet hold, longer than the default timeout
            async for item in stream:
                if item.data.get("sessionID") == sid:
                    seen.append(item.type)
                    if item.type == "session.execution.succeeded":
                        return

        async with anyio.create_task_group() as tg:
            tg.start_soon(read_until_idle)
            await client.session.prompt(sid, prompt={"text": "take your time"})
            assert await anyio.to_thread.run_sync(held.held.wait, 30)
            with pytest.raises(ClientError) as cut:  # a caller's own timeout still applies
                await client.session.wait(sid, options=CallOptions(timeout=0.2))
            assert cut.value.reason == "Transport" and isinstance(cut.value.cause, httpx2.ReadTimeout)

            async def release_later() -> None:
                await anyio.sleep(1.5)  # the time that passes is what this test is about
                held.release.set()

            tg.start_soon(release_later)
            with anyio.fail_after(30):
                await client.session.wait(sid)
        await stream.aclose()
    assert seen[-1] == "session.execution.succeeded" and "session.text.ended" in seen


async def test_bash_output_reaches_an_event_stream_client_while_the_command_runs(client, provider, ocs):
    # in the Location, so the command needs no permission to look for it
    gate = Path((await client.location.get()).directory) / "go"
    command = "echo first; while [ ! -f go ]; do sleep 0.05; done; echo second"
    enqueue_call(provider, "bash", {"command": command}, "ran it")
    stream = client.event.subscribe()
    sid = None
    progress: list[str] = []
    with anyio.fail_after(40):
        async for item in stream:
            if item.type == "server.connected":
                sid = (await client.session.create()).id
                await client.session.prompt(sid, prompt={"text": "run it"})
            elif item.type == "session.tool.progress" and item.data.get("sessionID") == sid:
                progress.append(item.data["content"][0]["text"])
                if "first" in progress[-1]:
                    break
    await stream.aclose()
    assert sid is not None and progress[-1] == "first\n"
    # the command is still waiting for the gate: the output arrived live, before the call settled
    log = [e.type async for e in client.session.log(sid, follow=False)]
    assert "session.tool.called" in log and "session.tool.success" not in log
    gate.touch()
    with anyio.fail_after(40):
        await client.session.wait(sid)
    log = [e async for e in client.session.log(sid, follow=False)]
    success = [e for e in log if e.type == "session.tool.success"]
    assert success[0].data.content[0].text == "first\nsecond\n"
    assert "session.tool.progress" not in [e.type for e in log]


async def test_todowrite_publishes_the_new_list_on_the_instance_stream(client, provider):
    todos = [{"content": "write the test", "status": "in_progress", "priority": "high"},
             {"content": "run it", "status": "pending", "priority": "low"}]
    enqueue_call(provider, "todowrite", {"todos": todos}, "planned")
    stream = client.event.subscribe()
    sid = None
    seen: list[tuple[str, dict]] = []
    with anyio.fail_after(40):
        async for item in stream:
            if item.type == "server.connected":
                sid = (await client.session.create()).id
                await client.session.prompt(sid, prompt={"text": "plan it"})
            elif item.data.get("sessionID") == sid:
                seen.append((item.type, item.data))
                if item.type == "session.execution.succeeded":
                    break
    await stream.aclose()
    updates = [data for type_, data in seen if type_ == "todo.updated"]
    assert updates == [{"sessionID": sid, "todos": todos}]
    order = [type_ for type_, _ in seen]
    assert order.index("session.tool.called") < order.index("todo.updated") < order.index("session.tool.success")
    # live only: the durable record is the call, which the log and the messages already carry
    log = await durable_log(client, sid)
    assert "todo.updated" not in event_types(log)
    success = [e for e in log if e.type == "session.tool.success"]
    assert success[0].data.structured == {"todos": todos}
