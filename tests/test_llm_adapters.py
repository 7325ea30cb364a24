"""The OpenAI Responses and Anthropic Messages adapters against a loopback server speaking each wire protocol through
the official SDKs: text, tools, reasoning with its Native Continuation Metadata, usage, the request body each builds,
and failures (429 with retry headers, 500/529, 400, an error event after a 200, malformed and cut streams)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from opencode_session.core.llm import (
    AssistantMessage,
    FilePart,
    Finish,
    GenerationControls,
    InvalidProviderOutputError,
    InvalidProviderRequestError,
    LLMRequest,
    ProviderError,
    ProviderInternalError,
    Providers,
    RateLimitError,
    ReasoningDelta,
    ReasoningEnd,
    ReasoningPart,
    ReasoningStart,
    ResolvedModel,
    SystemUpdate,
    TextDelta,
    TextPart,
    ToolCall,
    ToolCallPart,
    ToolResultMessage,
    ToolSpec,
    TransportError,
    Usage,
    UserMessage,
)
from opencode_session.core.llm.anthropic_messages import AnthropicMessagesProvider
from opencode_session.core.llm.anthropic_messages import build_body as messages_build
from opencode_session.core.llm.openai_responses import OpenAIResponsesProvider
from opencode_session.core.llm.openai_responses import build_body as responses_build
from tests.support.fake_openai import FakeOpenAI, StreamScript, drop, error
from tests.support.fake_wire import (
    anthropic_error,
    m_redacted,
    m_text,
    m_thinking,
    m_tool,
    messages,
    messages_error_event,
    r_call,
    r_reasoning,
    r_text,
    r_usage,
    responses,
    responses_error_event,
)

pytestmark = pytest.mark.anyio

PROTOCOLS = ("responses", "messages")
READ = ToolSpec("read", "Read a file", {"type": "object", "properties": {"path": {"type": "string"}}})


@pytest.fixture
async def server():
    async with FakeOpenAI() as fake:
        yield fake


def model(base_url: str, protocol: str, **kw: Any) -> ResolvedModel:
    provider = kw.pop("provider", "anthropic" if protocol == "messages" else "openai")
    return ResolvedModel(provider, "fake-model", base_url, api_key="sk-test-key", protocol=protocol,  # type: ignore[arg-type]
                         **kw)


def adapter(base_url: str, protocol: str) -> Any:
    cls = OpenAIResponsesProvider if protocol == "responses" else AnthropicMessagesProvider
    return cls(base_url, "sk-test-key")


def request(base_url: str, protocol: str, *msgs: Any, **kw: Any) -> LLMRequest:
    return LLMRequest(model=kw.pop("model", None) or model(base_url, protocol), system=["You are a test agent."],
                      messages=list(msgs) or [UserMessage([TextPart("hello")])], **kw)


async def run(server: FakeOpenAI, protocol: str, *msgs: Any, **kw: Any) -> list[Any]:
    provider = adapter(server.base_url, protocol)
    try:
        return [e async for e in provider.stream(request(server.base_url, protocol, *msgs, **kw))]
    finally:
        await provider.aclose()


async def run_until_error(server: FakeOpenAI, protocol: str) -> tuple[list[Any], ProviderError]:
    events: list[Any] = []
    provider = adapter(server.base_url, protocol)
    try:
        with pytest.raises(ProviderError) as caught:
            async for event in provider.stream(request(server.base_url, protocol)):
                events.append(event)
    finally:
        await provider.aclose()
    return events, caught.value


def text_of(events: list[Any]) -> str:
    return "".join(e.delta for e in events if isinstance(e, TextDelta))


# ---------------------------------------------------------------------------------------------
# Successful streams.


async def test_responses_text_with_reasoning_keeps_encrypted_content_and_usage(server):
    server.enqueue(responses(r_reasoning("Think", "ing", encrypted="enc-abc"), r_text("Hel", "lo"),
                             usage=r_usage(1000, 300, cached=400, reasoning=100)))
    events = await run(server, "responses")
    assert text_of(events) == "Hello"
    assert "".join(e.delta for e in events if isinstance(e, ReasoningDelta)) == "Thinking"
    [end] = [e for e in events if isinstance(e, ReasoningEnd)]
    assert end.metadata == {"openai": {"itemId": end.id, "encryptedContent": "enc-abc"}}
    assert events[-1] == Finish("stop", Usage(input=600, output=200, reasoning=100, cache_read=400))
    body = server.requests[0].json
    assert server.requests[0].path == "/v1/responses"
    assert body["store"] is False and "previous_response_id" not in body
    assert body["instructions"] == "You are a test agent."
    assert body["input"] == [{"role": "user", "content": [{"type": "input_text", "text": "hello"}]}]


async def test_messages_text_with_thinking_keeps_signature_and_cache_usage(server):
    server.enqueue(messages(m_thinking("Let me ", "see", signature="sig-xyz"), m_redacted("opaque"),
                            m_text("Hi", " there"), input_tokens=50, output_tokens=20, cache_read=900,
                            cache_write=100))
    events = await run(server, "messages")
    assert text_of(events) == "Hi there"
    ends = [e for e in events if isinstance(e, ReasoningEnd)]
    assert [e.metadata for e in ends] == [{"anthropic": {"signature": "sig-xyz"}},
                                          {"anthropic": {"redactedData": "opaque"}}]
    assert events[-1] == Finish("stop", Usage(input=50, output=20, cache_read=900, cache_write=100))
    body = server.requests[0].json
    assert server.requests[0].path == "/v1/messages"
    # the stable prefix carries the prompt-cache breakpoint
    assert body["system"] == [{"type": "text", "text": "You are a test agent.", "cache_control": {"type": "ephemeral"}}]
    assert body["max_tokens"] > 0 and body["stream"] is True


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_tool_call_in_pieces_is_one_complete_call(server, protocol):
    if protocol == "responses":
        server.enqueue(responses(r_call("call_1", "read", '{"pa', 'th": "a.txt"}')))
    else:
        server.enqueue(messages(m_text("Reading."), m_tool("toolu_1", "read", '{"pa', 'th": "a.txt"}')))
    events = await run(server, protocol, tools=[READ])
    [call] = [e for e in events if isinstance(e, ToolCall)]
    assert (call.name, call.input) == ("read", {"path": "a.txt"})
    assert call.call_id == ("call_1" if protocol == "responses" else "toolu_1")
    assert isinstance(events[-1], Finish) and events[-1].reason == "tool-calls"


async def test_anthropic_refusal_and_context_window_stop_reasons(server):
    server.enqueue(messages(m_text("No."), stop_reason="refusal"),
                   messages(m_text("Trunc"), stop_reason="model_context_window_exceeded"))
    assert (await run(server, "messages"))[-1].reason == "content-filter"
    assert (await run(server, "messages"))[-1].reason == "length"


def _history() -> list[Any]:
    """A tool turn, then an Instruction Update, then a prompt: what each protocol must lower in its own shape."""
    return [
        UserMessage([TextPart("read a.txt")]),
        AssistantMessage([
            ReasoningPart("thinking", {"openai": {"itemId": "rs_9", "encryptedContent": "enc-9"},
                                       "anthropic": {"signature": "sig-9"}}),
            TextPart("Reading."),
            ToolCallPart("call_1", "read", {"path": "a.txt"}, {"openai": {"itemId": "fc_9"}}),
        ]),
        ToolResultMessage("call_1", "read", "contents of a"),
        SystemUpdate("Rules changed: be <brief> & kind"),
        UserMessage([TextPart("and now?")]),
    ]


async def test_responses_lowers_tool_results_reasoning_and_updates_natively(server):
    server.enqueue(responses(r_text("ok")))
    await run(server, "responses", *_history(), tools=[READ],
              controls=GenerationControls(temperature=0.3, max_output_tokens=77))
    body = server.requests[0].json
    # nothing is stored at the service, which refuses the IDs of items it did not keep: reasoning travels as its
    # encrypted content, the call by its call ID
    assert body["store"] is False
    assert body["input"] == [
        {"role": "user", "content": [{"type": "input_text", "text": "read a.txt"}]},
        {"type": "reasoning", "summary": [{"type": "summary_text", "text": "thinking"}], "encrypted_content": "enc-9"},
        {"role": "assistant", "content": "Reading."},
        {"type": "function_call", "call_id": "call_1", "name": "read", "arguments": '{"path": "a.txt"}'},
        {"type": "function_call_output", "call_id": "call_1", "output": "contents of a"},
        {"role": "developer", "content": "Rules changed: be <brief> & kind"},
        {"role": "user", "content": [{"type": "input_text", "text": "and now?"}]},
    ]
    assert body["tools"][0]["name"] == "read" and body["tools"][0]["type"] == "function"
    assert (body["temperature"], body["max_output_tokens"]) == (0.3, 77)


async def test_responses_without_store_replays_reasoning_with_no_encrypted_content_as_text(server):
    history = [UserMessage([TextPart("q")]),
               AssistantMessage([ReasoningPart("I pondered", {"openai": {"itemId": "rs_1"}}), TextPart("A")]),
               UserMessage([TextPart("q2")])]
    server.enqueue(responses(r_text("ok")))
    await run(server, "responses", *history)
    assert server.requests[0].json["input"][1:3] == [{"role": "assistant", "content": "I pondered"},
                                                     {"role": "assistant", "content": "A"}]


async def test_responses_with_store_names_the_items_the_service_kept(server):
    """With the `store` option the service keeps each answer's output items, and later requests name them."""
    server.enqueue(responses(r_reasoning("Read it", encrypted="enc-1"), r_call("call_1", "read", '{"path": "a"}')),
                   responses(r_text("done")))
    m = model(server.base_url, "responses", options={"store": True})
    first = await run(server, "responses", model=m, options=m.options, tools=[READ])
    [end] = [e for e in first if isinstance(e, ReasoningEnd)]
    [call] = [e for e in first if isinstance(e, ToolCall)]
    history = [UserMessage([TextPart("read a")]),
               AssistantMessage([ReasoningPart("Read it", end.metadata),
                                 ToolCallPart(call.call_id, call.name, call.input, call.metadata)]),
               ToolResultMessage("call_1", "read", "contents")]
    assert text_of(await run(server, "responses", *history, model=m, options=m.options, tools=[READ])) == "done"
    body = server.requests[1].json
    assert body["store"] is True and not server.refused
    assert [(i.get("type"), i.get("id")) for i in body["input"][1:3]] == [
        ("reasoning", end.metadata["openai"]["itemId"]), ("function_call", call.metadata["openai"]["itemId"])]


