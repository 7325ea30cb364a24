"""A request body built from the previous Step's cached history items is byte for byte the body built from nothing,
for every protocol, through appends, retries, edits anywhere, merged user turns, instruction updates, attachments,
emptied turns, a compaction that replaces history, and sessions evicted from the cache; and through the runner, the
bytes a loopback provider receives are the cold bodies, across prompts, an attachment read again (and changed), a tool
result and a compaction."""

from __future__ import annotations

import json
import random
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from opencode_session.core.llm import model as llm
from opencode_session.core.llm.anthropic_messages import AnthropicMessagesProvider
from opencode_session.core.llm.catalog import ResolvedModel
from opencode_session.core.llm.openai_chat import OpenAIChatProvider
from opencode_session.core.llm.openai_responses import OpenAIResponsesProvider
from opencode_session.core.llm.providers import Providers
from opencode_session.core.llm.wire import encode_body
from opencode_session.core.runtime import Runtime, RuntimeOptions
from opencode_session.core.wiring import make_drain_factory
from opencode_session.schema.prompt import PromptInput, PromptInputFileAttachment
from tests.support import fake_openai as fake
from tests.support import fake_wire

ADAPTERS = {"chat": OpenAIChatProvider, "responses": OpenAIResponsesProvider, "messages": AnthropicMessagesProvider}
BASE_URL = "http://127.0.0.1:9/v1"  # never dialled


def _model(protocol: str) -> ResolvedModel:
    provider = "anthropic" if protocol == "messages" else "openai"
    return ResolvedModel(provider, "m", BASE_URL, protocol=protocol)  # type: ignore[arg-type]


def _message(rng: random.Random, n: int) -> llm.LLMMessage:
    """Every shape the folds treat apart: empty user text (an emptied Messages turn), updates that join a user turn,
    tool calls and results, reasoning with and without native metadata, attachments and numbers of every JSON type."""
    kind = rng.choice(["user", "user", "empty", "update", "assistant", "tools", "result", "nothing", "file"])
    if kind == "user":
        return llm.UserMessage([llm.TextPart(f"prompt {n} «ünïcode» \"quoted\"")])
    if kind == "empty":
        return llm.UserMessage([llm.TextPart("")])
    if kind == "update":
        return llm.SystemUpdate(f"instructions <{n}> & more")
    if kind == "file":
        return llm.UserMessage([llm.TextPart(f"see {n}"), llm.FilePart(uri="data:text/plain;base64,aGk=",
                                                                      mime="text/plain", name=f"f{n}.txt")])
    if kind == "assistant":
        openai = {"itemId": f"rs_{n}", **({"encryptedContent": f"enc {n}"} if rng.random() < 0.5 else {})}
        return llm.AssistantMessage([llm.ReasoningPart(f"thinking {n}", {"anthropic": {"signature": "s"},
                                                                          "openai": openai}),
                                     llm.TextPart(f"answer {n}")])
    if kind == "tools":
        return llm.AssistantMessage([llm.ToolCallPart(f"call_{n}", "read", {"path": f"a{n}", "n": n, "x": 1.0,
                                                                             "ok": True, "none": None})])
    if kind == "result":
        return llm.ToolResultMessage(f"call_{n}", "read", f"output {n}", is_error=rng.random() < 0.3)
    return llm.AssistantMessage([llm.TextPart("")])  # lowers to nothing


def _request(protocol: str, messages: list[llm.LLMMessage], key: str | None, system: str,
             store: bool = False) -> llm.LLMRequest:
    return llm.LLMRequest(model=_model(protocol), system=[system] if system else [], messages=list(messages),
                          tools=[llm.ToolSpec("read", "Read a file", {"type": "object"})], prompt_cache_key=key,
                          options={"store": True} if store else {})


@pytest.mark.parametrize("protocol", sorted(ADAPTERS))
@pytest.mark.parametrize("seed", range(4))
def test_cached_bodies_equal_cold_bodies(protocol: str, seed: int) -> None:
    rng = random.Random(seed)
    adapter: Any = ADAPTERS[protocol](BASE_URL, "key")
    for cache in (adapter._history, getattr(adapter, "_stored_history", adapter._history)):
        cache.max_conversations = 2  # three sessions: evictions happen too
    sessions: dict[str, list[llm.LLMMessage]] = {f"s{i}": [] for i in range(3)}
    n = 0
    for step in range(300):
        key = rng.choice(sorted(sessions))
        history = sessions[key]
        action = rng.random()
        if action < 0.55 or not history:  # a Step's new messages
            for _ in range(rng.randint(1, 4)):
                n += 1
                history.append(_message(rng, n))
        elif action < 0.7:  # a message revised in place (a new object), anywhere
            n += 1
            history[rng.randrange(len(history))] = _message(rng, n)
        elif action < 0.78:  # a compaction: history starts again from a summary
            n += 1
            history[:] = [llm.UserMessage([llm.TextPart(f"summary {n}")]), *history[-rng.randint(0, 3):]]
        elif action < 0.85:  # the newest messages leave (a revert)
            del history[rng.randrange(len(history)):]
        # else: the same request again (a retry)
        # now and then with `store`, which Responses lowers apart (a variant switched on and off)
        request = _request(protocol, history, key, "" if step % 7 == 0 else f"system {step % 3}", rng.random() < 0.2)
        assert adapter.encode_request(request) == encode_body(adapter.build_body(request)), (seed, step)


