"""Following a turn when the live stream lets go: the durable log takes over from the last sequence seen, and
the turn still ends with every durable event and the whole text."""

from __future__ import annotations

import anyio
import pytest

from opencode_session.cli.turn import Turn
from opencode_session.sdk import OpenCode
from tests.support import fake_openai as fake
from tests.support.cli import TIMEOUT, make_home

# each test starts `ocs` processes (and some a server): slow on a busy machine
pytestmark = [pytest.mark.anyio, pytest.mark.timeout(240)]


async def test_a_dropped_live_stream_falls_back_to_the_durable_log(tmp_path, provider):
    home = make_home(tmp_path)
    home.configure(provider)
    script = fake.completion(fake.text_deltas("partly ", "streamed ", "answer"), hold_after=2)
    provider.enqueue(script)
    seen: list[dict] = []
    async with OpenCode(db=tmp_path / "db.sqlite", directory=home.work, env=home.env) as oc:
        sid = (await oc.session.create()).id
        async with Turn(oc, sid, seen.append) as turn:
            await turn.prompt("go")
            assert await anyio.to_thread.run_sync(script.held.wait, TIMEOUT)
            oc.runtime.store.live.close()  # the server lets go of every live reader
            script.release.set()
            with anyio.fail_after(TIMEOUT):
                outcome = await turn.settled()
        logged = [e.wire() async for e in oc.session.log(sid, follow=False) if e.type != "log.synced"]
    assert outcome.status == "succeeded"
    ended = [e for e in seen if e["type"] == "session.text.ended"]
    assert ended and ended[0]["data"]["text"] == "partly streamed answer"
    durable = [e["durable"]["seq"] for e in seen if "durable" in e]
    assert durable == sorted(set(durable))  # nothing twice, in order
    through_end = [e["durable"]["seq"] for e in logged if e["type"] != "session.renamed"]
    assert [s for s in durable if s in through_end] == through_end[through_end.index(durable[0]):]