async def test_messages_lowers_tool_results_thinking_and_updates_natively(server):
    server.enqueue(messages(m_text("ok")))
    await run(server, "messages", *_history(), tools=[READ], controls=GenerationControls(temperature=0.3))
    body = server.requests[0].json
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "read a.txt"}]},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "thinking", "signature": "sig-9"},
            {"type": "text", "text": "Reading."},
            {"type": "tool_use", "id": "call_1", "name": "read", "input": {"path": "a.txt"}},
        ]},
        # the result first, then the update (wrapped and escaped) and the prompt, in one user turn
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "call_1", "content": "contents of a"},
            {"type": "text", "text": "<system-update>\nRules changed: be &lt;brief&gt; &amp; kind\n</system-update>"},
            {"type": "text", "text": "and now?"},
        ]},
    ]
    assert body["tools"] == [{"name": "read", "description": "Read a file", "input_schema": READ.parameters}]
    assert body["temperature"] == 0.3


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_reasoning_without_native_metadata_lowers_to_plain_text(server, protocol):
    """A reasoning part from another provider or model carries no metadata: its text survives as assistant text."""
    history = [UserMessage([TextPart("q")]), AssistantMessage([ReasoningPart("I pondered"), TextPart("A")]),
               UserMessage([TextPart("q2")])]
    server.enqueue(responses(r_text("ok")) if protocol == "responses" else messages(m_text("ok")))
    await run(server, protocol, *history)
    body = json.dumps(server.requests[0].json)
    assert "I pondered" in body
    assert "encrypted_content" not in body and "signature" not in body


