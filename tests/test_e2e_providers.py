"""End to end over HTTP against `ocs serve`, once per wire protocol: the provider entry's `npm` picks Chat Completions,
Responses or Messages, each adapter talks to a loopback server speaking its protocol, and the client reads the
durable log. Also: the same scripted conversation gives the same durable events through all three, switching between
OpenAI and Anthropic mid-session keeps both conversations valid, and the model and provider routes."""

from __future__ import annotations

import json
from typing import Any

import pytest

from opencode_session.client import InvalidRequestError, OpenCodeClient, ProviderNotFoundError, ServiceUnavailableError
from opencode_session.schema.common import ModelRef
from tests.support import fake_openai as fake
from tests.support import fake_wire as wire
from tests.support.e2e import durable_log, prompt_and_wait
from tests.support.e2e import types as event_types
from tests.support.server import isolated_env, start_server

pytestmark = pytest.mark.anyio

RETRY_BASE_MS = 50
OPENAI_KEY = "sk-openai-e2e-secret"
ANTHROPIC_KEY = "sk-ant-e2e-secret"
COST = {"input": 1, "output": 2, "cache_read": 0.5, "cache_write": 4}
PROTOCOLS = ("chat", "responses", "messages")
# one provider per protocol; `openai` and `anthropic` are the bundled providers, pointed at the loopback server and
# keyed from the environment only
PROVIDER = {"chat": "loop", "responses": "openai", "messages": "anthropic"}


@pytest.fixture(scope="module")
def provider():
    server = fake.FakeOpenAI()
    server.keys = {"loop-key", OPENAI_KEY, ANTHROPIC_KEY}  # each in its protocol's scheme, as the services check
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def ocs(tmp_path_factory, provider):
    root = tmp_path_factory.mktemp("e2e-providers")
    env = isolated_env(root, OCS_RETRY_BASE_DELAY_MS=str(RETRY_BASE_MS), OPENAI_API_KEY=OPENAI_KEY,
                       ANTHROPIC_API_KEY=ANTHROPIC_KEY)
    (root / "config" / "opencode").mkdir(parents=True)
    model = {"fake-model": {"cost": COST, "limit": {"context": 100000, "output": 2000}, "variants": {
        "high": {"reasoningEffort": "high", "thinking": {"type": "enabled", "budgetTokens": 1024}}}},
        "stored-model": {"options": {"store": True}}}
    (root / "config" / "opencode" / "opencode.json").write_text(json.dumps({
        "model": "loop/fake-model",
        "agent": {"build": {"temperature": 0.25}},
        "provider": {
            "loop": {"npm": "@ai-sdk/openai-compatible",
                     "options": {"baseURL": provider.base_url, "apiKey": "loop-key"}, "models": model},
            "openai": {"options": {"baseURL": provider.base_url}, "models": model},
            "anthropic": {"options": {"baseURL": provider.base_url}, "models": model},
        },
    }))
    work = root / "work"
    work.mkdir()
    (work / "notes.txt").write_text("alpha\nbeta\n")
    srv = start_server(root, env=env, workdir=work)
    yield srv
    assert srv.stop() == 0, "".join(srv.stderr_lines)
    logs = "".join(srv.stderr_lines)
    assert OPENAI_KEY not in logs and ANTHROPIC_KEY not in logs


@pytest.fixture
async def client(ocs, provider):
    provider.requests.clear()
    provider.refused.clear()
    async with OpenCodeClient(ocs.url) as c:
        yield c
    assert provider.pending == 0, "a scripted provider response was never requested"


def ref(protocol: str) -> ModelRef:
    return ModelRef(providerID=PROVIDER[protocol], id="fake-model")


async def _run(client: OpenCodeClient, protocol: str, text: str) -> tuple[str, list[Any]]:
    sid = (await client.session.create(model=ref(protocol))).id
    await prompt_and_wait(client, sid, text)
    return sid, await durable_log(client, sid)


# --- scripts in each protocol's own wire shape ---------------------------------------------------------------


