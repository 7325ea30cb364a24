"""A request body built from the previous Step's cached history items is byte for byte the body built from nothing,
for every protocol, through appends, retries, edits anywhere, merged user turns, instruction updates, attachments,
emptied turns, a compaction that replaces history, and sessions evicted from the cache."""

from __future__ import annotations

import random
from typing import Any

import pytest

from opencode_session.core.llm import model as llm
from opencode_session.core.llm.anthropic_messages import AnthropicMessagesProvider
from opencode_session.core.llm.catalog import ResolvedModel
from opencode_session.core.llm.openai_chat import OpenAIChatProvider
from opencode_session.core.llm.openai_responses import OpenAIResponsesProvider
from opencode_session.core.llm.wire import encode_body

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
        return llm.AssistantMessage([llm.ReasoningPart(f"thinking {n}", {"anthropic": {"signature": "s"},
                                                                          "openai": {"itemId": f"rs_{n}"}}),
                                     llm.TextPart(f"answer {n}")])
    if kind == "tools":
        return llm.AssistantMessage([llm.ToolCallPart(f"call_{n}", "read", {"path": f"a{n}", "n": n, "x": 1.0,
                                                                             "ok": True, "none": None})])
    if kind == "result":
        return llm.ToolResultMessage(f"call_{n}", "read", f"output {n}", is_error=rng.random() < 0.3)
    return llm.AssistantMessage([llm.TextPart("")])  # lowers to nothing


def _request(protocol: str, messages: list[llm.LLMMessage], key: str | None, system: str) -> llm.LLMRequest:
    return llm.LLMRequest(model=_model(protocol), system=[system] if system else [], messages=list(messages),
                          tools=[llm.ToolSpec("read", "Read a file", {"type": "object"})], prompt_cache_key=key)


@pytest.mark.parametrize("protocol", sorted(ADAPTERS))
@pytest.mark.parametrize("seed", range(4))
def test_cached_bodies_equal_cold_bodies(protocol: str, seed: int) -> None:
    rng = random.Random(seed)
    adapter: Any = ADAPTERS[protocol](BASE_URL, "key")
    adapter._history.max_conversations = 2  # three sessions: evictions happen too
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
        request = _request(protocol, history, key, "" if step % 7 == 0 else f"system {step % 3}")
        assert adapter.encode_request(request) == encode_body(adapter.build_body(request)), (seed, step)


@pytest.mark.parametrize("protocol", sorted(ADAPTERS))
def test_no_cache_key_and_empty_history(protocol: str) -> None:
    adapter: Any = ADAPTERS[protocol](BASE_URL, "key")
    for key in (None, "s"):
        for messages in ([], [llm.SystemUpdate("first")], [llm.SystemUpdate("first"), llm.UserMessage([])]):
            for system in ("", "system"):
                request = _request(protocol, messages, key, system)
                assert adapter.encode_request(request) == encode_body(adapter.build_body(request))
