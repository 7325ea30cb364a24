"""The OpenAI Chat Completions adapter, run through the official SDK against a loopback server that
speaks the streaming wire protocol: events, usage and cost, request lowering, and typed failures."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import pytest

from opencode_session.core.config import Config
from opencode_session.core.llm import (
    AssistantMessage,
    AuthenticationError,
    ContentPolicyError,
    ContextOverflowError,
    FilePart,
    Finish,
    GenerationControls,
    InvalidProviderOutputError,
    InvalidProviderRequestError,
    LLMRequest,
    ModelCost,
    ProviderError,
    ProviderInternalError,
    Providers,
    QuotaExceededError,
    RateLimitError,
    ReasoningDelta,
    ReasoningEnd,
    ReasoningPart,
    ReasoningStart,
    ResolvedModel,
    SystemUpdate,
    TextDelta,
    TextEnd,
    TextPart,
    TextStart,
    ToolCall,
    ToolCallPart,
    ToolInputDelta,
    ToolInputEnd,
    ToolInputStart,
    ToolResultMessage,
    ToolSpec,
    TransportError,
    Usage,
    UserMessage,
    resolve_model,
    step_cost,
)
from opencode_session.core.llm.errors import parse_retry_after_ms, redact
from opencode_session.core.llm.openai_chat import OpenAIChatProvider, build_body, quirks_for
from opencode_session.schema.common import ModelRef
from tests.support.fake_openai import (
    FakeOpenAI,
    chunk,
    completion,
    drop,
    error,
    raw_stream,
    reasoning_deltas,
    text_deltas,
    tool_call_deltas,
    usage_block,
)

pytestmark = pytest.mark.anyio

COST = ModelCost(input=2.0, output=8.0, cache_read=0.5, cache_write=0.0)


@pytest.fixture
async def server():
    async with FakeOpenAI() as fake:
        yield fake


@pytest.fixture
async def provider(server):
    adapter = OpenAIChatProvider(server.base_url, "sk-test-key")
    yield adapter
    await adapter.aclose()


def make_model(base_url: str) -> ResolvedModel:
    return ResolvedModel(
        provider_id="local", model_id="fake-model", base_url=base_url, api_key="sk-test-key", cost=COST
    )


def make_request(base_url: str, *messages: Any, **kw: Any) -> LLMRequest:
    msgs = list(messages) or [UserMessage([TextPart("hello")])]
    return LLMRequest(
        model=kw.pop("model", None) or make_model(base_url),
        system=kw.pop("system", ["You are a test agent."]),
        messages=msgs,
        tools=kw.pop("tools", []),
        tool_choice=kw.pop("tool_choice", "auto"),
        **kw,
    )


async def collect(provider: Any, request: LLMRequest) -> list[Any]:
    return [event async for event in provider.stream(request)]


async def collect_until_error(provider: Any, request: LLMRequest) -> tuple[list[Any], ProviderError]:
    events: list[Any] = []
    with pytest.raises(ProviderError) as caught:
        async for event in provider.stream(request):
            events.append(event)
    return events, caught.value


# ---------------------------------------------------------------------------------------------
# Successful streams.


async def test_text_answer_through_the_catalog_reports_usage_and_cost(server, monkeypatch):
    config = Config.model_validate(
        {
            "model": "local/fake-model",
            "provider": {
                "local": {
                    "npm": "@ai-sdk/openai-compatible",
                    "options": {"baseURL": server.base_url},
                    "models": {
                        "fake-model": {
                            "limit": {"context": 32000, "output": 4000},
                            "cost": {"input": 2, "output": 8, "cache_read": 0.5},
                        }
                    },
                }
            },
        }
    )
    model = resolve_model(config, None, env={"LOCAL_API_KEY": "sk-from-env"})
    providers = Providers()
    provider = providers.for_model(model)
    server.enqueue(
        completion(text_deltas("Hello", ", ", "world"),
                   usage=usage_block(1000, 200, cached_tokens=400, reasoning_tokens=50))
    )
    events = await collect(provider, make_request(server.base_url))
    await providers.aclose()

    assert events[:5] == [
        TextStart("text-0"),
        TextDelta("text-0", "Hello"),
        TextDelta("text-0", ", "),
        TextDelta("text-0", "world"),
        TextEnd("text-0"),
    ]
    finish = events[-1]
    assert finish == Finish("stop", Usage(input=600, output=150, reasoning=50, cache_read=400, cache_write=0))
    assert step_cost(finish.usage, model.cost) == pytest.approx((600 * 2 + 200 * 8 + 400 * 0.5) / 1e6)
    assert model.context_limit == 32000 and model.output_limit == 4000
    [sent] = server.requests
    assert sent.headers["authorization"] == "Bearer sk-from-env"
    assert sent.json["stream"] is True and sent.json["stream_options"] == {"include_usage": True}
    assert sent.json["model"] == "fake-model"


async def test_reasoning_deltas_become_a_reasoning_block_before_the_text(server, provider):
    server.enqueue(
        completion(
            reasoning_deltas("Let me ", "think."),
            text_deltas("Answer."),
            usage=usage_block(10, 30, reasoning_tokens=20),
        ),
        # Ollama and OpenRouter name the field `reasoning`.
        completion(reasoning_deltas("Hmm.", field="reasoning"), text_deltas("Ok.")),
    )
    events = await collect(provider, make_request(server.base_url))
    assert events == [
        ReasoningStart("reasoning-0"),
        ReasoningDelta("reasoning-0", "Let me "),
        ReasoningDelta("reasoning-0", "think."),
        ReasoningEnd("reasoning-0", None),
        TextStart("text-1"),
        TextDelta("text-1", "Answer."),
        TextEnd("text-1"),
        Finish("stop", Usage(input=10, output=10, reasoning=20)),
    ]
    events = await collect(provider, make_request(server.base_url))
    assert [type(e).__name__ for e in events] == [
        "ReasoningStart", "ReasoningDelta", "ReasoningEnd", "TextStart", "TextDelta", "TextEnd", "Finish",
    ]
    assert events[1].delta == "Hmm."
    assert events[-1] == Finish("stop", Usage())  # no usage chunk: zeros, not a failure


async def test_tool_call_arguments_arriving_in_pieces(server, provider):
    server.enqueue(
        completion(
            text_deltas("Reading it."),
            tool_call_deltas(0, "call_abc", "read", '{"pa', 'th": "src/', 'app.py"}'),
            tool_call_deltas(1, "call_def", "glob", '{"pattern"', ': "*.md"}'),
            finish_reason="tool_calls",
        )
    )
    events = await collect(provider, make_request(server.base_url))
    assert events == [
        TextStart("text-0"),
        TextDelta("text-0", "Reading it."),
        TextEnd("text-0"),  # the text block closes before the tool input starts
        ToolInputStart("call_abc", "read"),
        ToolInputDelta("call_abc", '{"pa'),
        ToolInputDelta("call_abc", 'th": "src/'),
        ToolInputDelta("call_abc", 'app.py"}'),
        ToolInputStart("call_def", "glob"),
        ToolInputDelta("call_def", '{"pattern"'),
        ToolInputDelta("call_def", ': "*.md"}'),
        ToolInputEnd("call_abc"),
        ToolCall("call_abc", "read", {"path": "src/app.py"}, raw_input='{"path": "src/app.py"}'),
        ToolInputEnd("call_def"),
        ToolCall("call_def", "glob", {"pattern": "*.md"}, raw_input='{"pattern": "*.md"}'),
        Finish("tool-calls", Usage()),
    ]


async def test_unparseable_tool_arguments_still_produce_a_complete_call(server, provider):
    server.enqueue(
        completion(tool_call_deltas(0, "call_1", "bash", '{"command": "ls"'), finish_reason="tool_calls"),
        # Some compatible servers say "stop" even though they called a tool.
        completion(tool_call_deltas(0, "call_2", "list"), finish_reason="stop"),
    )
    events = await collect(provider, make_request(server.base_url))
    [call] = [e for e in events if isinstance(e, ToolCall)]
    assert call.call_id == "call_1" and call.input == {}
    assert call.input_error and "not valid JSON" in call.input_error
    assert call.raw_input == '{"command": "ls"'

    events = await collect(provider, make_request(server.base_url))
    [call] = [e for e in events if isinstance(e, ToolCall)]
    assert call.input == {} and call.input_error is None  # no arguments at all is an empty object
    assert events[-1].reason == "tool-calls"


async def test_content_filter_finish_keeps_the_partial_text(server, provider):
    server.enqueue(completion(text_deltas("Part"), finish_reason="content_filter"))
    events = await collect(provider, make_request(server.base_url))
    assert TextDelta("text-0", "Part") in events
    assert events[-1].reason == "content-filter"


# ---------------------------------------------------------------------------------------------
# What goes on the wire.


async def test_wire_request_carries_system_updates_tools_and_results(server, provider, tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("remember the milk")
    png = "data:image/png;base64," + base64.b64encode(b"\x89PNG fake").decode()
    request = make_request(
        server.base_url,
        UserMessage([TextPart("Fix the bug")]),
        SystemUpdate("Today's date is now: <Tue> & counting"),
        AssistantMessage(
            [
                ReasoningPart("I should look first."),
                TextPart("Looking."),
                ToolCallPart("call_1", "read", {"path": "a.py"}),
            ]
        ),
        ToolResultMessage("call_1", "read", "print('hi')", is_error=False),
        SystemUpdate("The environment changed."),
        UserMessage([TextPart("See attachments"), FilePart(png, "image/png", "shot.png"),
                     FilePart(notes.as_uri(), "text/plain", "notes.txt", data=notes.read_bytes()),
                     # never loaded by the runtime: the adapter does not go and read the disk itself
                     FilePart(notes.as_uri(), "text/plain", "unloaded.txt")]),
        system=["You are a test agent.", "Baseline instructions."],
        tools=[ToolSpec("read", "Read a file", {"type": "object", "properties": {"path": {"type": "string"}}})],
        tool_choice="none",
        controls=GenerationControls(max_output_tokens=512),
        prompt_cache_key="session-1",
    )
    server.enqueue(completion(text_deltas("ok")))
    await collect(provider, request)

    body = server.requests[0].json
    messages = body["messages"]
    assert messages[0] == {"role": "system", "content": "You are a test agent.\n\nBaseline instructions."}
    assert messages[1] == {
        "role": "user",
        "content": "Fix the bug\n<system-update>\nToday's date is now: &lt;Tue&gt; &amp; counting\n</system-update>",
    }
    assert messages[2]["role"] == "assistant"
    assert messages[2]["content"] == "I should look first.\nLooking."
    assert messages[2]["tool_calls"] == [
        {"id": "call_1", "type": "function", "function": {"name": "read", "arguments": '{"path": "a.py"}'}}
    ]
    assert messages[3] == {"role": "tool", "tool_call_id": "call_1", "content": "print('hi')"}
    # No user message precedes this update, so it becomes a user message of its own.
    assert messages[4] == {"role": "user", "content": "<system-update>\nThe environment changed.\n</system-update>"}
    attachments = messages[5]["content"]
    assert attachments[0] == {"type": "text", "text": "See attachments"}
    assert attachments[1] == {"type": "image_url", "image_url": {"url": png}}
    assert attachments[2]["type"] == "text" and "remember the milk" in attachments[2]["text"]
    assert attachments[3] == {"type": "text",
                              "text": "[Attached file unloaded.txt could not be read: the file was not loaded]"}
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "read",
                "description": "Read a file",
                "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
            },
        }
    ]
    assert body["tool_choice"] == "none"
    assert body["max_tokens"] == 512
    assert "prompt_cache_key" not in body  # compatible servers may reject unknown fields


def test_openai_host_gets_its_own_parameters():
    model = ResolvedModel("openai", "gpt-4.1", "https://api.openai.com/v1", api_key="sk")
    request = LLMRequest(model, ["sys"], [UserMessage([TextPart("hi")])], [], "auto",
                         controls=GenerationControls(max_output_tokens=100), prompt_cache_key="abc")
    body = build_body(request, quirks=quirks_for(model.base_url))
    assert body["prompt_cache_key"] == "abc"
    assert body["max_completion_tokens"] == 100 and "max_tokens" not in body
    assert "tools" not in body and "tool_choice" not in body


async def test_keyless_server_gets_no_authorization_header(server):
    keyless = OpenAIChatProvider(server.base_url, None)
    server.enqueue(completion(text_deltas("hi")))
    await collect(keyless, make_request(server.base_url))
    await keyless.aclose()
    assert "authorization" not in server.requests[0].headers


async def test_only_what_the_provider_entry_names_reaches_the_server(server, monkeypatch):
    # what the SDK would otherwise pick up from the environment, whatever server it talks to
    monkeypatch.setenv("OPENAI_ORG_ID", "org-from-env")
    monkeypatch.setenv("OPENAI_PROJECT_ID", "proj-from-env")
    monkeypatch.setenv("OPENAI_CUSTOM_HEADERS", "X-From-Env: leaked\nAuthorization: Bearer env-secret")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env-secret")
    monkeypatch.setenv("OPENAI_ADMIN_KEY", "admin-env-secret")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    for key, headers in (("sk-entry", {"X-Team": "core"}), (None, {})):
        adapter = OpenAIChatProvider(server.base_url, key, headers=headers)
        server.enqueue(completion(text_deltas("hi")))
        await collect(adapter, make_request(server.base_url))
        await adapter.aclose()
    named, keyless = (r.headers for r in server.requests)
    assert named["authorization"] == "Bearer sk-entry" and named["x-team"] == "core"
    assert "authorization" not in keyless
    for sent in (named, keyless):
        assert not {"openai-organization", "openai-project", "x-from-env"} & set(sent), sent
        assert not any("env" in value for value in sent.values()), sent


# ---------------------------------------------------------------------------------------------
# Typed failures. The server must see exactly one request each time: the SDK never retries.


async def test_rate_limit_with_retry_after_seconds(server, provider):
    server.enqueue(error(429, "Rate limit reached", type="requests", code="rate_limit_exceeded",
                         headers={"retry-after": "3"}))
    events, err = await collect_until_error(provider, make_request(server.base_url))
    assert events == []
    assert isinstance(err, RateLimitError) and err.retryable
    assert err.status == 429 and err.retry_after_ms == 3000
    assert err.to_session_error().type == "provider.rate-limit"
    assert err.to_session_error().status == 429
    assert len(server.requests) == 1


async def test_retry_after_ms_header_wins(server, provider):
    server.enqueue(error(429, "slow down", headers={"retry-after-ms": "1500", "retry-after": "9"}))
    _, err = await collect_until_error(provider, make_request(server.base_url))
    assert isinstance(err, RateLimitError) and err.retry_after_ms == 1500
    assert len(server.requests) == 1


def test_retry_after_http_date():
    now = datetime(2030, 1, 1, tzinfo=UTC)
    header = format_datetime(now + timedelta(seconds=7), usegmt=True)
    assert parse_retry_after_ms({"Retry-After": header}, now=now.timestamp()) == pytest.approx(7000)
    assert parse_retry_after_ms({"retry-after": "soon"}) is None
    assert parse_retry_after_ms({}) is None


@pytest.mark.parametrize("status", [500, 503, 529])
async def test_server_errors_are_retryable_internal_failures(server, provider, status):
    server.enqueue(error(status, "The server had an error", type="server_error", headers={"retry-after": "2"}))
    _, err = await collect_until_error(provider, make_request(server.base_url))
    assert isinstance(err, ProviderInternalError) and err.retryable
    assert err.status == status and err.retry_after_ms == 2000
    assert err.to_session_error().type == "provider.internal"
    assert len(server.requests) == 1


async def test_bad_key_is_an_authentication_failure(server, provider):
    server.enqueue(error(401, "Incorrect API key provided", type="invalid_request_error", code="invalid_api_key"))
    _, err = await collect_until_error(provider, make_request(server.base_url))
    assert isinstance(err, AuthenticationError) and not err.retryable
    assert err.to_session_error().model_dump() == {
        "type": "provider.auth", "message": "Incorrect API key provided", "status": 401,
    }
    assert len(server.requests) == 1


async def test_context_length_exceeded_is_an_overflow(server, provider):
    server.enqueue(
        error(400, "This model's maximum context length is 8192 tokens. "
                   "However, your messages resulted in 9000 tokens.",
              type="invalid_request_error", code="context_length_exceeded"),
        error(400, "Invalid value for 'tool_choice'.", type="invalid_request_error"),
    )
    _, err = await collect_until_error(provider, make_request(server.base_url))
    assert isinstance(err, ContextOverflowError) and isinstance(err, InvalidProviderRequestError)
    assert err.status == 400 and not err.retryable
    assert err.to_session_error().type == "provider.context-overflow"

    _, err = await collect_until_error(provider, make_request(server.base_url))
    assert type(err) is InvalidProviderRequestError
    assert err.to_session_error().type == "provider.invalid-request"
    assert len(server.requests) == 2


async def test_content_policy_rejection(server, provider):
    server.enqueue(error(400, "Your request was rejected by our safety system", type="invalid_request_error",
                         code="content_policy_violation"))
    _, err = await collect_until_error(provider, make_request(server.base_url))
    assert isinstance(err, ContentPolicyError) and not err.retryable
    assert err.to_session_error().type == "provider.content-filter"


async def test_insufficient_quota_is_not_a_rate_limit(server, provider):
    server.enqueue(error(429, "You exceeded your current quota", type="insufficient_quota", code="insufficient_quota"))
    _, err = await collect_until_error(provider, make_request(server.base_url))
    assert isinstance(err, QuotaExceededError) and not err.retryable
    assert err.status == 429 and err.to_session_error().type == "provider.quota"
    assert len(server.requests) == 1


async def test_connection_dropped_before_the_first_byte(server, provider):
    server.enqueue(drop())
    events, err = await collect_until_error(provider, make_request(server.base_url))
    assert events == []
    assert isinstance(err, TransportError) and err.retryable and err.status is None
    assert len(server.requests) == 1


async def test_connection_dropped_after_the_first_token(server, provider):
    # Frame 1 is the role chunk, frame 2 the first token; then the socket closes mid-body.
    server.enqueue(completion(text_deltas("Hel", "lo"), drop_after=2))
    events, err = await collect_until_error(provider, make_request(server.base_url))
    assert events == [TextStart("text-0"), TextDelta("text-0", "Hel")]
    assert isinstance(err, TransportError)
    assert "mid-stream" in err.message
    assert len(server.requests) == 1


async def test_stream_that_ends_without_finishing_is_a_transport_failure(server, provider):
    server.enqueue(completion(text_deltas("Hel"), finish_reason=None))
    events, err = await collect_until_error(provider, make_request(server.base_url))
    assert TextDelta("text-0", "Hel") in events
    assert isinstance(err, TransportError)


async def test_malformed_chunk_is_invalid_output(server, provider):
    server.enqueue(raw_stream(json.dumps(chunk({"content": "ok"})), '{"choices": [ broken'))
    events, err = await collect_until_error(provider, make_request(server.base_url))
    assert TextDelta("text-0", "ok") in events
    assert isinstance(err, InvalidProviderOutputError) and not err.retryable
    assert err.to_session_error().type == "provider.invalid-output"


async def test_error_event_inside_the_stream_is_typed(server, provider):
    server.enqueue(raw_stream(json.dumps(chunk({"content": "ok"})),
                              json.dumps({"error": {"message": "Rate limited upstream", "code": 429}})))
    _, err = await collect_until_error(provider, make_request(server.base_url))
    assert isinstance(err, RateLimitError) and err.status == 429


async def test_unreachable_server_is_a_transport_failure(server):
    server.stop()  # nothing listens on the port any more
    gone = OpenAIChatProvider(server.base_url, "sk")
    _, err = await collect_until_error(gone, make_request(server.base_url))
    await gone.aclose()
    assert isinstance(err, TransportError)
    # the user learns which address failed and why
    assert f"Could not reach the provider at {server.base_url}" in err.message and "Connect" in err.message


async def test_model_ref_overrides_the_configured_default(server):
    config = Config.model_validate(
        {"model": "local/a",
         "provider": {"local": {"options": {"baseURL": server.base_url}, "models": {"b": {"id": "real-b"}}}}}
    )
    model = resolve_model(config, ModelRef(providerID="local", id="b"), env={})
    assert (model.model_id, model.wire_model, model.api_key) == ("b", "real-b", None)
    server.enqueue(completion(text_deltas("hi")))
    providers = Providers()
    await collect(providers.for_model(model), make_request(server.base_url, model=model))
    await providers.aclose()
    assert server.requests[0].json["model"] == "real-b"


def test_provider_error_messages_are_redacted_of_credentials():
    text = "Invalid key sk-live-123456789 (Authorization: Bearer abc.def-ghi_jkl=) and basic dXNlcjpwYXNz; short k1"
    cleaned = redact(text, ["sk-live-123456789", "k1", ""])
    assert cleaned == ("Invalid key [REDACTED] (Authorization: Bearer [REDACTED]) and basic [REDACTED]; short k1")
    error = AuthenticationError("bad key sk-live-123456789", status=401).redacted(["sk-live-123456789"])
    assert isinstance(error, AuthenticationError) and error.status == 401
    assert error.to_session_error().message == "bad key [REDACTED]" and str(error) == "bad key [REDACTED]"
