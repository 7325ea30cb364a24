"""The pure parts of compaction: the token heuristic and its incremental, calibrated estimator; the split of active
history into summarised head and kept tail; chunking; settings and the budget ceiling."""

from __future__ import annotations

import json
from typing import Any

from opencode_session.core.compaction import compactor, render
from opencode_session.core.compaction.tokens import TokenEstimator, entry_tokens, text_tokens
from opencode_session.core.execution.lowering import lower_message
from opencode_session.core.llm import model as llm
from opencode_session.core.session.history import HistoryEntry

MODEL = llm.ResolvedModel("p", "m", "http://127.0.0.1:9/v1", context_limit=8_000, output_limit=1_000)


def entry(seq: int, message: dict[str, Any], rev: int = 0) -> HistoryEntry:
    return HistoryEntry(message["id"], seq, rev, message)


def user(n: int, text: str) -> dict[str, Any]:
    return {"id": f"msg_u{n}", "time": {"created": n}, "type": "user", "text": text}


def assistant(n: int, text: str = "", tool_output: str | None = None, tokens: int | None = None) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if text:
        content.append({"type": "text", "text": text})
    if tool_output is not None:
        content.append({"type": "tool", "id": f"call_{n}", "name": "read",
                        "state": {"status": "completed", "input": {"path": "a.txt"}, "structured": {},
                                  "content": [{"type": "text", "text": tool_output}]},
                        "time": {"created": n}})
    message: dict[str, Any] = {"id": f"msg_a{n}", "time": {"created": n, "completed": n}, "type": "assistant",
                               "agent": "build", "model": {"id": "m", "providerID": "p"}, "content": content}
    if tokens is not None:
        message["tokens"] = {"input": tokens, "output": 1, "reasoning": 0, "cache": {"read": 0, "write": 0}}
    return message


def test_the_heuristic_errs_high_against_a_quarter_token_per_character_of_prose_and_code():
    prose = "The quick brown fox jumps over the lazy dog, and then it rests for a while. " * 50
    code = "def f(x: int) -> int:\n    return x * 2 + g(y, z)  # why: doubling\n" * 50
    assert text_tokens(prose) >= len(prose) / 4
    assert text_tokens(code) >= len(code) / 4
    assert text_tokens("日本語のテキスト") >= len("日本語のテキスト")  # a token per CJK character
    assert text_tokens("") == 0


def test_the_estimator_updates_only_changed_entries_and_always_equals_a_full_recount():
    estimator = TokenEstimator()
    entries = [entry(i, user(i, f"message number {i} " * 20)) for i in range(50)]
    first = estimator.history_tokens("s", entries)
    assert first == sum(entry_tokens(e) for e in entries)
    # a new revision of one entry (the running assistant) and one appended entry
    changed = list(entries)
    changed[10] = entry(10, user(10, "short now"), rev=1)
    changed.append(entry(50, assistant(50, "an answer " * 30)))
    assert estimator.history_tokens("s", changed) == sum(entry_tokens(e) for e in changed)
    # entries carry their estimate: an unchanged entry is never re-measured
    assert all("tokens" in e.derived for e in changed)
    # history that got shorter (a compaction) is recounted from scratch
    assert estimator.history_tokens("s", changed[40:]) == sum(entry_tokens(e) for e in changed[40:])


def test_reported_input_usage_calibrates_later_estimates_for_that_model():
    estimator = TokenEstimator()
    entries = [entry(0, user(0, "hello " * 100))]
    raw = estimator.raw_request_tokens("s", ["system text"], entries, [], [])
    estimator.sent("s", "msg_a1", raw)
    answered = entries + [entry(1, assistant(1, "hi", tokens=raw * 2))]
    estimator.observe("s", MODEL, answered)
    assert estimator.calibrated(MODEL, 1000) == 2000
    other = llm.ResolvedModel("p", "other", "http://127.0.0.1:9/v1")
    assert estimator.calibrated(other, 1000) == 1000
    # an absurd report is bounded
    estimator.sent("s", "msg_a2", 10)
    estimator.observe("s", MODEL, answered + [entry(2, assistant(2, "x", tokens=10_000))])
    assert estimator.calibrated(MODEL, 1000) == 4000