async def test_anthropic_thinking_variant_option_is_encoded(server):
    server.enqueue(messages(m_text("ok")))
    m = model(server.base_url, "messages", options={"thinking": {"type": "enabled", "budgetTokens": 2048}})
    await run(server, "messages", model=m, options=m.options, controls=GenerationControls(temperature=0.2, top_k=5))
    body = server.requests[0].json
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert "temperature" not in body and "top_k" not in body  # the API refuses them alongside thinking


async def test_responses_reasoning_effort_option_is_encoded(server):
    server.enqueue(responses(r_text("ok")))
    await run(server, "responses", options={"reasoningEffort": "high"})
    body = server.requests[0].json
    assert body["reasoning"]["effort"] == "high"
    assert body["include"] == ["reasoning.encrypted_content"]


# ---------------------------------------------------------------------------------------------
# Failures.


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_429_carries_the_retry_delay(server, protocol):
    headers = {"retry-after-ms": "1500"}
    server.enqueue(error(429, "slow down", type="rate_limit_error", headers=headers) if protocol == "responses"
                   else anthropic_error(429, "rate_limit_error", "slow down", headers))
    _, failure = await run_until_error(server, protocol)
    assert isinstance(failure, RateLimitError) and failure.retryable
    assert failure.retry_after_ms == 1500


