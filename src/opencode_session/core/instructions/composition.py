"""The runner's declared order of Instruction Sources, and sources an extension adds at a declared position (MCP
guidance after reference guidance, say). There is still no registry that decides the order: the runner declares it
here, loads the added producers concurrently at each Safe Step Boundary, then combines everything in that order
(`combine` rejects a source key given twice)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Final

from ..boundary import Boundary
from .algebra import Instructions, combine

# The positions, in order. The built-in sources fill environment, date, discovery (ambient AGENTS.md), configured
# (opencode.json's `instructions`), skills (the selected agent's skill guidance), references (the project
# references' guidance) and entries (the API-managed InstructionEntry values); mcp holds the MCP guidance, which the
# runtime's wiring adds (`core/mcp/guidance.py`), plugins Python plugins' sources (core/plugins).
POSITIONS: Final = ("environment", "date", "discovery", "configured", "skills", "references", "mcp", "plugins",
                    "entries")

# Loads one source's Instructions for the boundary (what it observes may be unavailable: see Unavailable).
InstructionProducer = Callable[[Boundary], Awaitable[Instructions]]


class InstructionSources:
    """The producers added at declared positions; at one position they follow its built-in source, in the order
    they were added."""

    def __init__(self) -> None:
        self._added: dict[str, list[InstructionProducer]] = {}

    def add(self, position: str, producer: InstructionProducer) -> None:
        if position not in POSITIONS:
            raise ValueError(f"not a declared instruction position: {position!r} (one of {', '.join(POSITIONS)})")
        self._added.setdefault(position, []).append(producer)

    def extended(self, added: Iterable[tuple[str, InstructionProducer]]) -> InstructionSources:
        """A new set: these producers, then `added` (position, producer) ones; this set is left as it is."""
        extended = InstructionSources()
        for position, producers in self._added.items():
            for producer in producers:
                extended.add(position, producer)
        for position, producer in added:
            extended.add(position, producer)
        return extended

    async def produce(self, boundary: Boundary) -> dict[str, list[Instructions]]:
        """Every added producer's Instructions, loaded concurrently, by position."""
        if not self._added:
            return {}
        order = [(position, producer) for position in POSITIONS for producer in self._added.get(position, ())]
        loaded = await asyncio.gather(*(producer(boundary) for _, producer in order))
        by_position: dict[str, list[Instructions]] = {}
        for (position, _), instructions in zip(order, loaded, strict=True):
            by_position.setdefault(position, []).append(instructions)
        return by_position

    @staticmethod
    def combine(builtin: Mapping[str, Instructions], added: Mapping[str, list[Instructions]]) -> Instructions:
        """The built-in sources (by position) and the added ones, in the declared order."""
        return combine(*(part for position in POSITIONS
                         for part in ([builtin[position]] if position in builtin else []) + added.get(position, [])))


__all__ = ["POSITIONS", "InstructionProducer", "InstructionSources"]
