"""The Instructions algebra: typed sources, ordered composition, and the pure
initialize / reconcile / rebaseline operations over the `Applied` record."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Generic, Literal, TypeVar

import anyio

__all__ = [
    "EMPTY",
    "JSON",
    "KEY_PATTERN",
    "UNAVAILABLE",
    "Applied",
    "AppliedSource",
    "Baseline",
    "DuplicateKeyError",
    "EmptyRenderError",
    "InstructionsBlocked",
    "Instructions",
    "KeyedDiff",
    "Observation",
    "ReconcileResult",
    "Source",
    "Unavailable",
    "Unchanged",
    "Updated",
    "UNCHANGED",
    "applied_from_json",
    "applied_to_json",
    "canonical_json",
    "combine",
    "diff_by_key",
    "initialize",
    "make",
    "rebaseline",
    "reconcile",
    "validate_key",
]

log = logging.getLogger(__name__)

JSON = Any
"""A JSON-compatible value (dict / list / str / int / float / bool / None)."""

A = TypeVar("A")

KEY_PATTERN: Final = re.compile(r"^[a-z0-9][a-z0-9._-]*/[a-z0-9][a-z0-9._/-]*$")

RenderKind = Literal["baseline", "update", "removal"]

PART_SEPARATOR: Final = "\n\n"


# --- sentinel and errors ---------------------------------------------------------------------


class Unavailable:
    """Type of the `UNAVAILABLE` sentinel a loader returns when it cannot observe its value now."""

    _instance: Unavailable | None = None

    def __new__(cls) -> Unavailable:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNAVAILABLE"

    def __reduce__(self) -> str:
        return "UNAVAILABLE"


UNAVAILABLE: Final = Unavailable()


class DuplicateKeyError(ValueError):
    """Two sources with the same key were combined."""

    def __init__(self, key: str) -> None:
        super().__init__(f"duplicate instruction source key: {key}")
        self.key = key


class InstructionsBlocked(Exception):
    """The first complete Instruction Baseline cannot be built yet: these sources are unavailable. It blocks the Step
    (and so input promotion) instead of persisting an incomplete baseline."""

    def __init__(self, keys: Iterable[str], causes: Mapping[str, str] | None = None) -> None:
        self.keys: tuple[str, ...] = tuple(keys)
        self.causes: dict[str, str] = dict(causes or {})  # by key: why a source that raised failed
        super().__init__("Instructions unavailable: " + ", ".join(
            f"{key} ({self.causes[key]})" if key in self.causes else key for key in self.keys))


class EmptyRenderError(ValueError):
    """A renderer produced empty (or whitespace-only) text, which is never shown to the model."""

    def __init__(self, key: str, which: RenderKind) -> None:
        super().__init__(f"instruction source {key} rendered an empty {which}")
        self.key = key
        self.which = which


def validate_key(key: str) -> str:
    """Return `key` if it is a namespaced source key (`ns/name`), else raise ValueError."""
    if not isinstance(key, str) or KEY_PATTERN.fullmatch(key) is None:
        raise ValueError(f"invalid instruction source key: {key!r}")
    return key


def canonical_json(value: JSON) -> str:
    """The canonical text of a JSON value; two values are equal iff their canonical texts are."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _normalize(value: JSON) -> JSON:
    """Round-trip through JSON so stored values are plain JSON (tuples become lists, ...).
    Object key order is preserved; only comparisons use the canonical (sorted) form."""
    return json.loads(json.dumps(value, ensure_ascii=False, allow_nan=False))


# --- sources ---------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Source(Generic[A]):
    """One independently observed typed value: key, JSON codec, loader and pure renderers."""

    key: str
    encode: Callable[[A], JSON]
    decode: Callable[[JSON], A]
    load: Callable[[], Awaitable[A | Unavailable]]
    baseline: Callable[[A], str]
    update: Callable[[A, A], str]
    removed: Callable[[A], str] | None = None

    def __post_init__(self) -> None:
        validate_key(self.key)

    # Checked renderers: every text that reaches the model is non-empty.

    def render_baseline(self, current: A) -> str:
        return _checked(self.key, "baseline", self.baseline(current))

    def render_update(self, previous: A, current: A) -> str:
        return _checked(self.key, "update", self.update(previous, current))

    def render_removal(self, previous: A) -> str | None:
        if self.removed is None:
            return None
        return _checked(self.key, "removal", self.removed(previous))

    def applied(self, current: A) -> AppliedSource:
        """The record stored once the model has been told `current`."""
        return AppliedSource(value=_normalize(self.encode(current)), removed=self.render_removal(current))


def _checked(key: str, which: RenderKind, text: object) -> str:
    if not isinstance(text, str) or not text.strip():
        raise EmptyRenderError(key, which)
    return text


