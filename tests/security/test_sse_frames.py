"""Round four of "Safe by default": text in an event stream cannot end its event or start one of its own. A browser's
EventSource ends a line at CR, LF or CRLF alike; a carriage return the model wrote, a tool printed or a user typed
must not split the inspector's live transcript into an event of the attacker's choosing (which replaced what every
later re-render showed), nor break the API's JSON frames. The streams are read here as a browser reads them. The
Embedded host serves the same app as `ocs serve`; the model is a loopback Chat Completions server."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from opencode_session.sdk import OpenCode
from tests.api.conftest import raw_http
from tests.support import fake_openai as fake
from tests.support.server import configured_home

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(90)]

WAIT = 60
INJECTED = "\r\revent: transcript\rdata: <b>INJECTED</b>\r\r"
CRLF_INJECTED = "\r\n\r\nevent: transcript\r\ndata: <i>CRLF</i>\r\n\r\n"


@pytest.fixture
async def host(tmp_path: Path, loop_provider: fake.FakeOpenAI) -> AsyncIterator[OpenCode]:
    (tmp_path / "work").mkdir()
    loop_provider.requests.clear()
    async with OpenCode(db=tmp_path / "db.sqlite", directory=tmp_path / "work",
                        env=configured_home(tmp_path, loop_provider)) as oc:
        yield oc
    loop_provider.release_held()
    assert loop_provider.pending == 0, "a scripted provider response was never requested"


def parse_events(text: str) -> list[tuple[str, str]]:
    """(event, data) of each complete event, as the HTML standard's EventSource parses a stream."""
    events, name, data = [], "", []
    lines = re.split(r"\r\n|\r|\n", text)
    for line in lines[:-1]:  # the last piece is not a complete line yet
        if line == "":
            if data:
                events.append((name or "message", "\n".join(data)))
            name, data = "", []
        elif not line.startswith(":"):
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "event":
                name = value
            elif field == "data":
                data.append(value)
    return events


def strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict | list):
        for item in value.values() if isinstance(value, dict) else value:
            yield from strings(item)


async def first_events(host: OpenCode, url: str, count: int = 1) -> list[tuple[str, str]]:
    """The first `count` events of the stream at `url`, as a browser sees them."""
    async with raw_http(host) as http:
        with anyio.fail_after(WAIT):
            async with http.stream("GET", url, headers={"Accept": "text/event-stream"}) as stream:
                assert stream.status_code == 200
                received = ""
                async for chunk in stream.aiter_text():
                    received += chunk
                    events = [e for e in parse_events(received) if e[0] != "message" or e[1]]
                    if len(events) >= count:
                        return events[:count]
    raise AssertionError("the stream ended")


async def a_turn_full_of_carriage_returns(host: OpenCode, provider: fake.FakeOpenAI) -> str:
    """A session whose title, prompt, tool input, tool output and answer each hold a line of SSE smuggled behind
    CRs (and CRLFs)."""
    sid = (await host.session.create(title=f"Title{INJECTED}end")).id
    command = "printf '" + INJECTED.replace("\r", "\\r") + "TOOL-END'"
    provider.enqueue(
        fake.completion(fake.tool_call_deltas(0, "call_1", "bash", json.dumps({"command": command,
                                                                               "description": f"d{CRLF_INJECTED}"})),
                        finish_reason="tool_calls"),
        fake.completion(fake.text_deltas(f"ANSWER-START{INJECTED}", f"{CRLF_INJECTED}ANSWER-END")))
    await host.session.prompt(sid, prompt={"text": f"PROMPT-START{INJECTED}PROMPT-END"})
    with anyio.fail_after(WAIT):
        await host.session.wait(sid)
    return sid


async def test_a_carriage_return_does_not_split_the_live_transcript(host, loop_provider):
    sid = await a_turn_full_of_carriage_returns(host, loop_provider)
    [(event, data)] = await first_events(host, f"/ui/session/{sid}/live")
    # one event, the whole transcript: each field's text arrived in it, beyond each smuggled line
    assert event == "transcript"
    for end in ("PROMPT-END", "TOOL-END", "ANSWER-END"):
        assert end in data, end
    assert "INJECTED" in data  # as text of the transcript, escaped by the page
    assert "<b>INJECTED</b>" not in data


async def test_the_apis_event_frames_stay_json_whatever_the_text_holds(host, loop_provider):
    sid = await a_turn_full_of_carriage_returns(host, loop_provider)
    async with raw_http(host) as http:
        answer = await http.get(f"/api/session/{sid}/log", headers={"Accept": "text/event-stream"})
    events = parse_events(answer.text)
    assert events and all(name == "message" for name, _ in events)
    decoded = [json.loads(data) for _, data in events]
    # the prompt's text came through whole, its carriage returns inside the JSON string
    assert f"PROMPT-START{INJECTED}PROMPT-END" in set(strings(decoded))


@pytest.mark.parametrize("event", ["transcript", "delta", "sessions"])
def test_every_frame_the_inspector_streams_is_one_event_whatever_its_text_holds(event):
    # each of the inspector's streams (the transcript's HTML, the streamed answer's deltas, the list's changes) is
    # encoded by text_frame: a carriage return in any of them stays inside its one event
    from opencode_session.server.sse import text_frame

    deltas = json.dumps([["part-1", f"streamed{INJECTED}{CRLF_INJECTED}more"]], ensure_ascii=False)
    for text in (f"<p>{INJECTED}</p>{CRLF_INJECTED}end", deltas):
        [(name, data)] = parse_events(text_frame(event, text).decode())
        assert name == event and data == re.sub(r"\r\n|\r", "\n", text)
