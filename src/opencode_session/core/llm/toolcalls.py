"""The streamed tool-call accumulator every adapter uses: calls start (perhaps before their name is known), take
argument pieces, and finish into one complete `ToolCall` whose input is parsed once, at the end."""

from __future__ import annotations

import json
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

from .errors import InvalidProviderOutputError
from .model import StreamEvent, ToolCall, ToolInputDelta, ToolInputEnd, ToolInputStart


@dataclass
class PendingCall:
    call_id: str
    name: str | None
    arguments: str = ""
    started: bool = False
    ended: bool = False
    provider_executed: bool = False
    metadata: dict[str, Any] | None = None


class ToolCallAccumulator:
    """Calls by a key of the adapter's choosing (a stream index, an item ID). Each method returns the stream events
    it produced; `ToolInputStart` waits for the name, and argument pieces that arrive before it are replayed then."""

    def __init__(self) -> None:
        self._calls: dict[Hashable, PendingCall] = {}

    def get(self, key: Hashable) -> PendingCall | None:
        return self._calls.get(key)

    @property
    def any_started(self) -> bool:
        return any(c.started for c in self._calls.values())

    def start(self, key: Hashable, call_id: str, name: str | None = None, *, provider_executed: bool = False,
              metadata: dict[str, Any] | None = None) -> list[StreamEvent]:
        self._calls[key] = PendingCall(call_id, None, provider_executed=provider_executed, metadata=metadata)
        return self.name(key, name) if name else []

    def name(self, key: Hashable, name: str) -> list[StreamEvent]:
        """Name the call, which starts its input (with the pieces received so far)."""
        call = self._calls[key]
        if call.name is not None or not name:
            return []
        call.name = name
        call.started = True
        out: list[StreamEvent] = [ToolInputStart(call.call_id, name)]
        if call.arguments:
            out.append(ToolInputDelta(call.call_id, call.arguments))
        return out

    def append(self, key: Hashable, delta: str) -> list[StreamEvent]:
        call = self._calls.get(key)
        if call is None or call.ended or not delta:
            return []
        call.arguments += delta
        return [ToolInputDelta(call.call_id, delta)] if call.started else []

    def finish(self, key: Hashable, arguments: str | None = None) -> list[StreamEvent]:
        """End the call's input and emit the complete call. `arguments`, when the provider repeats them whole at the
        end, replaces what the pieces added up to."""
        call = self._calls.get(key)
        if call is None or call.ended:
            return []
        call.ended = True
        if arguments is not None:
            call.arguments = arguments
        if not call.started or call.name is None:
            raise InvalidProviderOutputError(f"The provider streamed tool call {call.call_id} without a name")
        return [ToolInputEnd(call.call_id), complete(call)]

    def finish_all(self) -> list[StreamEvent]:
        out: list[StreamEvent] = []
        for key in list(self._calls):
            out += self.finish(key)
        return out


def complete(call: PendingCall) -> ToolCall:
    """The finished call; arguments that are not a JSON object give an empty input and `input_error`, so the call is
    still recorded and can fail durably."""
    assert call.name is not None
    raw = call.arguments
    common: dict[str, Any] = {"provider_executed": call.provider_executed, "metadata": call.metadata,
                              "raw_input": raw}
    if not raw.strip():
        return ToolCall(call.call_id, call.name, {}, **common)
    try:
        parsed = json.loads(raw)
    except ValueError as exc:
        return ToolCall(call.call_id, call.name, {}, input_error=f"Tool arguments are not valid JSON: {exc}",
                        **common)
    if not isinstance(parsed, dict):
        return ToolCall(call.call_id, call.name, {},
                        input_error=f"Tool arguments must be a JSON object, got {type(parsed).__name__}", **common)
    return ToolCall(call.call_id, call.name, parsed, **common)


__all__ = ["PendingCall", "ToolCallAccumulator", "complete"]