def text(protocol: str, *pieces: str, tokens: tuple[int, int] = (10, 5)) -> fake.StreamScript:
    if protocol == "chat":
        return fake.completion(fake.text_deltas(*pieces), usage=fake.usage_block(*tokens))
    if protocol == "responses":
        return wire.responses(wire.r_text(*pieces), usage=wire.r_usage(*tokens))
    return wire.messages(wire.m_text(*pieces), input_tokens=tokens[0], output_tokens=tokens[1])


def tool_call(protocol: str, call_id: str, name: str, *pieces: str) -> fake.StreamScript:
    if protocol == "chat":
        return fake.completion(fake.tool_call_deltas(0, call_id, name, *pieces), finish_reason="tool_calls")
    if protocol == "responses":
        return wire.responses(wire.r_call(call_id, name, *pieces))
    return wire.messages(wire.m_tool(call_id, name, *pieces))


def failure(protocol: str, status: int, kind: str, message: str, headers: dict[str, str] | None = None) -> Any:
    if protocol == "messages":
        return wire.anthropic_error(status, kind, message, headers)
    return fake.error(status, message, type=kind, headers=headers)


def tool_result_sent(protocol: str, body: dict[str, Any]) -> dict[str, Any]:
    """The tool result of the last turn as the request carried it."""
    if protocol == "chat":
        return body["messages"][-1]
    if protocol == "responses":
        return body["input"][-1]
    return body["messages"][-1]["content"][0]


# --- done means ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_plain_turn_records_usage_and_cost(client, provider, protocol):
    provider.enqueue(text(protocol, "Hel", "lo!", tokens=(1000, 500)))
    sid, log = await _run(client, protocol, "say hello")
    assert event_types(log)[-4:] == ["session.text.started", "session.text.ended", "session.step.ended",
                                     "session.execution.succeeded"]
    assistant = [m for m in await client.session.context(sid) if m.type == "assistant"][0]
    assert assistant.content[0].text == "Hello!" and assistant.finish == "stop"
    info = await client.session.get(sid)
    assert (info.tokens.input, info.tokens.output) == (1000, 500)
    assert info.cost == pytest.approx((1000 * 1 + 500 * 2) / 1e6)
    request = provider.requests[0]
    assert request.path == {"chat": "/v1/chat/completions", "responses": "/v1/responses",
                            "messages": "/v1/messages"}[protocol]
    key = {"chat": "loop-key", "responses": OPENAI_KEY, "messages": ANTHROPIC_KEY}[protocol]
    if protocol == "messages":
        assert request.headers["x-api-key"] == key and "authorization" not in request.headers
    else:
        assert request.headers["authorization"] == f"Bearer {key}"
    # the agent's temperature and the model's output limit reach the request
    assert request.json["temperature"] == 0.25
    limit_field = {"chat": "max_tokens", "responses": "max_output_tokens", "messages": "max_tokens"}[protocol]
    assert request.json[limit_field] == 2000


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_sessions_variant_reaches_the_request_in_the_protocols_encoding(client, provider, protocol):
    provider.enqueue(text(protocol, "ok"), text(protocol, "ok"))
    sid = (await client.session.create(model=ref(protocol).model_copy(update={"variant": "high"}))).id
    await prompt_and_wait(client, sid, "think hard")
    body = provider.requests[0].json
    if protocol == "chat":
        assert body["reasoning_effort"] == "high"
    elif protocol == "responses":
        assert body["reasoning"]["effort"] == "high"
    else:
        assert body["thinking"] == {"type": "enabled", "budget_tokens": 1024}
    # back to the default variant: none of it is sent
    await client.session.switch_model(sid, model=ref(protocol).model_copy(update={"variant": "default"}))
    await prompt_and_wait(client, sid, "quick one")
    assert "reasoning_effort" not in provider.requests[1].json and "thinking" not in provider.requests[1].json
    assert "effort" not in provider.requests[1].json.get("reasoning", {})


