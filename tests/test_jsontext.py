"""JSON as JSON defines it: finding values JSON cannot carry, and replacing them (pure functions)."""

from __future__ import annotations

import json
import math

from opencode_session.schema import jsontext


def test_first_invalid_names_the_path_of_the_first_problem():
    assert jsontext.first_invalid({"a": [1, "ok", {"b": 2.5}], "c": None}) is None
    assert jsontext.first_invalid({"a": [1, {"b": math.nan}]}) == ("a.1.b", "not a finite number (JSON has no NaN "
                                                                              "or Infinity)")
    assert jsontext.first_invalid([{"x": "fine"}, {"y": "bad \ud800"}])[0] == "1.y"
    assert jsontext.first_invalid({"\udfff": 1}) == ("\udfff", "a key with a lone UTF-16 surrogate")
    assert jsontext.first_invalid(-math.inf)[0] == ""
    assert jsontext.first_invalid("a real pair \U0001f600") is None


def test_a_deep_value_does_not_exhaust_the_stack():
    deep: object = "bad \ud800"
    for _ in range(50_000):
        deep = [deep]
    assert jsontext.first_invalid(deep)[0].count(".") == 49_999
    cleaned = jsontext.sanitize(deep)
    for _ in range(50_000):
        cleaned = cleaned[0]
    assert cleaned == "bad \ufffd"


def test_sanitize_replaces_only_what_json_cannot_carry():
    clean = {"a": [1, 2.5, "é \U0001f600"], "b": {"c": None, "d": True}}
    assert jsontext.sanitize(clean) is clean
    dirty = {"k\ud800": [math.nan, math.inf, "x\udc00y", 3], "z": {"n": -math.inf}}
    assert jsontext.sanitize(dirty) == {"k\ufffd": [None, None, "x\ufffdy", 3], "z": {"n": None}}
    assert list(jsontext.sanitize({"b": math.nan, "a": 1})) == ["b", "a"]  # key order is kept
    assert jsontext.sanitize(dirty) is not dirty and dirty["z"]["n"] == -math.inf  # the input is left alone


def test_encode_always_gives_utf8_json_text():
    value, text = jsontext.encode({"t": "ok"})
    assert text == '{"t":"ok"}'
    value, text = jsontext.encode({"t": "bad \ud800", "n": math.nan})
    assert value == {"t": "bad \ufffd", "n": None}
    assert json.loads(text.encode("utf-8")) == value
    assert jsontext.loads('{"t": "\\ud800", "n": NaN}') == {"t": "\ufffd", "n": None}
