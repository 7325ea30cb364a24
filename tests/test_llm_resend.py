"""An adapter's later requests: after the SDK's own `post` sent the first, each later body goes out in the request
that `post` built. For every protocol, against a loopback server: the server sees the same request apart from the
body, and failures of a later request are the same typed failures as of a first one."""

from __future__ import annotations

from typing import Any

import httpx2
import pytest

from opencode_session.core.llm import (
    InvalidProviderRequestError,
    LLMRequest,
    ProviderError,
    ProviderInternalError,
    RateLimitError,
    ResolvedModel,
    TextDelta,
    TextPart,
    TransportError,
    UserMessage,
)
from opencode_session.core.llm.anthropic_messages import AnthropicMessagesProvider
from opencode_session.core.llm.openai_chat import OpenAIChatProvider
from opencode_session.core.llm.openai_responses import OpenAIResponsesProvider
from tests.support import fake_openai as fake
from tests.support.fake_openai import FakeOpenAI, Script
from tests.support.fake_wire import anthropic_error, m_text, messages, r_text, responses

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

PROTOCOLS = ("chat", "responses", "messages")
ADAPTERS = {"chat": OpenAIChatProvider, "responses": OpenAIResponsesProvider, "messages": AnthropicMessagesProvider}


@pytest.fixture
async def server():
    async with FakeOpenAI() as loop:
        yield loop


def answer(protocol: str, text: str) -> Script:
    if protocol == "chat":
        return fake.completion(fake.text_deltas(text))
    return responses(r_text(text)) if protocol == "responses" else messages(m_text(text))


def failure(protocol: str, status: int, kind: str, message: str, headers: dict[str, str] | None = None) -> Script:
    if protocol == "messages":
        return anthropic_error(status, kind, message, headers)
    return fake.error(status, message, type=kind, headers=headers)


def request(base_url: str, protocol: str, text: str) -> LLMRequest:
    model = ResolvedModel("p", "fake-model", base_url, api_key="sk-test-key", protocol=protocol)  # type: ignore[arg-type]
    return LLMRequest(model=model, system=["You are a test agent."], messages=[UserMessage([TextPart(text)])])


async def step(adapter: Any, base_url: str, protocol: str, text: str = "hello") -> str:
    return "".join([e.delta async for e in adapter.stream(request(base_url, protocol, text))
                    if isinstance(e, TextDelta)])


async def failed_step(adapter: Any, base_url: str, protocol: str) -> ProviderError:
    with pytest.raises(ProviderError) as caught:
        await step(adapter, base_url, protocol)
    return caught.value


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("key", ["sk-test-key", None])
async def test_a_later_request_differs_from_the_first_only_in_its_body(server, protocol, key):
    adapter = ADAPTERS[protocol](server.base_url, key, headers={"X-Team": "blue"})
    server.enqueue(answer(protocol, "one"), answer(protocol, "two"), answer(protocol, "three"))
    try:
        said = [await step(adapter, server.base_url, protocol, text) for text in ("first", "second", "third")]
    finally:
        await adapter.aclose()
    assert said == ["one", "two", "three"]
    first, *later = server.requests
    assert len(later) == 2
    for sent, text in zip(later, ("second", "third"), strict=True):
        assert text in sent.raw.decode()  # each carries its own body
        assert (sent.method, sent.path) == (first.method, first.path)
        assert {k: v for k, v in sent.headers.items() if k != "content-length"} == \
            {k: v for k, v in first.headers.items() if k != "content-length"}
        assert int(sent.headers["content-length"]) == len(sent.raw)
    assert first.headers["x-team"] == "blue"
    credential = ("x-api-key", key) if protocol == "messages" else ("authorization", f"Bearer {key}")
    assert first.headers.get(credential[0]) == (credential[1] if key else None)


FAILURES = [  # (status, kind, message, headers) -> what the runtime gets
    (429, "rate_limit_error", "slow down", {"retry-after-ms": "1500"}),
    (500, "server_error", "boom", None),
    (400, "invalid_request_error", "bad field", None),
]


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize(("status", "kind", "message", "headers"), FAILURES)
async def test_a_later_request_fails_as_a_first_one_does(server, protocol, status, kind, message, headers):
    fresh = ADAPTERS[protocol](server.base_url, "sk-test-key")
    warmed = ADAPTERS[protocol](server.base_url, "sk-test-key")
    try:
        server.enqueue(failure(protocol, status, kind, message, headers))
        first = await failed_step(fresh, server.base_url, protocol)
        server.enqueue(answer(protocol, "ok"), failure(protocol, status, kind, message, headers))
        assert await step(warmed, server.base_url, protocol) == "ok"
        later = await failed_step(warmed, server.base_url, protocol)
        server.enqueue(answer(protocol, "again"))  # and the adapter goes on after the failure
        assert await step(warmed, server.base_url, protocol) == "again"
    finally:
        await fresh.aclose()
        await warmed.aclose()
    expected = {429: RateLimitError, 500: ProviderInternalError, 400: InvalidProviderRequestError}[status]
    assert type(first) is type(later) is expected
    assert (later.message, later.retryable, later.retry_after_ms) == \
        (first.message, first.retryable, first.retry_after_ms)
    assert message in later.message


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_later_request_cut_off_or_unanswered_is_a_transport_failure(protocol):
    async with FakeOpenAI() as server:
        adapter = ADAPTERS[protocol](server.base_url, "sk-test-key")
        server.enqueue(answer(protocol, "ok"), fake.drop())
        try:
            assert await step(adapter, server.base_url, protocol) == "ok"
            cut = await failed_step(adapter, server.base_url, protocol)
            assert isinstance(cut, TransportError) and cut.retryable
            base_url = server.base_url
        except BaseException:
            await adapter.aclose()
            raise
    try:  # the server is gone now
        gone = await failed_step(adapter, base_url, protocol)
    finally:
        await adapter.aclose()
    fresh = ADAPTERS[protocol](base_url, "sk-test-key")
    try:
        first = await failed_step(fresh, base_url, protocol)
    finally:
        await fresh.aclose()
    assert isinstance(gone, TransportError) and gone.retryable
    assert gone.message == first.message and f"Could not reach the provider at {base_url}" in gone.message


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_later_request_keeps_the_timeout(server, protocol):
    # a shared HTTP client waits longer by default: only the adapter's own timeout can cut the held answer off
    http = httpx2.AsyncClient(timeout=600)
    adapter = ADAPTERS[protocol](server.base_url, "sk-test-key", timeout=0.5, http_client=http)
    held = answer(protocol, "late")
    assert isinstance(held, fake.StreamScript)
    held.hold_after = 0
    server.enqueue(answer(protocol, "ok"), held)
    try:
        assert await step(adapter, server.base_url, protocol) == "ok"
        late = await failed_step(adapter, server.base_url, protocol)
    finally:
        server.release_held()
        await http.aclose()
    assert isinstance(late, TransportError) and "timed out" in late.message