async def test_an_unknown_variant_is_a_bad_request(client):
    with pytest.raises(InvalidRequestError) as bad:
        await client.session.create(model=ref("messages").model_copy(update={"variant": "ultra"}))
    assert "ultra" in bad.value.message and "high" in bad.value.message


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_tool_turn_sends_the_result_back_in_the_protocols_shape(client, provider, protocol):
    provider.enqueue(tool_call(protocol, "call_1", "read", '{"path":', ' "notes.txt"}'),
                     text(protocol, "It says alpha and beta."))
    _, log = await _run(client, protocol, "what is in notes.txt?")
    types = event_types(log)
    assert types.index("session.tool.called") < types.index("session.tool.success")
    assert types.count("session.step.started") == 2 and types[-1] == "session.execution.succeeded"
    result = tool_result_sent(protocol, provider.requests[1].json)
    if protocol == "chat":
        assert result["role"] == "tool" and result["tool_call_id"] == "call_1" and "alpha" in result["content"]
    elif protocol == "responses":
        assert result["type"] == "function_call_output" and result["call_id"] == "call_1"
        assert "alpha" in result["output"]
    else:
        assert result["type"] == "tool_result" and result["tool_use_id"] == "call_1" and "alpha" in result["content"]


@pytest.mark.parametrize("store", [False, True])
async def test_a_responses_tool_turn_goes_on_with_items_as_the_store_option_keeps_them(client, provider, store):
    """Without `store` the service keeps no output items and refuses a request naming one: the turn's second request
    sends reasoning as its encrypted content and the call by its call ID. With `store`, items go by their IDs."""
    provider.enqueue(wire.responses(wire.r_reasoning("Read it first", encrypted="enc-turn"),
                                    wire.r_call("call_1", "read", '{"path": "notes.txt"}')),
                     wire.responses(wire.r_text("It says alpha.")))
    sid = (await client.session.create(model=ModelRef(providerID="openai",
                                                      id="stored-model" if store else "fake-model"))).id
    await prompt_and_wait(client, sid, "what is in notes.txt?")
    log = await durable_log(client, sid)
    assert event_types(log)[-1] == "session.execution.succeeded" and not provider.refused
    second = provider.requests[1].json
    assert second["store"] is store
    reasoning, call = (next(i for i in second["input"] if i.get("type") == kind)
                       for kind in ("reasoning", "function_call"))
    assert reasoning["encrypted_content"] == "enc-turn" and call["call_id"] == "call_1"
    if store:
        assert reasoning["id"].startswith("rs_") and call["id"].startswith("fc_")
    else:
        assert not [i for i in second["input"] if "id" in i]


@pytest.mark.parametrize(("protocol", "status", "kind"), [
    ("chat", 429, "rate_limit_error"), ("responses", 429, "rate_limit_error"), ("messages", 429, "rate_limit_error"),
    ("messages", 529, "overloaded_error"),
])
async def test_429_and_529_are_retried_after_the_providers_delay(client, provider, protocol, status, kind):
    provider.enqueue(failure(protocol, status, kind, "busy", {"retry-after-ms": "300"}), text(protocol, "ok"))
    _, log = await _run(client, protocol, "hi")
    [retry] = [e for e in log if e.type == "session.retry.scheduled"]
    expected = "provider.rate-limit" if status == 429 else "provider.internal"
    assert retry.data.error.type == expected and retry.data.error.status == status
    assert retry.data.at - retry.created > 200  # the provider's 300 ms, not the configured 50 ms
    assert event_types(log)[-1] == "session.execution.succeeded" and len(provider.requests) == 2


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_400_fails_visibly_without_retry_and_without_the_key(client, provider, protocol):
    key = {"chat": "loop-key", "responses": OPENAI_KEY, "messages": ANTHROPIC_KEY}[protocol]
    # some servers echo the credential they rejected: it never reaches the durable log
    provider.enqueue(failure(protocol, 400, "invalid_request_error", f"Unsupported parameter: 'temperature' ({key})"))
    sid, log = await _run(client, protocol, "hi")
    assert "session.retry.scheduled" not in event_types(log)
    [failed] = [e for e in log if e.type == "session.step.failed"]
    assert failed.data.error.type == "provider.invalid-request" and failed.data.error.status == 400
    assert "temperature" in failed.data.error.message
    assert event_types(log)[-1] == "session.execution.failed" and len(provider.requests) == 1
    assert key not in json.dumps([e.model_dump(mode="json") for e in log])


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_after_a_failed_step_the_next_prompt_is_answered(client, provider, protocol):
    provider.enqueue(failure(protocol, 400, "invalid_request_error", "Unsupported parameter"))
    sid, log = await _run(client, protocol, "hi")
    assert [e.data.error.status for e in log if e.type == "session.step.failed"] == [400]
    provider.enqueue(text(protocol, "Hello again."))
    await prompt_and_wait(client, sid, "are you there?")
    log = await durable_log(client, sid)
    assert event_types(log)[-1] == "session.execution.succeeded" and not provider.refused
    answer = [m for m in await client.session.context(sid) if m.type == "assistant"][-1]
    assert [c.text for c in answer.content] == ["Hello again."]


