"""JSON as JSON defines it: finite numbers and well-formed Unicode text. Finds the first value that is not (so input
can be rejected naming it), and replaces such values (so text from outside, or stored before, can always be encoded)."""

from __future__ import annotations

import json
import math
from typing import Any


def _lone_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _problem(value: Any) -> str | None:
    if isinstance(value, float) and not math.isfinite(value):
        return "not a finite number (JSON has no NaN or Infinity)"
    if isinstance(value, str) and _lone_surrogate(value):
        return "text with a lone UTF-16 surrogate"
    return None


def first_invalid(value: Any) -> tuple[str, str] | None:
    """The dotted path and the problem of the first value JSON cannot carry (object keys included), or None.

    Iterative, so a deeply nested value cannot exhaust the stack."""
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, dict):
            children = []
            for key, child in item.items():
                where = f"{path}.{key}" if path else str(key)
                if isinstance(key, str) and _lone_surrogate(key):
                    return where, "a key with a lone UTF-16 surrogate"
                children.append((where, child))
            stack.extend(reversed(children))
        elif isinstance(item, (list, tuple)):
            stack.extend(reversed([(f"{path}.{i}" if path else str(i), child) for i, child in enumerate(item)]))
        else:
            problem = _problem(item)
            if problem is not None:
                return path, problem
    return None


def _clean_text(text: str) -> str:
    # a lone surrogate survives UTF-16 only as an unpaired code unit, which decoding replaces
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace") if _lone_surrogate(text) else text


def sanitize(value: Any) -> Any:
    """`value` with non-finite numbers as null and lone surrogates as U+FFFD; the same object when already clean."""
    if first_invalid(value) is None:
        return value
    root: list[Any] = [None]
    stack: list[tuple[Any, Any, Any]] = [(value, root, 0)]
    while stack:
        item, parent, slot = stack.pop()
        if isinstance(item, dict):
            keys = [_clean_text(k) if isinstance(k, str) else k for k in item]
            parent[slot] = fresh = dict.fromkeys(keys)
            stack.extend((child, fresh, key) for key, child in zip(keys, item.values(), strict=True))
        elif isinstance(item, (list, tuple)):
            parent[slot] = items = [None] * len(item)
            stack.extend((child, items, i) for i, child in enumerate(item))
        elif isinstance(item, float) and not math.isfinite(item):
            parent[slot] = None
        elif isinstance(item, str):
            parent[slot] = _clean_text(item)
        else:
            parent[slot] = item
    return root[0]


def encode(value: Any) -> tuple[Any, str]:
    """`value` as JSON can carry it (the same object when it already was) and its compact JSON text, which always
    encodes to UTF-8."""
    try:
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        text.encode("utf-8")
        return value, text
    except ValueError:  # a non-finite number, or (UnicodeEncodeError) a lone surrogate
        value = sanitize(value)
        return value, json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def dumps(value: Any) -> str:
    """Compact JSON text that always encodes to UTF-8: values JSON cannot carry are sanitized first."""
    return encode(value)[1]


def loads(text: str | bytes) -> Any:
    """Parse stored JSON text into values JSON can carry (NaN becomes null, a lone surrogate U+FFFD)."""
    return sanitize(json.loads(text))