def test_the_split_keeps_a_bounded_tail_from_a_user_message_and_tool_calls_with_their_results():
    big = "line of tool output that goes on\n" * 70  # clipped to 2,000 characters once serialized
    messages = []
    for turn in range(6):
        messages += [user(turn * 3, f"read file {turn}"), assistant(turn * 3 + 1, tool_output=big),
                     assistant(turn * 3 + 2, f"done {turn}")]
    entries = [entry(i, m) for i, m in enumerate(messages)]
    cut = compactor.split(entries, keep_tokens=1_200)
    assert cut is not None and cut.head and cut.tail
    assert cut.tail[0].message["type"] == "user"
    assert text_tokens(cut.recent) <= 2 * 1_200
    recent = cut.recent
    assert recent.count("[Assistant tool call]") == recent.count("[Tool result]")
    assert render.TRUNCATED.strip() in recent
    # nothing older than the tail: nothing to compact
    assert compactor.split(entries[:1], keep_tokens=1_200) is None


def test_a_huge_newest_message_keeps_only_its_end_in_the_recent_tail():
    entries = [entry(0, user(0, "start")), entry(1, assistant(1, "early")), entry(2, user(2, "go")),
               entry(3, assistant(3, "filler words " * 5_000 + "THE END"))]
    cut = compactor.split(entries, keep_tokens=500)
    assert cut is not None
    recent = cut.recent
    assert text_tokens(recent) <= 2 * 500 and recent.startswith(compactor.EARLIER_CUT)
    assert recent.endswith("THE END")


def test_an_earlier_checkpoint_is_folded_into_the_next_summary_not_nested():
    checkpoint = {"id": "msg_c", "time": {"created": 0}, "type": "compaction", "reason": "auto",
                  "status": "completed", "summary": "## Objective\n- old", "recent": "[User]: earlier"}
    entries = [entry(0, checkpoint), entry(1, user(1, "next")), entry(2, assistant(2, "answer " * 400)),
               entry(3, user(3, "again"))]
    cut = compactor.split(entries, keep_tokens=200)
    assert cut is not None and cut.previous is checkpoint
    assert all(e.message["type"] != "compaction" for e in cut.head + cut.tail)


def test_chunks_each_fit_the_budget_even_when_one_piece_alone_does_not():
    pieces = ["word " * 300, "more " * 300, "giant " * 5_000]
    chunks = compactor._chunks(pieces, budget=400)
    assert len(chunks) >= 3 and all(text_tokens(c) <= 400 + 2 for c in chunks)


def test_a_completed_compaction_lowers_to_one_checkpoint_user_message_and_a_running_one_to_nothing():
    message = {"id": "msg_c", "time": {"created": 0}, "type": "compaction", "reason": "manual",
               "status": "completed", "summary": "## Objective\n- x", "recent": "[User]: hi"}
    lowered = lower_message(message, None)
    assert len(lowered) == 1 and isinstance(lowered[0], llm.UserMessage)
    text = lowered[0].parts[0].text
    assert text.startswith("<conversation-checkpoint>") and "## Objective\n- x" in text and "[User]: hi" in text
    assert lower_message({**message, "status": "running"}, None) == []
    assert lower_message({**message, "status": "failed"}, None) == []


def test_settings_and_ceiling():
    assert compactor.CompactionSettings.of(None) == compactor.CompactionSettings()
    settings = compactor.CompactionSettings.of({"auto": False, "reserved": 1_500, "tokens": "many"})
    assert (settings.auto, settings.buffer, settings.keep_tokens) == (False, 1_500, compactor.DEFAULT_KEEP_TOKENS)
    assert compactor.ceiling(MODEL, compactor.CompactionSettings(buffer=1_500)) == 6_500
    unknown = llm.ResolvedModel("p", "m", "http://127.0.0.1:9/v1")
    assert compactor.ceiling(unknown, compactor.CompactionSettings()) is None
    limited = llm.ResolvedModel("p", "m", "u", context_limit=200_000, output_limit=64_000, input_limit=100_000)
    assert compactor.ceiling(limited, compactor.CompactionSettings()) == 100_000 - 20_000


def test_summary_validation_needs_a_template_heading_on_its_own_line():
    assert render.follows_template("## Objective\n- x")
    assert not render.follows_template("I will write ## Objective later")
    assert all(heading in render.summary_prompt(False) for heading in render.HEADINGS)


def test_a_structured_only_tool_result_counts_and_shows_as_its_json():
    rows = {"rows": [{"id": n, "name": f"row {n}"} for n in range(200)]}
    message = assistant(1, tool_output="")
    state = message["content"][0]["state"]
    state["content"], empty = [], entry_tokens(entry(1, assistant(1, tool_output="")))
    state["structured"] = rows
    as_json = "[Tool result]: " + render._clip(json.dumps(rows, ensure_ascii=False))
    assert entry_tokens(entry(1, message)) > empty + text_tokens(json.dumps(rows)) // 2  # what the model is sent
    assert as_json in render.serialize(message)  # and what a summary reads of it