@dataclass(frozen=True)
class Observation:
    """One source's value as observed now (or `UNAVAILABLE`)."""

    source: Source[Any]
    value: Any
    cause: str | None = None  # why its loader raised (it is then UNAVAILABLE)

    @property
    def key(self) -> str:
        return self.source.key

    @property
    def available(self) -> bool:
        return self.value is not UNAVAILABLE


class Instructions:
    """An opaque, ordered carrier of sources with unique keys. Build with `make` / `combine`."""

    __slots__ = ("_sources",)

    def __init__(self, _sources: tuple[Source[Any], ...] = ()) -> None:
        self._sources = _sources

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(s.key for s in self._sources)

    def __len__(self) -> int:
        return len(self._sources)

    def __bool__(self) -> bool:
        return bool(self._sources)

    def __repr__(self) -> str:
        return f"Instructions({', '.join(self.keys)})"

    @staticmethod
    def make(source: Source[Any]) -> Instructions:
        return make(source)

    @staticmethod
    def combine(*parts: Instructions | Source[Any] | Iterable[Instructions | Source[Any]]) -> Instructions:
        return combine(*parts)

    async def observe(self) -> list[Observation]:
        """Load every source concurrently; results keep declared order.

        A loader that raises (an ordinary exception, not cancellation) counts as unavailable: it is logged with the
        source's key, and its observation carries the cause.
        """
        results: list[Any] = [UNAVAILABLE] * len(self._sources)
        causes: list[str | None] = [None] * len(self._sources)

        async def run(index: int, source: Source[Any]) -> None:
            try:
                results[index] = await source.load()
            except Exception as failed:  # noqa: BLE001 - unavailable, and said so
                log.error("instruction source %s failed; it counts as unavailable", source.key, exc_info=failed)
                results[index] = UNAVAILABLE
                causes[index] = f"{type(failed).__name__}: {failed}"

        async with anyio.create_task_group() as tg:
            for index, source in enumerate(self._sources):
                tg.start_soon(run, index, source)
        return [Observation(source, value, cause)
                for source, value, cause in zip(self._sources, results, causes, strict=True)]


EMPTY: Final = Instructions()


def make(source: Source[Any]) -> Instructions:
    """Wrap one source, hiding its value type."""
    if not isinstance(source, Source):
        raise TypeError(f"expected a Source, got {type(source).__name__}")
    return Instructions((source,))


def combine(*parts: Instructions | Source[Any] | Iterable[Instructions | Source[Any]]) -> Instructions:
    """Concatenate parts in caller order (flattening nested carriers); reject duplicate keys."""
    flat: list[Source[Any]] = []
    seen: set[str] = set()

    def add(part: Any) -> None:
        if isinstance(part, Instructions):
            for source in part._sources:
                add(source)
        elif isinstance(part, Source):
            if part.key in seen:
                raise DuplicateKeyError(part.key)
            seen.add(part.key)
            flat.append(part)
        elif isinstance(part, Iterable) and not isinstance(part, (str, bytes, Mapping)):
            for item in part:
                add(item)
        else:
            raise TypeError(f"cannot combine {type(part).__name__} into Instructions")

    for part in parts:
        add(part)
    return Instructions(tuple(flat)) if flat else EMPTY


# --- applied record --------------------------------------------------------------------------


@dataclass(frozen=True)
class AppliedSource:
    """What the model was last told for one key: its encoded value and pre-rendered removal text."""

    value: JSON
    removed: str | None = None


Applied = dict[str, AppliedSource]


def applied_to_json(applied: Mapping[str, AppliedSource]) -> dict[str, JSON]:
    """Encode an Applied record as plain JSON; `removed` is omitted when there is none."""
    out: dict[str, JSON] = {}
    for key in sorted(applied):
        entry = applied[key]
        item: dict[str, JSON] = {"value": entry.value}
        if entry.removed is not None:
            item["removed"] = entry.removed
        out[key] = item
    return out


def applied_from_json(data: Any) -> Applied:
    """Decode an Applied record from JSON data (or JSON text). Anything malformed yields `{}`,
    so every source is announced again rather than trusting a corrupt record."""
    if isinstance(data, (str, bytes, bytearray)):
        try:
            data = json.loads(data)
        except ValueError:
            return {}
    if not isinstance(data, dict):
        return {}
    out: Applied = {}
    for key, item in data.items():
        if not isinstance(key, str) or KEY_PATTERN.fullmatch(key) is None:
            return {}
        if not isinstance(item, dict) or "value" not in item or not set(item) <= {"value", "removed"}:
            return {}
        removed = item.get("removed")
        if removed is not None and (not isinstance(removed, str) or not removed.strip()):
            return {}
        try:
            value = _normalize(item["value"])
        except (TypeError, ValueError):
            return {}
        out[key] = AppliedSource(value=value, removed=removed)
    return out


