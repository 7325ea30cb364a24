"""Property and unit tests for the Instructions algebra (combine / initialize / reconcile / rebaseline)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from opencode_session.core.instructions import (
    EMPTY,
    UNAVAILABLE,
    UNCHANGED,
    AppliedSource,
    Baseline,
    DuplicateKeyError,
    EmptyRenderError,
    Instructions,
    InstructionsBlocked,
    Source,
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

pytestmark = pytest.mark.anyio

PROPS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# --- a scriptable world of sources --------------------------------------------------------------

OK, GONE, RAISE = "ok", "unavailable", "raise"


def canon(value: Any) -> str:
    return canonical_json(value)


def make_source(key: str, world: Mapping[str, tuple[str, Any]], removable: bool) -> Source[Any]:
    """A source whose loader reads `world[key]` = (state, value); renders are one-line tagged texts."""

    async def load() -> Any:
        state, value = world[key]
        if state == RAISE:
            raise RuntimeError("loader failed")
        if state == GONE:
            return UNAVAILABLE
        return value

    return Source(
        key=key,
        encode=lambda v: v,
        decode=lambda v: v,
        load=load,
        baseline=lambda v: f"B[{key}]={canon(v)}",
        update=lambda p, v: f"U[{key}]={canon(p)}->{canon(v)}",
        removed=(lambda p: f"R[{key}]={canon(p)}") if removable else None,
    )


def build(world: Mapping[str, tuple[str, Any]], order: list[str], removable: Mapping[str, bool]) -> Instructions:
    return combine(*(make_source(k, world, removable[k]) for k in order if k in world))


def expected_reconcile(
    world: Mapping[str, tuple[str, Any]], order: list[str], previous: Mapping[str, AppliedSource]
) -> list[str]:
    """Reference model of the reconcile rules, in terms of the tagged renders above."""
    parts: list[str] = []
    for key in order:
        if key not in world:
            continue
        state, value = world[key]
        if state != OK:
            continue
        if key not in previous:
            parts.append(f"B[{key}]={canon(value)}")
        elif canon(previous[key].value) != canon(value):
            parts.append(f"U[{key}]={canon(previous[key].value)}->{canon(value)}")
    for key in sorted(k for k in previous if k not in world):
        if previous[key].removed is not None:
            parts.append(previous[key].removed)
    return parts


keys_st = st.from_regex(r"[a-z0-9][a-z0-9._-]{0,4}/[a-z0-9][a-z0-9._/-]{0,4}", fullmatch=True)
json_st = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.text(alphabet="ab z", max_size=3),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(alphabet="xy", max_size=2), inner, max_size=3),
    max_leaves=5,
)
state_st = st.sampled_from([OK, OK, OK, GONE, RAISE])


@st.composite
def pools(draw: st.DrawFn) -> tuple[list[str], dict[str, bool]]:
    keys = draw(st.lists(keys_st, min_size=1, max_size=6, unique=True))
    removable = {k: draw(st.booleans()) for k in keys}
    return keys, removable


@st.composite
def worlds(draw: st.DrawFn, keys: list[str], *, all_ok: bool = False) -> dict[str, tuple[str, Any]]:
    present = draw(st.lists(st.sampled_from(keys), unique=True, max_size=len(keys)))
    return {k: (OK if all_ok else draw(state_st), draw(json_st)) for k in present}


def parts_of(result: Unchanged | Updated) -> list[str]:
    return [] if isinstance(result, Unchanged) else result.text.split("\n\n")


# --- properties ----------------------------------------------------------------------------------


@PROPS
@given(pool=pools(), data=st.data())
async def test_reconcile_right_after_initialize_is_unchanged(pool, data) -> None:
    keys, removable = pool
    world = data.draw(worlds(keys, all_ok=True))
    instr = build(world, keys, removable)
    base = await initialize(instr)
    assert base.text == "\n\n".join(f"B[{k}]={canon(world[k][1])}" for k in keys if k in world)
    assert list(base.applied) == [k for k in keys if k in world]
    assert await reconcile(instr, base.applied) is UNCHANGED


@PROPS
@given(pool=pools(), data=st.data())
async def test_change_sequences_converge_and_follow_the_rules(pool, data) -> None:
    keys, removable = pool
    world = data.draw(worlds(keys, all_ok=True))
    applied = (await initialize(build(world, keys, removable))).applied
    for _ in range(data.draw(st.integers(1, 4))):
        world = data.draw(worlds(keys))
        instr = build(world, keys, removable)
        result = await reconcile(instr, applied)
        assert parts_of(result) == expected_reconcile(world, keys, applied)

        unavailable = {k for k, (state, _) in world.items() if state != OK}
        for part in parts_of(result):
            assert not any(part.startswith(f"{tag}[{k}]") for k in unavailable for tag in "BUR")
        if isinstance(result, Updated):
            new = result.applied
            for key, (state, value) in world.items():
                if state == OK:
                    assert canon(new[key].value) == canon(value)
                    assert new[key].removed == (f"R[{key}]={canon(value)}" if removable[key] else None)
                elif key in applied:
                    assert new[key] == applied[key]  # stale belief kept verbatim
                else:
                    assert key not in new
            for key in applied:
                if key not in world:
                    assert (key in new) == (applied[key].removed is None)
            applied = new
        # Feeding back what was applied, the same observations have nothing more to say.
        assert await reconcile(instr, applied) is UNCHANGED


@PROPS
@given(pool=pools(), data=st.data())
async def test_initialize_is_blocked_by_any_unavailable_source(pool, data) -> None:
    keys, removable = pool
    world = data.draw(worlds(keys))
    instr = build(world, keys, removable)
    blocked = [k for k in keys if k in world and world[k][0] != OK]
    if blocked:
        with pytest.raises(InstructionsBlocked) as err:
            await initialize(instr)
        assert err.value.keys == tuple(blocked)
    else:
        assert isinstance(await initialize(instr), Baseline)


@PROPS
@given(pool=pools(), data=st.data())
async def test_rebaseline_never_blocks_and_recalls_unavailable_sources(pool, data) -> None:
    keys, removable = pool
    first = data.draw(worlds(keys, all_ok=True))
    applied = (await initialize(build(first, keys, removable))).applied
    world = data.draw(worlds(keys))
    base = await rebaseline(build(world, keys, removable), applied)

    expected_parts, expected_keys = [], []
    for key in keys:
        if key not in world:
            continue
        state, value = world[key]
        if state == OK:
            expected_parts.append(f"B[{key}]={canon(value)}")
            expected_keys.append(key)
        elif key in applied:
            expected_parts.append(f"B[{key}]={canon(applied[key].value)}")
            expected_keys.append(key)
    assert base.text == "\n\n".join(expected_parts)
    assert list(base.applied) == expected_keys
    for key in expected_keys:
        if world[key][0] != OK:
            assert base.applied[key] == applied[key]


@PROPS
@given(pool=pools(), data=st.data())
async def test_combine_rejects_duplicate_keys_and_keeps_order(pool, data) -> None:
    keys, removable = pool
    world = {k: (OK, None) for k in keys}
    sources = [make_source(k, world, removable[k]) for k in keys]
    split = data.draw(st.integers(1, len(sources)))
    nested = combine(make(sources[0]), combine(*sources[1:split]), EMPTY, *sources[split:])
    assert nested.keys == tuple(keys)
    dup = data.draw(st.sampled_from(keys))
    with pytest.raises(DuplicateKeyError) as err:
        combine(nested, make_source(dup, world, False))
    assert err.value.key == dup


@PROPS
@given(applied_data=st.dictionaries(keys_st, st.tuples(json_st, st.none() | st.text(alphabet="rm", min_size=1))))
async def test_applied_json_round_trip(applied_data) -> None:
    applied = {k: AppliedSource(v, r) for k, (v, r) in applied_data.items()}
    encoded = applied_to_json(applied)
    assert applied_from_json(json.loads(json.dumps(encoded))) == applied
    assert applied_from_json(json.dumps(encoded)) == applied


# --- direct unit tests ---------------------------------------------------------------------------


def const_source(key: str, value: Any, *, removable: bool = True, decode=lambda v: v, **renders) -> Source[Any]:
    async def load() -> Any:
        return value

    return Source(
        key=key,
        encode=lambda v: v,
        decode=decode,
        load=load,
        baseline=renders.get("baseline", lambda v: f"base {v}"),
        update=renders.get("update", lambda p, v: f"upd {p}->{v}"),
        removed=renders.get("removed", (lambda p: f"gone {p}") if removable else None),
    )


@pytest.mark.parametrize("key", ["core", "Core/x", "/x", "core/", "core/X", "-a/b", "a/-b", "a b/c", ""])
def test_invalid_keys_are_rejected(key: str) -> None:
    with pytest.raises(ValueError):
        validate_key(key)
    with pytest.raises(ValueError):
        const_source(key, 1)


@pytest.mark.parametrize("key", ["core/date", "api/x.y_z-1", "mcp/server/one", "0/0"])
def test_valid_keys(key: str) -> None:
    assert validate_key(key) == key


async def test_empty_is_identity() -> None:
    a = make(const_source("t/a", 1))
    assert combine(EMPTY, a, EMPTY).keys == ("t/a",)
    assert combine().keys == () and not EMPTY and len(EMPTY) == 0
    assert await initialize(EMPTY) == Baseline("", {})
    assert await reconcile(EMPTY, {}) is UNCHANGED
    assert await rebaseline(EMPTY, {}) == Baseline("", {})


async def test_initialize_text_applied_and_removal_prerendered() -> None:
    instr = combine(const_source("t/a", 1), const_source("t/b", [2], removable=False))
    base = await initialize(instr)
    assert base.text == "base 1\n\nbase [2]"
    assert base.applied == {"t/a": AppliedSource(1, "gone 1"), "t/b": AppliedSource([2], None)}


async def test_reconcile_rules_by_example() -> None:
    previous = {
        "t/same": AppliedSource({"x": 1, "y": 2}, "gone same"),
        "t/changed": AppliedSource(1, "gone 1"),
        "t/bad": AppliedSource("not-an-int", None),
        "t/down": AppliedSource(5, "gone 5"),
        "t/removed": AppliedSource(9, "removal prerendered earlier"),
        "t/quiet": AppliedSource(3, None),
    }

    async def unavailable() -> Any:
        return UNAVAILABLE

    down = Source("t/down", lambda v: v, lambda v: v, unavailable, str, lambda p, v: "x", lambda p: "x")

    def strict_int(v: Any) -> int:
        if not isinstance(v, int):
            raise ValueError(v)
        return v

    instr = combine(
        const_source("t/new", "n"),
        const_source("t/same", {"y": 2, "x": 1}),  # equal under canonical JSON
        const_source("t/changed", 2),
        const_source("t/bad", 7, decode=strict_int),
        down,
    )
    result = await reconcile(instr, previous)
    assert isinstance(result, Updated)
    assert result.text == "base n\n\nupd 1->2\n\nbase 7\n\nremoval prerendered earlier"
    assert result.applied == {
        "t/new": AppliedSource("n", "gone n"),
        "t/same": previous["t/same"],
        "t/changed": AppliedSource(2, "gone 2"),
        "t/bad": AppliedSource(7, "gone 7"),
        "t/down": previous["t/down"],
        "t/quiet": previous["t/quiet"],
    }


async def test_absent_sources_are_removed_in_sorted_key_order() -> None:
    previous = {"t/b": AppliedSource(1, "gone b"), "t/a": AppliedSource(1, "gone a"), "t/c": AppliedSource(1, None)}
    result = await reconcile(EMPTY, previous)
    assert result == Updated("gone a\n\ngone b", {"t/c": AppliedSource(1, None)})
    assert await reconcile(EMPTY, result.applied) is UNCHANGED


async def test_rebaseline_recalls_and_drops() -> None:
    async def unavailable() -> Any:
        return UNAVAILABLE

    def src(key: str) -> Source[Any]:
        return Source(key, lambda v: v, lambda v: int(v), unavailable, lambda v: f"recalled {v}", lambda p, v: "u")

    previous = {"t/known": AppliedSource(4, None), "t/garbage": AppliedSource("zz", None),
                "t/absent": AppliedSource(1, "r")}
    base = await rebaseline(combine(const_source("t/live", 1), src("t/known"), src("t/garbage"), src("t/never")),
                            previous)
    assert base == Baseline("base 1\n\nrecalled 4",
                            {"t/live": AppliedSource(1, "gone 1"), "t/known": AppliedSource(4, None)})


async def test_loader_exception_counts_as_unavailable_and_is_logged_by_name(caplog) -> None:
    async def boom() -> Any:
        raise OSError("disk on fire")

    failing = Source("t/boom", lambda v: v, lambda v: v, boom, str, lambda p, v: str(v))
    with pytest.raises(InstructionsBlocked) as err:
        await initialize(combine(const_source("t/ok", 1), failing))
    assert err.value.keys == ("t/boom",)
    assert str(err.value) == "Instructions unavailable: t/boom (OSError: disk on fire)"  # named, with its cause
    assert "instruction source t/boom failed" in caplog.text and "disk on fire" in caplog.text
    assert await reconcile(make(failing), {"t/boom": AppliedSource(1, None)}) is UNCHANGED


async def test_observe_is_concurrent_and_keeps_declared_order() -> None:
    released = anyio.Event()

    async def waits() -> Any:
        await released.wait()
        return "first"

    async def releases() -> Any:
        released.set()
        return "second"

    instr = combine(
        Source("t/waits", lambda v: v, lambda v: v, waits, str, lambda p, v: v),
        Source("t/releases", lambda v: v, lambda v: v, releases, str, lambda p, v: v),
    )
    with anyio.fail_after(5):
        observations = await instr.observe()
    assert [(o.key, o.value) for o in observations] == [("t/waits", "first"), ("t/releases", "second")]


@pytest.mark.parametrize("which", ["baseline", "update", "removal"])
async def test_empty_renders_are_errors(which: str) -> None:
    renders = {
        "baseline": {"baseline": lambda v: ""},
        "update": {"update": lambda p, v: "  \n"},
        "removal": {"removed": lambda p: ""},
    }[which]
    instr = make(const_source("t/e", 2, **renders))
    with pytest.raises(EmptyRenderError) as err:
        if which == "update":
            await reconcile(instr, {"t/e": AppliedSource(1, None)})
        else:
            await initialize(instr)
    assert (err.value.key, err.value.which) == ("t/e", which)


@pytest.mark.parametrize(
    "garbage",
    [None, 3, "not json", "[1]", [], {"Bad Key": {"value": 1}}, {"t/a": 1}, {"t/a": {}},
     {"t/a": {"value": 1, "removed": ""}}, {"t/a": {"value": 1, "removed": 5}}, {"t/a": {"value": 1, "extra": True}},
     b"\xff"],
)
def test_applied_from_json_tolerates_garbage(garbage: Any) -> None:
    assert applied_from_json(garbage) == {}


def test_applied_to_json_shape() -> None:
    applied = {"t/b": AppliedSource([1, 2], None), "t/a": AppliedSource({"k": "v"}, "bye")}
    assert applied_to_json(applied) == {"t/a": {"value": {"k": "v"}, "removed": "bye"}, "t/b": {"value": [1, 2]}}


def test_unavailable_is_a_singleton() -> None:
    assert type(UNAVAILABLE)() is UNAVAILABLE
    assert repr(UNAVAILABLE) == "UNAVAILABLE"
