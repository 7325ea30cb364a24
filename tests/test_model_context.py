"""What each Step sent, read back (`GET .../message/{id}/context`): per provider protocol, across an Instruction
Update (AGENTS.md edited between prompts), a compaction and a model switch to another protocol, every Step's recorded
request body equals byte for byte the body the loopback provider received, and its sections and their changes since
the previous Step say what happened. Plus the record's change encoding, and the endpoint's typed failures."""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from opencode_session.client import (
    InvalidRequestError,
    MessageNotFoundError,
    SessionNotFoundError,
    StepContextNotFoundError,
)
from opencode_session.core.execution.context_record import CHAIN, ContextRecorder, apply, change, rebuild
from opencode_session.core.store.rows import StepContextRow
from opencode_session.schema.common import ModelRef
from opencode_session.sdk import OpenCode
from opencode_session.sdk.embedded import EMBEDDED_BASE_URL
from tests.support import fake_openai as fake
from tests.support import fake_wire as wire
from tests.support.server import isolated_env

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

OPENAI_KEY = "sk-openai-qv8812-k"
ANTHROPIC_KEY = "sk-ant-wz5530-k"
PROTOCOLS = ("chat", "responses", "messages")
PROVIDER = {"chat": "loop", "responses": "openai", "messages": "anthropic"}
NEXT = {"chat": "responses", "responses": "messages", "messages": "chat"}


def text(protocol: str, *pieces: str) -> Any:
    if protocol == "chat":
        return fake.completion(fake.text_deltas(*pieces), usage=fake.usage_block(10, 5))
    if protocol == "responses":
        return wire.responses(wire.r_text(*pieces), usage=wire.r_usage(10, 5))
    return wire.messages(wire.m_text(*pieces), input_tokens=10, output_tokens=5)


def configure(root: Path, provider: fake.FakeOpenAI) -> dict[str, str]:
    env = isolated_env(root, OPENAI_API_KEY=OPENAI_KEY, ANTHROPIC_API_KEY=ANTHROPIC_KEY)
    models = {"fake-model": {"limit": {"context": 100000, "output": 2000}}, "other-model": {}}
    (root / "config" / "opencode").mkdir(parents=True, exist_ok=True)
    (root / "config" / "opencode" / "opencode.json").write_text(json.dumps({
        "model": "loop/fake-model",
        "agent": {"build": {"temperature": 0.25}},
        "provider": {
            "loop": {"npm": "@ai-sdk/openai-compatible",
                     "options": {"baseURL": provider.base_url, "apiKey": "loop-key"}, "models": models},
            "openai": {"options": {"baseURL": provider.base_url}, "models": models},
            "anthropic": {"options": {"baseURL": provider.base_url}, "models": models},
        },
    }))
    return env


async def _prompt(oc: OpenCode, sid: str, words: str) -> None:
    await oc.session.prompt(sid, prompt={"text": words})
    with anyio.fail_after(40):
        await oc.session.wait(sid)


async def _steps(oc: OpenCode, sid: str) -> list[str]:
    page = await oc.session.messages(sid, limit=200, order="asc")
    return [m.id for m in page.items if m.type == "assistant"]


def _section(context: Any, key: str) -> dict[str, Any]:
    [section] = [s for s in context.sections if s.key == key]
    return {item.source: item.value for item in section.items}


def _changes(context: Any, key: str) -> Any:
    [found] = [c for c in context.changes if c.section == key]
    return found


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_each_steps_context_is_the_body_the_provider_received(tmp_path, provider, protocol):
    provider.keys = {"loop-key", OPENAI_KEY, ANTHROPIC_KEY}
    env = configure(tmp_path, provider)
    work = tmp_path / "work"
    work.mkdir()
    agents = work / "AGENTS.md"
    agents.write_text("Rule one: be brief.\n")
    provider.enqueue(text(protocol, "one"), text(protocol, "two"), text(protocol, "three"),
                     text(NEXT[protocol], "four"))
    provider.summaries.append(text(protocol, fake.SUMMARY))  # the compaction's summary, in the protocol's shape
    async with OpenCode(db=tmp_path / "db.sqlite", directory=work, env=env) as oc:
        sid = (await oc.session.create(model=ModelRef(providerID=PROVIDER[protocol], id="fake-model"))).id
        await _prompt(oc, sid, "first")
        agents.write_text("Rule one: be brief.\nRule two: say why.\n")  # an Instruction Update at the next Step
        await _prompt(oc, sid, "second")
        await oc.session.compact(sid)  # the next Step's history starts at the summary, on a new baseline
        await _prompt(oc, sid, "third")
        await oc.session.switch_model(sid, model=ModelRef(providerID=PROVIDER[NEXT[protocol]], id="other-model"))
        await _prompt(oc, sid, "fourth")
        steps = await _steps(oc, sid)
        contexts = [await oc.session.message_context(sid, step) for step in steps]
    assert len(steps) == len(provider.requests) == 4

    # byte for byte: what each Step recorded is the body its provider received
    for context, received in zip(contexts, provider.requests, strict=True):
        assert context.request.body is not None
        assert context.request.body.encode("utf-8") == received.raw
        assert context.request.size == len(received.raw)
        assert context.request.sha256 == hashlib.sha256(received.raw).hexdigest()
        assert not context.redacted and not context.rewritten
    assert [c.request.protocol for c in contexts] == [protocol] * 3 + [NEXT[protocol]]
    first, second, third, fourth = contexts

    # the first Step: everything is new; its baseline holds AGENTS.md
    assert first.previousMessageID is None
    assert "Rule one" in _section(first, "instructions")["baseline"]
    assert _changes(first, "history").added == list(_section(first, "history"))
    tools = _section(first, "tools")
    assert "read" in tools and set(tools) == set(_offered(protocol, provider.requests[0].json))

    # the second: AGENTS.md changed, so one Instruction Update entered the history; the baseline stays
    assert second.previousMessageID == first.messageID
    [update] = _changes(second, "updates").added
    assert "Rule two" in _section(second, "updates")[update]
    assert _section(second, "history")[update] == {"type": "system", "rev": _section(second, "history")[update]["rev"]}
    assert update in _changes(second, "history").added and not _changes(second, "history").removed
    assert _changes(second, "instructions").changed == [] and _changes(second, "tools") == _unchanged("tools")
    assert "Rule two" in received_text(provider.requests[1].raw)

    # the third: the compaction replaced the history before it, and the baseline was taken anew (with rule two)
    history = _changes(third, "history")
    assert set(history.removed) >= set(_section(second, "history"))
    assert [_section(third, "history")[s]["type"] for s in history.added][:1] == ["compaction"]
    assert _changes(third, "updates").removed == [update]
    assert _changes(third, "instructions").changed == ["baseline"]
    assert "Rule two" in _section(third, "instructions")["baseline"]

    # the fourth: another model, through another protocol; the conversation goes on
    options = _changes(fourth, "options")
    assert {"providerID", "modelID", "protocol", "wireModel"} <= set(options.changed)
    assert _section(fourth, "options")["protocol"] == NEXT[protocol]
    assert _section(fourth, "options")["modelID"] == "other-model"
    assert not _changes(fourth, "history").removed


