"""Compaction end to end over HTTP: `ocs serve` runs the Chat Completions adapter against a loopback provider that
behaves like a model with a small context window (it refuses what does not fit and reports usage), and the client
reads what a user would: the durable log, the transcript, the active context and the requests the model received."""

from __future__ import annotations

import json

import anyio
import pytest

from opencode_session.client import OpenCodeClient, SessionNotFoundError
from opencode_session.core.compaction import render
from tests.support import fake_openai as fake
from tests.support.server import start_configured

pytestmark = pytest.mark.anyio

WINDOW = 8_000
OUTPUT = 1_000
FILE_LINE = "The quick brown fox jumps over the lazy dog while the compiler reports warning W{n:04d}.\n"
MODELS = {"small": {"limit": {"context": WINDOW, "output": OUTPUT}}, "plain": {}}
# OpenCode's defaults (a 20k buffer, a 15k tail) are sized for large windows; this one is 8k
COMPACTION = {"buffer": 1_500, "tokens": 1_200}


@pytest.fixture(scope="module")
def provider(loop_provider):
    return loop_provider


@pytest.fixture(scope="module")
def ocs(tmp_path_factory, provider):
    config = provider.serve_config(MODELS, model="loop/small", compaction=COMPACTION)
    # retries without real backoff
    srv, work = start_configured(tmp_path_factory.mktemp("compaction"), config, OCS_RETRY_BASE_DELAY_MS="20")
    for n in range(8):  # each about 1,500 tokens: a few reads fill the window
        (work / f"big{n}.txt").write_text("".join(FILE_LINE.format(n=i + 100 * n) for i in range(70)))
    yield srv
    assert srv.stop() == 0, "".join(srv.stderr_lines)


@pytest.fixture
async def client(ocs, provider):
    provider.requests.clear()
    provider.summary_requests.clear()
    provider.summaries.clear()
    provider.prompt_tokens.clear()
    provider.overflows = 0
    provider.context_window = WINDOW
    async with OpenCodeClient(ocs.url) as c:
        yield c
    provider.context_window = None
    assert provider.pending == 0, "a scripted provider response was never requested"
    assert not provider.summaries, "a scripted summary was never requested"


def read_call(n: int, call: str | None = None) -> fake.StreamScript:
    arguments = json.dumps({"path": f"big{n}.txt"})
    return fake.completion(fake.tool_call_deltas(0, call or f"call_{n}", "read", arguments), finish_reason="tool_calls")


def answer(text: str) -> fake.StreamScript:
    return fake.completion(fake.text_deltas(text))


async def turn(client: OpenCodeClient, sid: str, text: str, **kw) -> None:
    await client.session.prompt(sid, prompt={"text": text}, **kw)
    with anyio.fail_after(60):
        await client.session.wait(sid)


async def log_of(client: OpenCodeClient, sid: str) -> list:
    return [e async for e in client.session.log(sid, follow=False) if e.type not in ("log.synced", "session.renamed")]


async def full_log(client: OpenCodeClient, sid: str) -> list:
    return [e async for e in client.session.log(sid, follow=False) if e.type != "log.synced"]


def of_type(log: list, type_: str) -> list:
    return [e for e in log if e.type == type_]


def step_messages(request: fake.RecordedRequest) -> list[dict]:
    return request.json["messages"]


async def all_messages(client: OpenCodeClient, sid: str) -> list:
    return (await client.session.messages(sid, limit=200, order="asc")).items


def checkpoints_in(request: fake.RecordedRequest) -> int:
    return sum(json.dumps(m).count("<conversation-checkpoint>") for m in step_messages(request))


async def history(client: OpenCodeClient, provider: fake.FakeOpenAI, sid: str, turns: int) -> None:
    """`turns` finished exchanges, each reading a big file: older history worth compacting."""
    for n in range(turns):
        provider.enqueue(read_call(n % 8, f"h{n}"), answer(f"Read file {n}."))
        await turn(client, sid, f"Please read big{n % 8}.txt")


# --- automatic compaction -------------------------------------------------------------------------------------


