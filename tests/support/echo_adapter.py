"""A wire protocol adapter defined outside the runtime, for the adapter registry's tests: it answers every request by
echoing the last user text, and records how the runtime built it. The registry imports this module only when a model
first uses its protocol."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from opencode_session.core.llm import model as llm

BUILT: list[dict[str, Any]] = []  # the keyword arguments of every adapter the runtime built


class EchoProvider:
    def __init__(self, **kw: Any) -> None:
        BUILT.append(kw)

    async def stream(self, request: llm.LLMRequest) -> AsyncIterator[llm.StreamEvent]:
        last = request.messages[-1]
        said = "".join(p.text for p in getattr(last, "parts", ()) if isinstance(p, llm.TextPart))
        for event in (llm.TextStart("t"), llm.TextDelta("t", f"echo: {said}"), llm.TextEnd("t"),
                      llm.Finish("stop", llm.Usage(3, 2))):
            yield event
