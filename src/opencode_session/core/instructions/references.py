"""The reference guidance Instruction Source (`core/reference-guidance`): the project references the model may
consult, by name, path and description, composed after skill guidance. A change states only what was added or
removed when that is all that changed; any other change restates the whole list."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final
from xml.sax.saxutils import escape

from pydantic import ConfigDict, StrictStr, TypeAdapter, with_config

from ...schema.reference import ReferenceInfo
from ..config import Config
from ..location import Location
from ..references import discover_references
from .algebra import EMPTY, UNAVAILABLE, Instructions, Source, Unavailable, diff_by_key, make

REFERENCE_GUIDANCE_KEY: Final = "core/reference-guidance"


@with_config(ConfigDict(extra="forbid"))
@dataclass(frozen=True)
class Guided:
    """A reference as the guidance lists it: always described."""

    name: StrictStr
    path: StrictStr
    description: StrictStr


_GUIDED = TypeAdapter(tuple[Guided, ...])


def scan_references(location: Location, config: Config, env: Mapping[str, str]) -> list[ReferenceInfo]:
    """The references `config`, the configuration in effect at `location` (the boundary's), names: a broken config
    file fails the boundary itself, before this is asked."""
    return discover_references(location, config, env)


def _entries(references: Iterable[Guided]) -> list[str]:
    lines = []
    for reference in references:
        lines += ["  <reference>", f"    <name>{escape(reference.name)}</name>",
                  f"    <path>{escape(reference.path)}</path>",
                  f"    <description>{escape(reference.description)}</description>", "  </reference>"]
    return lines


def _render(references: tuple[Guided, ...]) -> str:
    return "\n".join(["Project references are further directories you may read when they help with the task.",
                      "<available_references>", *_entries(references), "</available_references>"])


def _update(previous: tuple[Guided, ...], current: tuple[Guided, ...]) -> str:
    diff = diff_by_key(previous, current, lambda reference: reference.name)
    if diff.changed or not (diff.added or diff.removed):
        return ("The project references have changed. This list replaces the earlier one.\n" + _render(current))
    lines = []
    if diff.added:
        lines += ["These project references are now available as well:", *_entries(diff.added)]
    if diff.removed:
        lines.append(f"These project references are gone and must not be used: {', '.join(diff.removed)}.")
    return "\n".join(lines)


def reference_guidance_source(references: list[ReferenceInfo] | Unavailable) -> Instructions:
    """The described references, by name; a git reference only once its checkout exists (this runtime does not
    clone). EMPTY when none remain; an unavailable scan keeps what the model was last told."""
    if isinstance(references, Unavailable):
        value: tuple[Guided, ...] | Unavailable = UNAVAILABLE
    else:
        value = tuple(Guided(r.name, r.path, r.description) for r in sorted(references, key=lambda r: r.name)
                      if r.description and (r.source.type == "local" or Path(r.path).is_dir()))
        if not value:
            return EMPTY

    async def load() -> tuple[Guided, ...] | Unavailable:
        return value

    return make(Source(
        key=REFERENCE_GUIDANCE_KEY,
        encode=lambda references: _GUIDED.dump_python(references, mode="json"),
        decode=_GUIDED.validate_python,
        load=load,
        baseline=_render,
        update=_update,
        removed=lambda _previous: "Project references are no longer available. Do not use any listed earlier.",
    ))