async def test_a_long_tool_loop_on_an_8k_model_compacts_and_every_request_fits(client, provider):
    steps = 14  # about 21,000 tokens of file content through an 8,000-token window
    provider.enqueue(*(read_call(n % 8, f"c{n}") for n in range(steps)), answer("All files read."))
    sid = (await client.session.create()).id
    await turn(client, sid, "Read every big file, one after the other.")
    log = await log_of(client, sid)
    assert log[-1].type == "session.execution.succeeded"
    ended = of_type(log, "session.compaction.ended")
    assert len(ended) >= 2 and {e.data.reason for e in ended} == {"auto"}
    assert not of_type(log, "session.compaction.failed") and provider.overflows == 0
    assert max(provider.prompt_tokens) + OUTPUT <= WINDOW
    # the full transcript stays: every Step's assistant message; the context starts at the latest checkpoint
    transcript = await all_messages(client, sid)
    assert sum(m.type == "assistant" for m in transcript) == steps + 1
    context = await client.session.context(sid)
    assert context[0].type == "compaction" and context[0].id == ended[-1].data.messageID
    assert context[0].summary == fake.SUMMARY and context[0].recent == ended[-1].data.recent
    # a later summary updates the earlier one instead of nesting it; Steps carry exactly one checkpoint
    second = provider.summary_requests[1].json["messages"][-1]["content"]
    assert render.UPDATE_REQUEST in json.dumps(second) and fake.SUMMARY.split("\n")[0] in json.dumps(second)
    assert all(checkpoints_in(r) <= 1 for r in provider.requests)
    after = provider.requests[-1]
    assert checkpoints_in(after) == 1 and "<recent-context>" in json.dumps(step_messages(after))
    # summary calls count in the session's usage (every answer reported its measured prompt), through an event the
    # log serves: every durable event after the session's creation (seq 0), numbered without a hole
    assert (await client.session.get(sid)).tokens.input == sum(provider.prompt_tokens)
    recorded = of_type(log, "session.usage.recorded")
    assert len(recorded) == len(ended) and all(e.data.source == "compaction" for e in recorded)
    seqs = [e.durable.seq for e in await full_log(client, sid)]
    assert seqs == list(range(1, len(seqs) + 1))


async def test_a_model_without_known_limits_never_compacts_automatically(client, provider):
    provider.context_window = None
    sid = (await client.session.create(model={"providerID": "loop", "id": "plain"})).id
    await history(client, provider, sid, 6)
    log = await log_of(client, sid)
    assert not [e for e in log if e.type.startswith("session.compaction")] and not provider.summary_requests


# --- overflow recovery ----------------------------------------------------------------------------------------


def overflow() -> fake.ErrorScript:
    return fake.error(400, "This model's maximum context length is 8000 tokens", type="invalid_request_error",
                      code="context_length_exceeded")


async def test_overflow_before_output_compacts_once_and_rebuilds_the_same_step(client, provider):
    sid = (await client.session.create()).id
    await history(client, provider, sid, 2)
    provider.enqueue(overflow(), answer("Recovered after compaction."))
    await turn(client, sid, "And now?")
    log = await log_of(client, sid)
    last = log[max(i for i, e in enumerate(log) if e.type == "session.input.promoted"):]
    assert [e.type for e in last if e.type.startswith(("session.compaction", "session.step"))] == [
        "session.compaction.started", "session.compaction.ended", "session.step.started", "session.step.ended"], [
        (e.type, e.data) for e in last]
    assert last[-1].type == "session.execution.succeeded"
    # the second Physical Attempt sends the checkpoint and then the prompt itself, verbatim, as its latest user
    # message (the checkpoint says it is background, not a request); and it is smaller than the one that overflowed
    overflowed, rebuilt = provider.requests[-2], provider.requests[-1]
    assert step_messages(overflowed)[-1] == {"role": "user", "content": "And now?"}
    assert step_messages(rebuilt)[-1] == {"role": "user", "content": "And now?"}
    assert "<conversation-checkpoint>" in step_messages(rebuilt)[-2]["content"]
    assert checkpoints_in(rebuilt) == 1 and "And now?" not in step_messages(rebuilt)[-2]["content"]
    assert fake.prompt_tokens(rebuilt.json) < fake.prompt_tokens(overflowed.json)