@pytest.mark.parametrize(("protocol", "status"), [("responses", 500), ("messages", 500), ("messages", 529)])
async def test_server_errors_and_overload_are_retryable(server, protocol, status):
    server.enqueue(error(status, "boom", type="server_error") if protocol == "responses"
                   else anthropic_error(status, "overloaded_error", "Overloaded"))
    _, failure = await run_until_error(server, protocol)
    assert isinstance(failure, ProviderInternalError) and failure.retryable


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_400_is_not_retryable(server, protocol):
    server.enqueue(error(400, "bad field", type="invalid_request_error") if protocol == "responses"
                   else anthropic_error(400, "invalid_request_error", "bad field"))
    _, failure = await run_until_error(server, protocol)
    assert isinstance(failure, InvalidProviderRequestError) and not failure.retryable
    assert "bad field" in failure.message


async def test_anthropic_error_event_after_200_is_classified(server):
    server.enqueue(messages_error_event("overloaded_error", "Overloaded"))
    _, failure = await run_until_error(server, "messages")
    assert isinstance(failure, ProviderInternalError) and failure.retryable


async def test_responses_error_event_after_200_is_classified(server):
    server.enqueue(responses_error_event("rate_limit_exceeded", "Too many"))
    _, failure = await run_until_error(server, "responses")
    assert isinstance(failure, RateLimitError)


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_malformed_stream_is_invalid_output(server, protocol):
    event = "response.output_text.delta" if protocol == "responses" else "content_block_delta"
    server.enqueue(StreamScript([(event, "{not json")], done=False))
    _, failure = await run_until_error(server, protocol)
    assert isinstance(failure, InvalidProviderOutputError)


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_stream_cut_before_output(server, protocol):
    server.enqueue(drop())
    events, failure = await run_until_error(server, protocol)
    assert isinstance(failure, TransportError) and failure.retryable and events == []


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_stream_cut_after_output_keeps_what_arrived(server, protocol):
    script = (responses(r_text("partial", " more"), drop_after=3) if protocol == "responses"
              else messages(m_text("partial", " more"), drop_after=3))
    server.enqueue(script)
    events, failure = await run_until_error(server, protocol)
    assert isinstance(failure, TransportError)
    assert text_of(events) == "partial"


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_stream_ending_without_finish_is_a_transport_failure(server, protocol):
    server.enqueue(responses(r_text("half"), finish=False) if protocol == "responses"
                   else messages(m_text("half"), finish=False))
    _, failure = await run_until_error(server, protocol)
    assert isinstance(failure, TransportError)


# ---------------------------------------------------------------------------------------------
# Clients and headers.


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_only_configured_headers_and_the_key_reach_the_server(server, protocol, monkeypatch):
    """The SDKs read extra headers and credentials from the environment whatever server they talk to."""
    monkeypatch.setenv("ANTHROPIC_CUSTOM_HEADERS", "X-Leak: anthropic")
    monkeypatch.setenv("OPENAI_CUSTOM_HEADERS", "X-Leak: openai")
    monkeypatch.setenv("OPENAI_ORG_ID", "org-leak")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-env-leak")
    server.enqueue(responses(r_text("ok")) if protocol == "responses" else messages(m_text("ok")))
    providers = Providers()
    m = model(server.base_url, protocol, headers={"X-Team": "blue"})
    try:
        [e async for e in providers.for_model(m).stream(request(server.base_url, protocol, model=m))]
    finally:
        await providers.aclose()
    headers = server.requests[0].headers
    assert headers["x-team"] == "blue"
    if protocol == "messages":
        assert headers["x-api-key"] == "sk-test-key" and "authorization" not in headers
    else:
        assert headers["authorization"] == "Bearer sk-test-key"
    assert "x-leak" not in headers and "openai-organization" not in headers
    assert "sk-env-leak" not in json.dumps(headers)


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_keyless_server_gets_no_authorization_header(server, protocol):
    server.enqueue(responses(r_text("ok")) if protocol == "responses" else messages(m_text("ok")))
    cls = OpenAIResponsesProvider if protocol == "responses" else AnthropicMessagesProvider
    provider = cls(server.base_url, None)
    try:
        [e async for e in provider.stream(request(server.base_url, protocol))]
    finally:
        await provider.aclose()
    assert "authorization" not in server.requests[0].headers and "x-api-key" not in server.requests[0].headers


