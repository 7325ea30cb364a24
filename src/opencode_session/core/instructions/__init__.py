"""Instructions: the source algebra plus the built-in sources the runner composes (re-exports).

The names load on first use: importing `instructions.entries` (the API's entry store) does not load the sources
and their decoders (a server needs those only when a Step runs)."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .algebra import (
        EMPTY,
        JSON,
        KEY_PATTERN,
        UNAVAILABLE,
        UNCHANGED,
        Applied,
        AppliedSource,
        Baseline,
        DuplicateKeyError,
        EmptyRenderError,
        Instructions,
        InstructionsBlocked,
        Observation,
        ReconcileResult,
        Source,
        Unavailable,
        Unchanged,
        Updated,
        applied_from_json,
        applied_to_json,
        canonical_json,
        combine,
        initialize,
        make,
        rebaseline,
        reconcile,
        validate_key,
    )
    from .discovery import (
        DISCOVERY_KEY,
        discover_instruction_paths,
        discovery_source,
    )
    from .sources import (
        CONFIG_INSTRUCTIONS_KEY,
        DATE_KEY,
        ENTRY_KEY_PATTERN,
        ENVIRONMENT_KEY,
        SKILL_GUIDANCE_KEY,
        Environment,
        InstructionFile,
        SkillInfo,
        config_instructions_source,
        date_source,
        entry_key,
        entry_sources,
        environment_source,
        skill_guidance_source,
    )

__all__ = [
    "CONFIG_INSTRUCTIONS_KEY",
    "DATE_KEY",
    "DISCOVERY_KEY",
    "EMPTY",
    "ENTRY_KEY_PATTERN",
    "ENVIRONMENT_KEY",
    "JSON",
    "KEY_PATTERN",
    "SKILL_GUIDANCE_KEY",
    "UNAVAILABLE",
    "UNCHANGED",
    "Applied",
    "AppliedSource",
    "Baseline",
    "DuplicateKeyError",
    "EmptyRenderError",
    "Environment",
    "InstructionsBlocked",
    "InstructionFile",
    "Instructions",
    "Observation",
    "ReconcileResult",
    "SkillInfo",
    "Source",
    "Unavailable",
    "Unchanged",
    "Updated",
    "applied_from_json",
    "applied_to_json",
    "canonical_json",
    "combine",
    "config_instructions_source",
    "date_source",
    "discover_instruction_paths",
    "discovery_source",
    "entry_key",
    "entry_sources",
    "environment_source",
    "initialize",
    "make",
    "rebaseline",
    "reconcile",
    "skill_guidance_source",
    "validate_key",
]


def __getattr__(name: str) -> Any:
    if name in __all__:
        for where in (".algebra", ".discovery", ".sources"):
            module = import_module(where, __name__)
            if hasattr(module, name):
                return getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