async def test_a_step_after_an_automatic_compaction_still_answers_its_prompt(client, provider):
    sid = (await client.session.create()).id
    await history(client, provider, sid, 2)
    # a long prompt: with it the history no longer fits, and is compacted before the prompt's Step is sent
    prompt = "Compare the two files line by line and list every warning code they share. " * 60
    provider.enqueue(answer("They share none."), answer("Yes."))
    await turn(client, sid, prompt)
    log = await log_of(client, sid)
    promoted = max(i for i, e in enumerate(log) if e.type == "session.input.promoted")
    assert [e.type for e in log[promoted:] if e.type.startswith(("session.compaction", "session.step"))] == [
        "session.compaction.started", "session.compaction.ended", "session.step.started", "session.step.ended"]
    assert provider.overflows == 0 and log[-1].type == "session.execution.succeeded"
    step = provider.requests[-1]
    assert checkpoints_in(step) == 1 and step_messages(step)[-1] == {"role": "user", "content": prompt}
    assert prompt not in step_messages(step)[-2]["content"]  # the checkpoint holds only its place
    # the next prompt follows the answer: the earlier one stays in its place, after the checkpoint
    await turn(client, sid, "Sure?")
    turns = [(m["role"], m["content"]) for m in step_messages(provider.requests[-1])[-3:]]
    assert turns == [("user", prompt), ("assistant", "They share none."), ("user", "Sure?")]


async def test_an_overflow_on_a_retry_rebuilds_on_a_new_assistant_after_the_checkpoint(client, provider):
    sid = (await client.session.create()).id
    await history(client, provider, sid, 2)
    provider.enqueue(fake.error(500, "boom", type="server_error"), overflow(), answer("Recovered."))
    await turn(client, sid, "And now?")
    log = await log_of(client, sid)
    assert log[-1].type == "session.execution.succeeded"
    retried = of_type(log, "session.retry.scheduled")[-1].data.assistantMessageID
    superseded = [e for e in of_type(log, "session.step.failed") if e.data.assistantMessageID == retried]
    assert [e.data.error.type for e in superseded] == ["aborted"]
    # the answer is on a new assistant message after the checkpoint, where the model will see it next time
    context = await client.session.context(sid)
    assert context[0].type == "compaction"
    assert [(m.id != retried, [c.text for c in m.content]) for m in context if m.type == "assistant"] == [
        (True, ["Recovered."])]


async def test_a_second_overflow_is_terminal_with_a_typed_error(client, provider):
    sid = (await client.session.create()).id
    await history(client, provider, sid, 2)
    provider.enqueue(overflow(), overflow())
    await turn(client, sid, "And now?")
    log = await log_of(client, sid)
    assert len(of_type(log, "session.compaction.ended")) == 1
    failed = of_type(log, "session.step.failed")
    assert [f.data.error.type for f in failed] == ["provider.context-overflow"]
    assert log[-1].type == "session.execution.failed"
    assert log[-1].data.error.type == "provider.context-overflow"


async def test_an_overflow_with_nothing_to_compact_is_terminal(client, provider):
    sid = (await client.session.create()).id
    provider.enqueue(overflow())
    await turn(client, sid, "Hello")
    log = await log_of(client, sid)
    assert [e.data.error.type for e in of_type(log, "session.compaction.failed")] == ["compaction.unavailable"]
    assert [e.data.error.type for e in of_type(log, "session.step.failed")] == ["provider.context-overflow"]
    assert log[-1].type == "session.execution.failed" and not provider.summary_requests


# --- failed summaries -----------------------------------------------------------------------------------------


async def _context_ids(client: OpenCodeClient, sid: str) -> list[str]:
    return [m.id for m in await client.session.context(sid)]


