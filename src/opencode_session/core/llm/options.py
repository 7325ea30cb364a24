"""The one ingestion step for OpenCode-style option objects (a model's `options`, a variant): partitions them into
Generation Controls, provider-semantic Model Request Options, and compatibility body fields passed through untouched."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .model import GenerationControls

# Generation Controls by every spelling option objects use (AI SDK camelCase, wire snake_case).
_CONTROLS = {
    "temperature": "temperature",
    "topP": "top_p",
    "top_p": "top_p",
    "topK": "top_k",
    "top_k": "top_k",
    "maxOutputTokens": "max_output_tokens",
    "maxTokens": "max_output_tokens",
    "max_tokens": "max_output_tokens",
    "max_output_tokens": "max_output_tokens",
    "stopSequences": "stop",
    "stop": "stop",
    "seed": "seed",
    "frequencyPenalty": "frequency_penalty",
    "frequency_penalty": "frequency_penalty",
    "presencePenalty": "presence_penalty",
    "presence_penalty": "presence_penalty",
}

# Provider-semantic options (the AI SDK providers' names); only the selected adapter knows their wire encoding.
REQUEST_OPTIONS = frozenset({
    "reasoningEffort", "reasoningSummary", "textVerbosity", "thinking", "parallelToolCalls", "serviceTier",
    "user", "store", "promptCacheKey", "include", "sendReasoning", "effort",
})


@dataclass(frozen=True)
class PartitionedOptions:
    controls: GenerationControls = field(default_factory=GenerationControls)
    options: dict[str, Any] = field(default_factory=dict)
    body: dict[str, Any] = field(default_factory=dict)

    def then(self, later: PartitionedOptions) -> PartitionedOptions:
        """These options with `later`'s layered over them (a variant over its model's options)."""
        return PartitionedOptions(later.controls.over(self.controls), {**self.options, **later.options},
                                  {**self.body, **later.body})


def partition(raw: Mapping[str, Any] | None) -> PartitionedOptions:
    """Split one option object; keys this runtime does not know are compatibility body fields."""
    controls: dict[str, Any] = {}
    options: dict[str, Any] = {}
    body: dict[str, Any] = {}
    for key, value in (raw or {}).items():
        if key in _CONTROLS and value is not None:
            name = _CONTROLS[key]
            if name == "stop":
                value = (value,) if isinstance(value, str) else tuple(value)
            controls[name] = value
        elif key in REQUEST_OPTIONS:
            options[key] = value
        else:
            body[key] = value
    return PartitionedOptions(GenerationControls(**controls), options, body)


__all__ = ["PartitionedOptions", "REQUEST_OPTIONS", "partition"]
