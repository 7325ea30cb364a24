"""An in-process scripted Provider: each call pops the next script and records the request it received."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from opencode_session.core.llm import model as llm
from opencode_session.core.llm.errors import ProviderError

Script = list[Any]  # stream events, ProviderError instances (raised there), or Gate objects (awaited there)


@dataclass
class Gate:
    """A point in a script where the provider waits until the test opens it; `reached` tells the test it's there."""

    reached: asyncio.Event = field(default_factory=asyncio.Event)
    opened: asyncio.Event = field(default_factory=asyncio.Event)

    def open(self) -> None:
        self.opened.set()


def text(s: str, usage: llm.Usage | None = None, finish: str = "stop") -> Script:
    return [llm.TextStart("t"), llm.TextDelta("t", s), llm.TextEnd("t"), llm.Finish(finish, usage or llm.Usage(10, 5))]


def tool_call(call_id: str, name: str, input: dict[str, Any]) -> Script:
    return [llm.ToolInputStart(call_id, name), llm.ToolInputDelta(call_id, "{}"), llm.ToolInputEnd(call_id),
            llm.ToolCall(call_id, name, input), llm.Finish("tool-calls", llm.Usage(10, 5))]


class ScriptedProvider:
    def __init__(self, scripts: list[Script] | None = None) -> None:
        self.scripts: list[Script] = list(scripts or [])
        self.requests: list[llm.LLMRequest] = []
        self.fallback: Callable[[llm.LLMRequest], Script] | None = None

    def push(self, *scripts: Script) -> None:
        self.scripts.extend(scripts)

    async def stream(self, request: llm.LLMRequest) -> AsyncIterator[llm.StreamEvent]:
        self.requests.append(request)
        if self.scripts:
            script = self.scripts.pop(0)
        elif self.fallback is not None:
            script = self.fallback(request)
        else:
            raise AssertionError("the provider was called more often than the test scripted")
        for item in script:
            if isinstance(item, Gate):
                item.reached.set()
                await item.opened.wait()
            elif isinstance(item, ProviderError):
                raise item
            else:
                yield item