async def test_a_summary_that_ignores_the_template_twice_fails_typed_and_leaves_history(client, provider):
    sid = (await client.session.create()).id
    await history(client, provider, sid, 2)
    before = await _context_ids(client, sid)
    provider.summaries.extend([answer("Sure, here is what happened."), answer("Still no headings.")])
    await client.session.compact(sid)
    with anyio.fail_after(60):
        await client.session.wait(sid)
    log = await log_of(client, sid)
    failed = of_type(log, "session.compaction.failed")
    assert [f.data.error.type for f in failed] == ["compaction.failed"] and failed[0].data.reason == "manual"
    assert render.REMINDER in json.dumps(provider.summary_requests[1].json["messages"][-1])
    after = await client.session.context(sid)
    # history is intact: the failed compaction is a transcript fact, not a cutover
    assert [m.id for m in after if m.type != "compaction"] == before
    assert [m.status for m in after if m.type == "compaction"] == ["failed"]


async def test_a_summary_the_template_fixes_after_one_reminder_completes(client, provider):
    sid = (await client.session.create()).id
    await history(client, provider, sid, 2)
    provider.summaries.extend([answer("Forgot the template."), answer(fake.SUMMARY)])
    await client.session.compact(sid)
    with anyio.fail_after(60):
        await client.session.wait(sid)
    log = await log_of(client, sid)
    assert [e.data.text for e in of_type(log, "session.compaction.ended")] == [fake.SUMMARY]


async def test_a_provider_error_in_the_summary_fails_typed_and_leaves_history(client, provider):
    sid = (await client.session.create()).id
    await history(client, provider, sid, 2)
    before = await _context_ids(client, sid)
    provider.summaries.extend([fake.error(500, "boom", type="server_error"),
                               fake.error(401, "bad key", type="invalid_api_key")])
    await client.session.compact(sid)
    with anyio.fail_after(60):
        await client.session.wait(sid)
    log = await log_of(client, sid)
    assert [f.data.error.type for f in of_type(log, "session.compaction.failed")] == ["provider.auth"]
    assert len(provider.summary_requests) == 2  # the 500 was retried like a Step's failure
    assert [m.id for m in await client.session.context(sid) if m.type != "compaction"] == before


# --- manual compaction ----------------------------------------------------------------------------------------


async def test_manual_compaction_blocks_promotion_until_it_ends_then_steers_and_queued_input_follow(
        client, provider):
    sid = (await client.session.create()).id
    await history(client, provider, sid, 2)
    held = fake.completion(fake.text_deltas("Working ", "on it."), hold_after=2)
    provider.enqueue(held, answer("Steer handled."), answer("Queued handled."))
    await client.session.prompt(sid, prompt={"text": "A long task"})
    with anyio.fail_after(30):
        await anyio.to_thread.run_sync(held.held.wait)
    await client.session.compact(sid)
    await client.session.compact(sid)  # coalesces into the pending barrier
    queued = await client.session.prompt(sid, prompt={"text": "Queued question"}, delivery="queue")
    steer = await client.session.prompt(sid, prompt={"text": "Steer now"})
    held.release.set()
    with anyio.fail_after(60):
        await client.session.wait(sid)
    log = await log_of(client, sid)
    types = [e.type for e in log]
    assert types.count("session.compaction.admitted") == 1
    ended = of_type(log, "session.compaction.ended")
    assert len(ended) == 1 and ended[0].data.reason == "manual"
    barrier = of_type(log, "session.compaction.admitted")[0].data.inputID
    assert ended[0].data.messageID == barrier and ended[0].data.inputID == barrier
    promoted = [e.data.inputID for e in of_type(log, "session.input.promoted")]
    assert promoted[-2:] == [steer.id, queued.id]
    end_at = log.index(ended[0])
    assert all(log.index(e) > end_at for e in of_type(log, "session.input.promoted")[-2:])
    assert types[-1] == "session.execution.succeeded"
    # the Steps after the barrier see the checkpoint (summary and recent tail) and then the promoted input
    steer_request = step_messages(provider.requests[-2])
    assert checkpoints_in(provider.requests[-2]) == 1
    assert steer_request[-1] == {"role": "user", "content": "Steer now"}
    assert "Working on it." in json.dumps(steer_request)  # the held Step's answer is in the recent tail