async def test_a_hosted_tool_result_settles_its_call(client, provider):
    provider.enqueue(wire.responses(wire.r_hosted("web_search_call", {"type": "search", "query": "opencode"}),
                                    wire.r_text("Found it.")))
    sid, log = await _run(client, "responses", "search the web")
    [called] = [e for e in log if e.type == "session.tool.called"]
    [success] = [e for e in log if e.type == "session.tool.success"]
    assert called.data.executed and called.data.name == "web_search_call"
    assert called.data.input == {"type": "search", "query": "opencode"}
    assert success.data.executed and success.data.result["status"] == "completed"
    assert "session.tool.failed" not in event_types(log) and event_types(log)[-1] == "session.execution.succeeded"
    # one Step: the provider ran the tool, there is nothing local to continue with
    assert event_types(log).count("session.step.started") == 1


def _comparable(log: list[Any]) -> list[tuple[str, Any]]:
    """Each durable event's type with what the conversation says (texts, tool names and inputs), without IDs,
    times and provider metadata."""
    out = []
    for e in log:
        data = e.data.model_dump() if hasattr(e.data, "model_dump") else {}
        said = {k: data[k] for k in ("text", "name", "input", "finish") if k in data}
        out.append((e.type, json.dumps(said, sort_keys=True)))
    return out


async def test_the_same_conversation_gives_the_same_durable_events_through_every_protocol(client, provider):
    logs = {}
    for protocol in PROTOCOLS:
        provider.enqueue(tool_call(protocol, "call_1", "read", '{"path": "notes.txt"}'),
                         tool_call(protocol, "call_2", "glob", '{"pattern": "*.txt"}'),
                         text(protocol, "Done: ", "alpha, beta."))
        _, log = await _run(client, protocol, "look around")
        logs[protocol] = _comparable(log)
    assert logs["chat"] == logs["responses"] == logs["messages"]
    assert [t for t, _ in logs["chat"]].count("session.step.started") == 3