# --- list-shaped values -------------------------------------------------------------------------


@dataclass(frozen=True)
class KeyedDiff(Generic[A]):
    """How a list-shaped value changed: the entries added (in current order), the keys of those removed (in previous
    order) and of those changed."""

    added: tuple[A, ...]
    removed: tuple[str, ...]
    changed: tuple[str, ...]


def diff_by_key(previous: Iterable[A], current: Iterable[A], key: Callable[[A], str]) -> KeyedDiff[A]:
    """The difference of two lists of entries identified by `key`, for update renderers that say only what was added
    or removed when that is all that changed."""
    before = {key(entry): entry for entry in previous}
    after = {key(entry): entry for entry in current}
    return KeyedDiff(tuple(entry for k, entry in after.items() if k not in before),
                     tuple(k for k in before if k not in after),
                     tuple(k for k, entry in after.items() if k in before and before[k] != entry))


# --- results ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Baseline:
    """A complete baseline text and the Applied record describing it."""

    text: str
    applied: Applied = field(default_factory=dict)


@dataclass(frozen=True)
class Unchanged:
    """Reconcile found nothing to tell the model."""


UNCHANGED: Final = Unchanged()


@dataclass(frozen=True)
class Updated:
    """One combined chronological update and the Applied record to store with it."""

    text: str
    applied: Applied


ReconcileResult = Unchanged | Updated


# --- operations ------------------------------------------------------------------------------


_UNDECODABLE: Final = object()


def _decode(source: Source[Any], stored: AppliedSource) -> Any:
    try:
        return source.decode(stored.value)
    except Exception:  # noqa: BLE001 - a stale or corrupt stored value is simply unusable
        return _UNDECODABLE


async def initialize(instr: Instructions) -> Baseline:
    """Observe once and render the complete first baseline; blocked if any source is unavailable."""
    observations = await instr.observe()
    blocked = [o.key for o in observations if not o.available]
    if blocked:
        raise InstructionsBlocked(blocked, {o.key: o.cause for o in observations if o.cause is not None})
    parts: list[str] = []
    applied: Applied = {}
    for o in observations:
        parts.append(o.source.render_baseline(o.value))
        applied[o.key] = o.source.applied(o.value)
    return Baseline(PART_SEPARATOR.join(parts), applied)


async def reconcile(instr: Instructions, previous: Mapping[str, AppliedSource]) -> Unchanged | Updated:
    """Observe once and compare with what the model was told; never touches the baseline."""
    observations = await instr.observe()
    parts: list[str] = []
    applied: Applied = {}
    current_keys: set[str] = set()

    for o in observations:
        source, key = o.source, o.key
        current_keys.add(key)
        stored = previous.get(key)
        if not o.available:
            if stored is not None:
                applied[key] = stored  # stale-while-revalidate: keep the belief, say nothing
            continue
        if stored is None:
            parts.append(source.render_baseline(o.value))
            applied[key] = source.applied(o.value)
            continue
        decoded = _decode(source, stored)
        if decoded is _UNDECODABLE:
            parts.append(source.render_baseline(o.value))
            applied[key] = source.applied(o.value)
            continue
        encoded = source.encode(o.value)
        if canonical_json(encoded) == canonical_json(stored.value):
            applied[key] = stored
            continue
        parts.append(source.render_update(decoded, o.value))
        applied[key] = source.applied(o.value)

    for key in sorted(k for k in previous if k not in current_keys):
        stored = previous[key]
        if stored.removed is not None:
            parts.append(stored.removed)  # announced once; the key is dropped
        else:
            applied[key] = stored  # nothing to say; kept until the next rebaseline

    if not parts:
        return UNCHANGED
    return Updated(PART_SEPARATOR.join(parts), applied)


async def rebaseline(instr: Instructions, previous: Mapping[str, AppliedSource]) -> Baseline:
    """Render a fresh baseline from current values, recalling applied values for unavailable
    sources (skipped if none or undecodable). Absent sources are dropped. Never blocks."""
    observations = await instr.observe()
    parts: list[str] = []
    applied: Applied = {}
    for o in observations:
        source, key = o.source, o.key
        if o.available:
            parts.append(source.render_baseline(o.value))
            applied[key] = source.applied(o.value)
            continue
        stored = previous.get(key)
        if stored is None:
            continue
        decoded = _decode(source, stored)
        if decoded is _UNDECODABLE:
            continue
        parts.append(source.render_baseline(decoded))
        applied[key] = stored
    return Baseline(PART_SEPARATOR.join(parts), applied)