async def test_the_summary_streams_live_as_deltas_that_the_durable_log_leaves_out(client, provider):
    sid = (await client.session.create()).id
    await history(client, provider, sid, 2)
    halves = fake.SUMMARY[:20], fake.SUMMARY[20:]
    provider.summaries.append(fake.completion(fake.text_deltas(*halves)))
    stream = client.event.subscribe()
    assert (await stream.__anext__()).type == "server.connected"
    deltas: list[str] = []

    async def read_until_ended() -> None:
        async for item in stream:
            if item.data.get("sessionID") == sid:
                if item.type == "session.compaction.delta":
                    deltas.append(item.data["text"])
                elif item.type == "session.compaction.ended":
                    return

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            tg.start_soon(read_until_ended)
            await client.session.compact(sid)
    await stream.aclose()
    assert deltas == list(halves)
    assert "session.compaction.delta" not in [e.type for e in await log_of(client, sid)]


async def test_manual_compaction_on_an_idle_session_with_nothing_to_compact_fails_unavailable(client, provider):
    sid = (await client.session.create()).id
    await client.session.compact(sid)
    with anyio.fail_after(60):
        await client.session.wait(sid)
    log = await log_of(client, sid)
    assert [e.data.error.type for e in of_type(log, "session.compaction.failed")] == ["compaction.unavailable"]
    # the barrier was consumed: later input runs as usual
    provider.enqueue(answer("hello"))
    await turn(client, sid, "hi")
    assert (await log_of(client, sid))[-1].type == "session.execution.succeeded"


async def test_compacting_a_large_history_for_a_small_model_summarises_in_chunks_that_each_fit(client, provider):
    provider.context_window = None  # built on a model without limits...
    sid = (await client.session.create(model={"providerID": "loop", "id": "plain"})).id
    await history(client, provider, sid, 16)  # about 10,000 tokens once serialized: more than one request holds
    await client.session.switch_model(sid, model={"providerID": "loop", "id": "small"})
    provider.context_window = WINDOW  # ...then compacted for the 8k one
    provider.prompt_tokens.clear()
    await client.session.compact(sid)
    with anyio.fail_after(60):
        await client.session.wait(sid)
    log = await log_of(client, sid)
    assert len(of_type(log, "session.compaction.ended")) == 1 and provider.overflows == 0
    assert len(provider.summary_requests) >= 2
    later = json.dumps(provider.summary_requests[-1].json["messages"])
    assert "<conversation-checkpoint>" in later  # each chunk updates the summary so far
    assert max(provider.prompt_tokens) + OUTPUT <= WINDOW


async def test_compact_on_an_unknown_session_is_404(client):
    with pytest.raises(SessionNotFoundError):
        await client.session.compact("ses_" + "0" * 26)


# --- instructions ---------------------------------------------------------------------------------------------


async def test_completed_compaction_rebaselines_instructions_and_drops_earlier_updates_from_context(
        client, provider):
    sid = (await client.session.create()).id
    provider.enqueue(answer("one"))
    await turn(client, sid, "first")
    await client.session.context_entry_put(sid, "ticket", value={"id": 4242})
    await history(client, provider, sid, 2)
    assert any(m.type == "system" for m in await client.session.context(sid))
    await client.session.compact(sid)
    with anyio.fail_after(60):
        await client.session.wait(sid)
    provider.enqueue(answer("after"))
    await turn(client, sid, "next")
    context = await client.session.context(sid)
    assert context[0].type == "compaction" and not any(m.type == "system" for m in context)
    log = await log_of(client, sid)
    assert len(of_type(log, "session.instructions.updated")) == 1  # the durable log keeps the update
    # the rebaselined system prompt now carries the entry itself, and no update travels as history
    last = step_messages(provider.requests[-1])
    assert '"id": 4242' in last[0]["content"] and "<system-update>" not in json.dumps(last[1:])
    first = step_messages(provider.requests[0])
    assert "4242" not in first[0]["content"]