async def test_switching_between_openai_and_anthropic_keeps_both_conversations_valid(client, provider):
    # turn 1 on OpenAI (Responses): reasoning with encrypted content, a tool call, an answer
    provider.enqueue(wire.responses(wire.r_reasoning("I should read it", encrypted="enc-openai"),
                                    wire.r_call("call_1", "read", '{"path": "notes.txt"}')),
                     wire.responses(wire.r_text("It says alpha.")))
    sid = (await client.session.create(model=ref("responses"))).id
    await prompt_and_wait(client, sid, "read notes.txt")
    # turn 2 on Anthropic: thinking with a signature, an answer
    await client.session.switch_model(sid, model=ref("messages"))
    provider.enqueue(wire.messages(wire.m_thinking("Recall", signature="sig-anthropic"), wire.m_text("Yes, alpha.")))
    await prompt_and_wait(client, sid, "sure?")
    # turn 3 back on OpenAI
    await client.session.switch_model(sid, model=ref("responses"))
    provider.enqueue(wire.responses(wire.r_text("Still alpha.")))
    await prompt_and_wait(client, sid, "and now?")
    assert event_types(await durable_log(client, sid)).count("session.execution.succeeded") == 3

    anthropic_body = provider.requests[2].json
    sent = json.dumps(anthropic_body)
    # OpenAI's encrypted reasoning never reaches Anthropic; its visible text does, as plain text
    assert "enc-openai" not in sent and "I should read it" in sent
    turns = anthropic_body["messages"]
    assert [t["role"] for t in turns] == ["user", "assistant", "user", "assistant", "user"]
    assert any(b["type"] == "tool_use" and b["id"] == "call_1" for b in turns[1]["content"])
    assert turns[2]["content"][0] == {**turns[2]["content"][0], "type": "tool_result", "tool_use_id": "call_1"}

    openai_body = provider.requests[3].json
    items = openai_body["input"]
    # the same provider and model again: its reasoning item comes back with its encrypted content
    reasoning = [i for i in items if i.get("type") == "reasoning"]
    assert len(reasoning) == 1 and reasoning[0]["encrypted_content"] == "enc-openai"
    calls = [i for i in items if i.get("type") == "function_call"]
    outputs = [i for i in items if i.get("type") == "function_call_output"]
    assert [c["call_id"] for c in calls] == [o["call_id"] for o in outputs] == ["call_1"]
    assert items.index(calls[0]) < items.index(outputs[0])
    # Anthropic's signed thinking is not continued natively on OpenAI: its text becomes plain assistant text
    assert "sig-anthropic" not in json.dumps(openai_body) and "Recall" in json.dumps(openai_body)


# --- the model and provider routes -----------------------------------------------------------------------------


async def test_model_and_provider_routes_list_the_catalog_without_keys(client, ocs):
    models = await client.model.list()
    ids = {(m.providerID, m.id) for m in models.data}
    assert {("loop", "fake-model"), ("openai", "fake-model"), ("anthropic", "fake-model")} <= ids
    assert ("openai", "gpt-4o") in ids and ("anthropic", "claude-sonnet-4-5") in ids  # bundled
    sonnet = next(m for m in models.data if (m.providerID, m.id) == ("anthropic", "claude-sonnet-4-5"))
    assert sonnet.capabilities.tools and "image" in sonnet.capabilities.input
    assert sonnet.limit.context == 200000 and sonnet.limit.output == 64000
    assert sonnet.cost[0].cache.read == pytest.approx(0.3) and sonnet.cost[0].cache.write == pytest.approx(3.75)
    assert sonnet.api.package == "@ai-sdk/anthropic" and sonnet.enabled
    assert {v.id for v in sonnet.variants} == {"high", "max"}
    released = [m.time.released for m in models.data]
    assert released == sorted(released, reverse=True)

    providers = await client.provider.list()
    assert {p.id for p in providers.data} >= {"loop", "openai", "anthropic"}
    openai = await client.provider.get("openai")
    assert openai.data.api.package == "@ai-sdk/openai" and not openai.data.disabled
    with pytest.raises(ProviderNotFoundError) as missing:
        await client.provider.get("nowhere")
    assert missing.value.providerID == "nowhere"

    raw = json.dumps([models.model_dump(mode="json"), providers.model_dump(mode="json")])
    for secret in (OPENAI_KEY, ANTHROPIC_KEY, "loop-key"):
        assert secret not in raw


async def test_catalog_routes_answer_503_for_a_configuration_they_cannot_read(client, tmp_path):
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "opencode.json").write_text("{not json")
    with pytest.raises(ServiceUnavailableError) as unavailable:
        await client.model.list(location={"directory": str(broken)})
    assert "configuration" in unavailable.value.message
    # another location still answers
    assert (await client.provider.list()).data