def _offered(protocol: str, body: dict[str, Any]) -> list[str]:
    if protocol == "chat":
        return [t["function"]["name"] for t in body["tools"]]
    return [t["name"] for t in body["tools"]]


def _unchanged(key: str) -> Any:
    from opencode_session.schema.model_context import ContextSectionChange

    return ContextSectionChange(section=key, added=[], removed=[], changed=[])  # type: ignore[arg-type]


def received_text(raw: bytes) -> str:
    return json.dumps(json.loads(raw))


async def test_the_endpoint_refuses_what_is_not_a_recorded_step(tmp_path, provider):
    env = configure(tmp_path, provider)
    (tmp_path / "work").mkdir()
    provider.enqueue(text("chat", "hello"))
    async with OpenCode(db=tmp_path / "db.sqlite", directory=tmp_path / "work", env=env) as oc:
        sid = (await oc.session.create()).id
        await _prompt(oc, sid, "hi")
        page = await oc.session.messages(sid, limit=10, order="asc")
        user = next(m.id for m in page.items if m.type == "user")
        step = next(m.id for m in page.items if m.type == "assistant")
        with pytest.raises(InvalidRequestError) as refused:
            await oc.session.message_context(sid, user)
        assert refused.value.field == "messageID"
        with pytest.raises(MessageNotFoundError):
            await oc.session.message_context(sid, "msg_0000000000000000nothinghere")
        with pytest.raises(SessionNotFoundError):
            await oc.session.message_context("ses_0000000000000000nothinghere", step)
        # a Step whose record is gone (as one made before Steps were recorded) is a typed 404 too
        await oc.runtime.store.write(lambda tx: tx.rows.conn.execute("DELETE FROM step_context"))
        with pytest.raises(StepContextNotFoundError):
            await oc.session.message_context(sid, step)
        async with httpx2.AsyncClient(transport=oc.transport, base_url=EMBEDDED_BASE_URL) as http:
            response = await http.get(f"/api/session/{sid}/message/{user}/context")
        assert response.status_code == 400 and response.json()["_tag"] == "InvalidRequestError"


# --- the record's encoding ---------------------------------------------------------------------------------------


def test_a_change_rebuilds_the_new_text_exactly_whatever_it_shares_with_the_old():
    rng = random.Random(7)
    alphabet = "ab{}\",:é漢🙂"
    for _ in range(500):
        old = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 40)))
        cut, keep = rng.randrange(0, len(old) + 1), rng.randrange(0, len(old) + 1)
        new = old[:cut] + "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 10))) + old[keep:]
        delta = change(old.encode(), new.encode())
        assert apply(old.encode(), delta) == new.encode(), (old, new, delta)
        assert len(delta[2]) <= len(new)


def test_records_chain_from_a_full_one_and_read_back_whole():
    recorder = ContextRecorder()
    rows, expected = [], {}
    body = b'{"messages":['
    for n in range(CHAIN + 5):
        body = body + (b"," if n else b"") + json.dumps({"n": n, "text": "é" * n}).encode()
        message = f"msg_{n:04d}"
        meta = json.dumps({"encoded": True, "history": [[f"m{i}", "user", 0] for i in range(n)]}).encode()
        root, base, data = recorder.encode("ses_1", message, {"meta": meta, "body": body + b"]}"})
        rows.append(StepContextRow(message, base, data))
        expected[message] = body + b"]}"
        assert (base is None) == (n % CHAIN == 0)  # a full record starts each chain
        assert root == f"msg_{n - n % CHAIN:04d}"
    records = rebuild(rows)
    assert {r.message_id: r.body for r in records} == expected
    # a change stores what is new, not the whole body again
    assert len(rows[5].data) < len(expected["msg_0005"]) + 200
    # a record whose base is missing is left out, not rebuilt wrong
    assert [r.message_id for r in rebuild(rows[1:3])] == []
