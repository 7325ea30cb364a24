"""Provider adapters are registered by wire protocol name: one registered from outside the runtime, with the provider
package it speaks, is what a model configured with that package is called through (its module imported only then),
and opencode.json's `npm` names it in the error for a package no adapter speaks."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator

import anyio
import pytest

from opencode_session.core.config import Config
from opencode_session.core.llm import catalog
from opencode_session.core.llm.errors import NoModelConfiguredError
from opencode_session.core.llm.providers import AdapterSpec, register_adapter, unregister_adapter
from opencode_session.core.runtime import Runtime, RuntimeOptions
from opencode_session.core.wiring import make_drain_factory
from opencode_session.schema.prompt import PromptInput

MODULE = "tests.support.echo_adapter"
ECHO = {
    "model": "ex/parrot",
    "provider": {"ex": {"npm": "@example/echo", "options": {"baseURL": "http://127.0.0.1:9/v1", "apiKey": "k"},
                        "models": {"parrot": {"limit": {"context": 10_000, "output": 1000}}}}},
}


@pytest.fixture
def echo_adapter() -> Iterator[None]:
    sys.modules.pop(MODULE, None)
    register_adapter(AdapterSpec("echo", MODULE, "EchoProvider", ("@example/echo",)))
    try:
        yield
    finally:
        unregister_adapter("echo")


@pytest.mark.anyio
async def test_a_registered_adapter_serves_the_models_of_its_package(tmp_path, echo_adapter):
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "opencode.json").write_text(json.dumps(ECHO))
    options = RuntimeOptions(db_path=tmp_path / "db.sqlite", directory=tmp_path / "work",
                             drain_factory=make_drain_factory(titles=False))
    async with Runtime(options) as rt:
        assert MODULE not in sys.modules  # nothing loads before a model uses the protocol
        sid = (await rt.sessions.create()).id
        await rt.sessions.admit(sid, PromptInput(text="hello"))
        with anyio.fail_after(10):
            assert rt.execution is not None
            await rt.execution.wait(sid)
        page, _ = await rt.sessions.messages(sid, order="asc")
    answer = [m.wire() for m in page if m.type == "assistant"][-1]
    assert [c["text"] for c in answer["content"] if c["type"] == "text"] == ["echo: hello"]
    built = sys.modules[MODULE].BUILT
    assert [(kw["base_url"], kw["api_key"]) for kw in built] == [("http://127.0.0.1:9/v1", "k")]
    assert built[0]["http_client"] is not None  # the provider's shared HTTP client, as the built-ins get


def test_a_package_no_adapter_speaks_is_refused_naming_the_registered_ones(echo_adapter):
    config = Config.model_validate({**ECHO, "provider": {"ex": {**ECHO["provider"]["ex"], "npm": "@example/none"}}})
    with pytest.raises(NoModelConfiguredError) as refused:
        catalog.resolve_model(config)
    assert "'@ai-sdk/anthropic' or '@example/echo'" in str(refused.value)
    assert catalog.resolve_model(Config.model_validate(ECHO)).protocol == "echo"


def test_a_protocol_or_package_is_registered_once(echo_adapter):
    with pytest.raises(ValueError):
        register_adapter(AdapterSpec("echo", MODULE, "EchoProvider"))
    with pytest.raises(ValueError):
        register_adapter(AdapterSpec("other", MODULE, "EchoProvider", ("@example/echo",)))