@pytest.mark.parametrize("protocol", sorted(ADAPTERS))
def test_no_cache_key_and_empty_history(protocol: str) -> None:
    adapter: Any = ADAPTERS[protocol](BASE_URL, "key")
    for key in (None, "s"):
        for messages in ([], [llm.SystemUpdate("first")], [llm.SystemUpdate("first"), llm.UserMessage([])]):
            for system in ("", "system"):
                request = _request(protocol, messages, key, system)
                assert adapter.encode_request(request) == encode_body(adapter.build_body(request))


# --- through the runner ------------------------------------------------------------------------------

PROVIDER = {"chat": "loop", "responses": "openai", "messages": "anthropic"}


def _answer(protocol: str, words: str) -> fake.StreamScript:
    if protocol == "responses":
        return fake_wire.responses(fake_wire.r_text(words))
    if protocol == "messages":
        return fake_wire.messages(fake_wire.m_text(words))
    return fake.completion(fake.text_deltas(words))


def _glob(protocol: str, call_id: str) -> fake.StreamScript:
    arguments = json.dumps({"pattern": "*.txt"})
    if protocol == "responses":
        return fake_wire.responses(fake_wire.r_call(call_id, "glob", arguments))
    if protocol == "messages":
        return fake_wire.messages(fake_wire.m_tool(call_id, "glob", arguments), stop_reason="tool_use")
    return fake.completion(fake.tool_call_deltas(0, call_id, "glob", arguments), finish_reason="tool_calls")


class ColdBodies:
    """The real adapter, noting for every request the body built from nothing before it sends its own."""

    def __init__(self, adapter: Any, cold: list[bytes]) -> None:
        self.adapter = adapter
        self.cold = cold

    async def stream(self, request: llm.LLMRequest) -> AsyncIterator[llm.StreamEvent]:
        self.cold.append(encode_body(self.adapter.build_body(request)))
        async for event in self.adapter.stream(request):
            yield event


@pytest.mark.anyio
@pytest.mark.parametrize("protocol", sorted(ADAPTERS))
async def test_provider_receives_the_cold_body_through_prompts_tools_and_compaction(tmp_path: Path,
                                                                                     loop_provider: Any,
                                                                                     protocol: str) -> None:
    server = loop_provider
    server.requests.clear()
    server.summary_requests.clear()
    config = tmp_path / "config" / "opencode"
    config.mkdir(parents=True)
    model = {"fake-model": {"limit": {"context": 100_000, "output": 1_000}}}
    config.joinpath("opencode.json").write_text(json.dumps({
        "model": f"{PROVIDER[protocol]}/fake-model",
        "provider": {
            "loop": {"npm": "@ai-sdk/openai-compatible", "options": {"baseURL": server.base_url, "apiKey": "k"},
                     "models": model},
            "openai": {"options": {"baseURL": server.base_url}, "models": model},
            "anthropic": {"options": {"baseURL": server.base_url}, "models": model},
        },
    }))
    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.txt").write_text("alpha\n")
    env = {"XDG_CONFIG_HOME": str(tmp_path / "config"), "HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path),
           "OPENAI_API_KEY": "k", "ANTHROPIC_API_KEY": "k"}
    cold: list[bytes] = []
    providers = Providers()
    drain = make_drain_factory(provider=lambda m: ColdBodies(providers.for_model(m), cold), titles=False)
    try:
        async with Runtime(RuntimeOptions(db_path=tmp_path / "db.sqlite", directory=work, env=env,
                                          drain_factory=drain)) as rt:
            assert rt.execution is not None
            sid = (await rt.sessions.create()).id

            async def prompt(words: str, *scripts: fake.StreamScript, files: Any = None) -> None:
                server.enqueue(*scripts)
                await rt.sessions.admit(sid, PromptInput(text=words, files=files))
                with anyio.fail_after(30):
                    await rt.execution.wait(sid)

            await prompt("first", _answer(protocol, "one"))
            # an attachment is read again at every Step; while it reads the same its wire form is reused
            await prompt("second", _answer(protocol, "two"), files=[PromptInputFileAttachment(uri="notes.txt")])
            await prompt("list the notes", _glob(protocol, "call_1"), _answer(protocol, "found notes.txt"))
            (work / "notes.txt").write_text("alpha\nbeta\n")
            await prompt("third", _answer(protocol, "three"))
            if protocol != "chat":  # the fake's own summary answer speaks Chat Completions
                server.summaries.append(_answer(protocol, fake.SUMMARY))
            await rt.sessions.compact(sid)
            with anyio.fail_after(30):
                await rt.execution.wait(sid)
            await prompt("after the summary", _answer(protocol, "four"))
            await prompt("and again", _glob(protocol, "call_2"), _answer(protocol, "still there"))
    finally:
        await providers.aclose()
    # each request arrived as built from nothing (the fake keeps summary requests apart, so order by content)
    assert len(server.requests) == 8 and len(server.summary_requests) == 1
    assert sorted(r.raw for r in [*server.requests, *server.summary_requests]) == sorted(cold)
    # the last request: after the summary, with a tool round trip, and without the prompts summarised away
    last = server.requests[-1].raw.decode()
    assert "after the summary" in last and "call_2" in last and '"first"' not in last
    third = server.requests[4].raw.decode()  # the attachment as it read when "third" was sent
    assert "third" in third and ("alpha\\nbeta" in third or "YWxwaGEKYmV0YQo" in third)
