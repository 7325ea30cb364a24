"""JSONC as OpenCode reads it: comments and trailing commas blanked in place (so errors keep their line and
column), the top-level object parsed, and where each key starts, for pointing warnings at lines."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from json.decoder import scanstring  # type: ignore[attr-defined]  # exported by the stdlib, absent from typeshed
from pathlib import Path
from typing import Any

from .model import ConfigError


def strip_jsonc(text: str) -> str:
    """JSON text for JSONC: comments blanked and trailing commas removed. Blanking (rather than
    deleting) keeps every remaining character on its original line and column, so JSON syntax
    errors still point at the right place in the user's file. Raises ValueError(msg, offset) for an
    unterminated comment or string."""
    out = list(text)
    i, n = 0, len(text)
    last_comma: int | None = None  # offset of a comma that may turn out to be trailing
    while i < n:
        ch = text[i]
        if ch == '"':
            last_comma = None
            i += 1
            while i < n and text[i] != '"':
                if text[i] == "\\":
                    i += 1
                elif text[i] == "\n":
                    break  # let json report the broken string at its real position
                i += 1
            i += 1
            continue
        if ch == "/" and i + 1 < n and text[i + 1] == "/":
            while i < n and text[i] != "\n":
                out[i] = " "
                i += 1
            continue
        if ch == "/" and i + 1 < n and text[i + 1] == "*":
            end = text.find("*/", i + 2)
            if end < 0:
                raise ValueError("unterminated /* comment", i)
            for j in range(i, end + 2):
                if out[j] != "\n":
                    out[j] = " "
            i = end + 2
            continue
        if ch == ",":
            last_comma = i
        elif ch in "}]":
            if last_comma is not None:
                out[last_comma] = " "
            last_comma = None
        elif not ch.isspace():
            last_comma = None
        i += 1
    return "".join(out)


def _line_col(text: str, offset: int) -> tuple[int, int]:
    line = text.count("\n", 0, offset) + 1
    column = offset - (text.rfind("\n", 0, offset) + 1) + 1
    return line, column


def parse_jsonc(text: str, path: Path | str = "<string>") -> dict[str, Any]:
    return _parse_jsonc(text, path)[0]


def _parse_jsonc(text: str, path: Path | str) -> tuple[dict[str, Any], str]:
    """The object and the JSON text it was read from (same lines and columns as `text`)."""
    if text.startswith("\ufeff"):
        text = " " + text[1:]
    if not text.strip():
        return {}, text
    try:
        cleaned = strip_jsonc(text)
    except ValueError as exc:
        message, offset = exc.args
        line, column = _line_col(text, offset)
        raise ConfigError(path, message, line=line, column=column) from None
    try:
        data = json.loads(cleaned)
    except json.JSONDecodeError as exc:
        raise ConfigError(path, exc.msg, line=exc.lineno, column=exc.colno) from None
    if not isinstance(data, dict):
        raise ConfigError(path, f"the top level must be an object, not {type(data).__name__}", line=1, column=1)
    return data, cleaned


_SPACE = re.compile(r"\s*")
_SCALAR = re.compile(r"[^\s,\]}]+")
Key = tuple[str | int, ...]


def key_offsets(cleaned: str) -> dict[Key, int]:
    """Where each object key (by its path) and array item starts in valid JSON text, for pointing at lines."""
    positions: dict[Key, int] = {}

    def value(i: int, where: Key) -> int:
        i = _SPACE.match(cleaned, i).end()  # type: ignore[union-attr]
        opener = cleaned[i]
        if opener == '"':
            return scanstring(cleaned, i + 1)[1]
        if opener not in "{[":
            return _SCALAR.match(cleaned, i).end()  # type: ignore[union-attr]
        closer, index = ("}" if opener == "{" else "]"), 0
        i += 1
        while True:
            i = _SPACE.match(cleaned, i).end()  # type: ignore[union-attr]
            if cleaned[i] == closer:
                return i + 1
            if opener == "{":
                key, end = scanstring(cleaned, i + 1)
                positions[(*where, key)] = i
                i = value(_SPACE.match(cleaned, end).end() + 1, (*where, key))  # type: ignore[union-attr]
            else:
                positions[(*where, index)] = i
                i = value(i, (*where, index))
                index += 1
            i = _SPACE.match(cleaned, i).end()  # type: ignore[union-attr]
            if cleaned[i] == ",":
                i += 1

    try:
        value(0, ())
    except (IndexError, ValueError, AttributeError):  # only ever given text json.loads accepted
        pass
    return positions


def _line_of(cleaned: str, positions: Mapping[Key, int], where: Key) -> int | None:
    """The line of the deepest located prefix of `where`."""
    for depth in range(len(where), 0, -1):
        offset = positions.get(where[:depth])
        if offset is not None:
            return _line_col(cleaned, offset)[0]
    return None


__all__ = ["Key", "key_offsets", "parse_jsonc", "strip_jsonc"]
