"""Recorded provider exchanges: each adapter replays its cassette (tests/cassettes/<protocol>.json: text with
reasoning and usage, a tool call, a 429 with a retry delay, a 400) with no network, and a fresh recording against the
loopback server replays to the same events byte for byte. `OCS_RECORD_CASSETTES=1` rewrites the committed cassettes
from the scripts below."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from opencode_session.core.llm import (
    Finish,
    InvalidProviderRequestError,
    LLMRequest,
    ProviderError,
    Providers,
    RateLimitError,
    ReasoningDelta,
    ResolvedModel,
    TextDelta,
    TextPart,
    ToolCall,
    ToolSpec,
    Usage,
    UserMessage,
)
from tests.support import fake_openai as fake
from tests.support import fake_wire as wire
from tests.support.cassette import CassetteTransport

pytestmark = pytest.mark.anyio

CASSETTES = Path(__file__).parent / "cassettes"
PROTOCOLS = ("chat", "responses", "messages")
READ = ToolSpec("read", "Read a file", {"type": "object", "properties": {"filePath": {"type": "string"}}})


def scripts(protocol: str) -> list[Any]:
    """What the server answers, in the protocol's own wire shape: text after reasoning with usage, a tool call, a
    429 with a retry delay, a 400."""
    if protocol == "chat":
        return [fake.completion(fake.reasoning_deltas("Thinking"), fake.text_deltas("Hel", "lo"),
                                usage=fake.usage_block(100, 20, cached_tokens=30, reasoning_tokens=5)),
                fake.completion(fake.tool_call_deltas(0, "call_1", "read", '{"filePath":', ' "a.txt"}'),
                                finish_reason="tool_calls"),
                fake.error(429, "slow down", type="rate_limit_error", headers={"retry-after": "2"}),
                fake.error(400, "bad request field", type="invalid_request_error")]
    if protocol == "responses":
        return [wire.responses(wire.r_reasoning("Thinking", encrypted="enc-1"), wire.r_text("Hel", "lo"),
                               usage=wire.r_usage(100, 20, cached=30, reasoning=5)),
                wire.responses(wire.r_call("call_1", "read", '{"filePath":', ' "a.txt"}')),
                fake.error(429, "slow down", type="rate_limit_error", headers={"retry-after": "2"}),
                fake.error(400, "bad request field", type="invalid_request_error")]
    return [wire.messages(wire.m_thinking("Thinking", signature="sig-1"), wire.m_text("Hel", "lo"),
                          input_tokens=70, output_tokens=20, cache_read=30),
            wire.messages(wire.m_tool("call_1", "read", '{"filePath":', ' "a.txt"}')),
            wire.anthropic_error(429, "rate_limit_error", "slow down", {"retry-after": "2"}),
            wire.anthropic_error(400, "invalid_request_error", "bad request field")]


def model(protocol: str, base_url: str) -> ResolvedModel:
    provider = {"chat": "local", "responses": "openai", "messages": "anthropic"}[protocol]
    return ResolvedModel(provider, "fake-model", base_url, api_key="sk-cassette", protocol=protocol)  # type: ignore[arg-type]


async def exchange(protocol: str, transport: CassetteTransport, base_url: str) -> list[Any]:
    """The four calls the scripts answer; each gives its events, or its failure as the last item."""
    providers = Providers(transport)
    adapter = providers.for_model(model(protocol, base_url))
    outcomes: list[Any] = []
    try:
        for prompt in ("hello", "read a.txt", "again", "once more"):
            request = LLMRequest(model(protocol, base_url), ["You are a test agent."],
                                 [UserMessage([TextPart(prompt)])], tools=[READ])
            events: list[Any] = []
            try:
                async for event in adapter.stream(request):
                    events.append(event)
            except ProviderError as failure:
                events.append(failure)
            outcomes.append(events)
    finally:
        await providers.aclose()
    return outcomes


def _check(protocol: str, outcomes: list[Any]) -> None:
    text, tool, limited, bad = outcomes
    assert "".join(e.delta for e in text if isinstance(e, TextDelta)) == "Hello"
    assert "".join(e.delta for e in text if isinstance(e, ReasoningDelta)) == "Thinking"
    usage = {"chat": Usage(input=70, output=15, reasoning=5, cache_read=30),
             "responses": Usage(input=70, output=15, reasoning=5, cache_read=30),
             "messages": Usage(input=70, output=20, cache_read=30)}[protocol]
    assert text[-1] == Finish("stop", usage)
    [call] = [e for e in tool if isinstance(e, ToolCall)]
    assert (call.call_id, call.name, call.input) == ("call_1", "read", {"filePath": "a.txt"})
    assert isinstance(limited[-1], RateLimitError) and limited[-1].retry_after_ms == 2000
    assert isinstance(bad[-1], InvalidProviderRequestError) and "bad request field" in bad[-1].message


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_committed_cassette_replays_without_a_network(protocol):
    transport = CassetteTransport(CASSETTES / f"{protocol}.json")
    # an address nothing listens on: only the cassette can answer
    outcomes = await exchange(protocol, transport, "http://127.0.0.1:9/v1")
    _check(protocol, outcomes)
    assert transport.unused == 0
    assert transport.requests[1]["body"]["tools"], "the replayed request still carries what the adapter built"


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_recording_replays_byte_for_byte(protocol, tmp_path):
    path = tmp_path / f"{protocol}.json"
    async with fake.FakeOpenAI() as server:
        server.enqueue(*scripts(protocol))
        recorder = CassetteTransport(path, record=True)
        recorded = await exchange(protocol, recorder, server.base_url)
        recorder.save()
    _check(protocol, recorded)
    replayer = CassetteTransport(path)
    replayed = await exchange(protocol, replayer, server.base_url)
    assert [[repr(e) for e in o] for o in replayed] == [[repr(e) for e in o] for o in recorded]
    assert replayer.requests == recorder.requests
    if os.environ.get("OCS_RECORD_CASSETTES") == "1":
        (CASSETTES / f"{protocol}.json").write_text(path.read_text())


async def test_a_request_the_cassette_does_not_expect_fails_loudly():
    transport = CassetteTransport(CASSETTES / "chat.json")
    with pytest.raises(AssertionError, match="expected POST /v1/chat/completions"):
        await exchange("responses", transport, "http://127.0.0.1:9/v1")
