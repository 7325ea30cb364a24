"""Credentials on the wire, for every protocol and every place a key comes from: a loopback server that
authenticates as the real services do (a bearer token for the OpenAI protocols, `x-api-key` with `anthropic-version`
for Messages, 401 for anything else) answers the first request and the later ones an adapter sends in the first's
request."""

from __future__ import annotations

from typing import Any

import pytest

from opencode_session.core.config import Config
from opencode_session.core.llm import (
    AuthenticationError,
    LLMRequest,
    Providers,
    TextDelta,
    TextPart,
    UserMessage,
    api_key_env_var,
    resolve_model,
)
from opencode_session.schema.common import ModelRef
from tests.support import fake_openai as fake
from tests.support import fake_wire as wire

pytestmark = pytest.mark.anyio

PROTOCOLS = ("chat", "responses", "messages")
# the built-in providers of the two OpenAI-made protocols' SDK packages, and a custom one for Chat Completions
PROVIDER = {"chat": "loop", "responses": "openai", "messages": "anthropic"}
NPM = {"chat": "@ai-sdk/openai-compatible", "responses": "@ai-sdk/openai", "messages": "@ai-sdk/anthropic"}
SOURCES = ("options.apiKey", "env list", "<PROVIDER_ID>_API_KEY", "options.headers")
KEY = "sk-auth-test-0123456789"


@pytest.fixture
async def server():
    async with fake.FakeOpenAI() as loop:
        loop.keys = {KEY}
        yield loop


def answer(protocol: str, text: str) -> fake.StreamScript:
    if protocol == "chat":
        return fake.completion(fake.text_deltas(text))
    return wire.responses(wire.r_text(text)) if protocol == "responses" else wire.messages(wire.m_text(text))


def configured(server: fake.FakeOpenAI, protocol: str, source: str, key: str = KEY) -> tuple[Config, dict[str, str]]:
    """A provider entry for `protocol` whose `key` comes from `source`, and the environment that goes with it."""
    provider_id = PROVIDER[protocol]
    options: dict[str, Any] = {"baseURL": server.base_url, "headers": {"X-Team": "blue"}}
    entry: dict[str, Any] = {"npm": NPM[protocol], "options": options, "models": {"m": {}}}
    env: dict[str, str] = {}
    if source == "options.apiKey":
        options["apiKey"] = key
    elif source == "env list":
        entry["env"] = ["TEAM_KEY"]
        env["TEAM_KEY"] = key
    elif source == "<PROVIDER_ID>_API_KEY":
        env[api_key_env_var(provider_id)] = key  # ANTHROPIC_API_KEY for the built-in anthropic provider
    else:  # the entry's own headers carry the credential, in the protocol's scheme
        options["headers"] = {"X-Team": "blue", **({"x-api-key": key} if protocol == "messages"
                                                   else {"Authorization": f"Bearer {key}"})}
    return Config.model_validate({"provider": {provider_id: entry}}), env


async def ask(providers: Providers, config: Config, env: dict[str, str], protocol: str, text: str) -> str:
    model = resolve_model(config, ModelRef(providerID=PROVIDER[protocol], id="m"), env)
    request = LLMRequest(model=model, system=["You are a test agent."], messages=[UserMessage([TextPart(text)])])
    return "".join([e.delta async for e in providers.for_model(model).stream(request) if isinstance(e, TextDelta)])


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_each_protocol_sends_its_key_in_its_own_scheme(server, protocol, source):
    config, env = configured(server, protocol, source)
    server.enqueue(answer(protocol, "one"), answer(protocol, "two"))
    providers = Providers()
    try:
        said = [await ask(providers, config, env, protocol, text) for text in ("first", "second")]
    finally:
        await providers.aclose()
    assert said == ["one", "two"] and not server.refused
    for sent in server.requests:
        headers = sent.headers
        assert headers["x-team"] == "blue"
        if protocol == "messages":
            assert headers["x-api-key"] == KEY and headers["anthropic-version"]
            assert "authorization" not in headers  # the key goes in one header only
        else:
            assert headers["authorization"] == f"Bearer {KEY}" and "x-api-key" not in headers


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_wrong_key_is_refused_as_an_authentication_failure(server, protocol):
    config, env = configured(server, protocol, "options.apiKey", key="sk-wrong-0123456789")
    providers = Providers()
    try:
        with pytest.raises(AuthenticationError) as refused:
            await ask(providers, config, env, protocol, "hello")
    finally:
        await providers.aclose()
    assert refused.value.status == 401 and len(server.refused) == 1 and not server.requests