async def test_providers_share_one_http_client_per_provider_and_close_it(server):
    providers = Providers()
    a = providers.for_model(model(server.base_url, "responses"))
    b = providers.for_model(model(server.base_url, "chat"))
    assert a is not b and a is providers.for_model(model(server.base_url, "responses"))
    assert a._client._client is b._client._client  # one connection pool for the provider
    await providers.aclose()
    assert a._client._client.is_closed
    with pytest.raises(RuntimeError):
        providers.for_model(model(server.base_url, "responses"))


async def test_reasoning_start_precedes_text(server):
    server.enqueue(messages(m_thinking("a"), m_text("b")))
    events = await run(server, "messages")
    kinds = [type(e) for e in events if isinstance(e, (ReasoningStart, TextDelta))]
    assert kinds == [ReasoningStart, TextDelta]


def test_loaded_attachments_are_sent_in_each_protocols_shape(tmp_path):
    """Bytes come from `FilePart.data` (loaded by the runtime); the file named by the URI is never read here."""
    image = FilePart(uri=(tmp_path / "missing.png").as_uri(), mime="image/png", name="p.png", data=b"\x89PNG")
    pdf = FilePart(uri="https://example.com/doc.pdf", mime="application/pdf")
    note = FilePart(uri="file:///nowhere/n.txt", mime="text/plain", name="n.txt", data=b"hello notes")
    user = UserMessage([TextPart("see these"), image, pdf, note])
    encoded = "iVBORw=="
    responses_body = responses_build(request("http://x/v1", "responses", user))
    assert responses_body["input"][0]["content"] == [
        {"type": "input_text", "text": "see these"},
        {"type": "input_image", "image_url": f"data:image/png;base64,{encoded}"},
        {"type": "input_file", "file_url": "https://example.com/doc.pdf"},
        {"type": "input_text", "text": "[Attached file n.txt (text/plain)]\nhello notes"},
    ]
    messages_body = messages_build(request("http://x/v1", "messages", user))
    assert messages_body["messages"][0]["content"] == [
        {"type": "text", "text": "see these"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": encoded}},
        {"type": "document", "source": {"type": "url", "url": "https://example.com/doc.pdf"}},
        {"type": "text", "text": "[Attached file n.txt (text/plain)]\nhello notes"},
    ]
    # an attachment the runtime did not load becomes a note, not a disk read or a failed Step
    unloaded = UserMessage([FilePart(uri=(tmp_path / "secret.png").as_uri(), mime="image/png")])
    (tmp_path / "secret.png").write_bytes(b"not to be read")
    body = json.dumps(messages_build(request("http://x/v1", "messages", unloaded)))
    assert "could not be read" in body and "bm90IHRv" not in body


def test_tool_result_images_are_sent_in_each_protocols_shape():
    """A tool result's images: inside the result where the protocol allows it (Messages, Responses), else (Chat
    Completions, whose tool messages hold text only) in a user message right after the results."""
    from opencode_session.core.llm.openai_chat import build_body as chat_build

    png = FilePart(uri="data:image/png;base64,iVBORw==", mime="image/png")
    history = [
        UserMessage([TextPart("look")]),
        AssistantMessage([ToolCallPart("c1", "shot", {}), ToolCallPart("c2", "echo", {})]),
        ToolResultMessage("c1", "shot", "[image image/png, about 6 bytes]", files=(png,)),
        ToolResultMessage("c2", "echo", "plain"),
        UserMessage([TextPart("Attached image(s) from tool result:"), png], tool_files=True),
    ]
    responses_body = responses_build(request("http://x/v1", "responses", *history))
    assert responses_body["input"][3:] == [
        {"type": "function_call_output", "call_id": "c1", "output": [
            {"type": "input_text", "text": "[image image/png, about 6 bytes]"},
            {"type": "input_image", "image_url": "data:image/png;base64,iVBORw=="}]},
        {"type": "function_call_output", "call_id": "c2", "output": "plain"},
    ]
    messages_body = messages_build(request("http://x/v1", "messages", *history))
    assert messages_body["messages"][2] == {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "c1", "content": [
            {"type": "text", "text": "[image image/png, about 6 bytes]"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw=="}}]},
        {"type": "tool_result", "tool_use_id": "c2", "content": "plain"},
    ]}
    chat_body = chat_build(request("http://x/v1", "chat", *history))
    assert chat_body["messages"][3:] == [
        {"role": "tool", "tool_call_id": "c1", "content": "[image image/png, about 6 bytes]"},
        {"role": "tool", "tool_call_id": "c2", "content": "plain"},
        {"role": "user", "content": [
            {"type": "text", "text": "Attached image(s) from tool result:"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw=="}}]},
    ]
