"""MCP servers through the real runner: real servers written with the SDK (tests/support/mcp_server.py) over stdio
and HTTP, configured in opencode.json's `mcp`, their tools offered and called as `SERVER_TOOL` under the permission
rules, results lowered as tool output, timeouts and interrupts sent on to the server, their instructions as MCP
guidance, failures reported and restarted, and no server process left behind."""

from __future__ import annotations

import json
import os
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from opencode_session.core.llm import model as llm
from opencode_session.core.runtime import Runtime, RuntimeOptions
from opencode_session.core.wiring import make_drain_factory
from opencode_session.schema.prompt import PromptInput
from tests.support.mcp_harness import alive, children, local, served, serving, wait_until
from tests.support.scripted import ScriptedProvider, text, tool_call
from tests.test_runner import FakeClock, config, of_type

pytestmark = pytest.mark.anyio


@dataclass
class Harness:
    rt: Runtime
    provider: ScriptedProvider
    work: Path
    marks: Path

    def configure(self, mcp: dict[str, Any], **extra: Any) -> None:
        # the user's own file (`OPENCODE_CONFIG`): a project file changed while the runtime runs would keep its MCP
        # servers as first read until a restart (a session may have written it)
        (self.work.parent / "user-opencode.json").write_text(json.dumps({"mcp": mcp, **extra}))

    async def turn(self, sid: str, prompt: str, *scripts: list[Any]) -> list[Any]:
        self.provider.push(*scripts)
        before = [r async for r in await self.rt.sessions.log(sid, -1, follow=False)]
        await self.rt.sessions.admit(sid, PromptInput(text=prompt))
        with anyio.fail_after(30):
            assert self.rt.execution is not None
            await self.rt.execution.wait(sid)
        records = [r async for r in await self.rt.sessions.log(sid, -1, follow=False)]
        return records[len(before):]


@asynccontextmanager
async def harness(tmp_path: Path, mcp: dict[str, Any] | None = None, **extra: Any):
    home, work, marks = tmp_path / "home", tmp_path / "work", tmp_path / "marks"
    work.mkdir()
    marks.mkdir()
    env = {**config(home), "PATH": os.environ.get("PATH", os.defpath),
           "OPENCODE_CONFIG": str(tmp_path / "user-opencode.json")}
    provider = ScriptedProvider()
    factory = make_drain_factory(provider=lambda _m: provider, clock=FakeClock(), titles=False)
    async with Runtime(RuntimeOptions(db_path=tmp_path / "db.sqlite", directory=work, env=env,
                                      drain_factory=factory)) as rt:
        h = Harness(rt, provider, work, marks)
        if mcp is not None:
            h.configure(mcp, **extra)
        yield h


def offered(request: llm.LLMRequest) -> list[str]:
    return [t.name for t in request.tools]


def updates(request: llm.LLMRequest) -> list[str]:
    return [m.text for m in request.messages if isinstance(m, llm.SystemUpdate)]


async def test_tools_are_offered_by_their_opencode_names_and_their_results_lowered(tmp_path):
    async with harness(tmp_path) as h:
        h.configure({"my.docs": local("docs", MCP_TEST_INSTRUCTIONS="Search the docs before answering.")})
        sid = (await h.rt.sessions.create()).id
        calls = [llm.ToolCall("c1", "my_docs_echo", {"text": "hi"}), llm.ToolCall("c2", "my_docs_image", {}),
                 llm.ToolCall("c3", "my_docs_structured", {"n": 3}), llm.ToolCall("c4", "my_docs_resource", {}),
                 llm.Finish("tool-calls", llm.Usage(10, 5))]
        records = await h.turn(sid, "use the docs", calls, text("done"))
    first = h.provider.requests[0]
    names = offered(first)
    assert names[:2] == ["read", "write"]  # the built-ins first, then the server's tools in its order
    assert [n for n in names if n.startswith("my_docs_")][:3] == ["my_docs_echo", "my_docs_fail", "my_docs_hang"]
    echo = next(t for t in first.tools if t.name == "my_docs_echo")
    assert echo.description == "Answer the text given"
    assert echo.parameters["type"] == "object" and "text" in echo.parameters["properties"]
    assert '<mcp_instructions>\n  <server name="my.docs">\n    Search the docs before answering.' in first.system[-1]
    success = {s["callID"]: s for s in of_type(records, "session.tool.success")}
    assert success["c1"]["content"] == [{"type": "text", "text": "echo: hi"}]
    image = success["c2"]["content"]
    assert image[1]["type"] == "file" and image[1]["mime"] == "image/png"
    assert image[1]["uri"].startswith("data:image/png;base64,iVBOR")
    assert success["c3"]["structured"] == {"n": 3, "square": 9}
    assert success["c4"]["content"] == [{"type": "text", "text": "Resource file:///notes.txt:\nnotes"}]


IMAGES = {"local": {"models": {"m": {"modalities": {"input": ["text", "image"], "output": ["text"]}}}}}


@pytest.mark.parametrize("accepts", [True, False], ids=["image-model", "text-model"])
async def test_an_image_a_tool_returns_reaches_a_model_that_accepts_images(tmp_path, accepts):
    async with harness(tmp_path) as h:
        h.configure({"srv": local("srv")}, **({"provider": IMAGES} if accepts else {}))
        sid = (await h.rt.sessions.create()).id
        await h.turn(sid, "look", tool_call("c1", "srv_image", {}), text("a pixel"))
    [result] = [m for m in h.provider.requests[1].messages if isinstance(m, llm.ToolResultMessage)]
    trailer = [m for m in h.provider.requests[1].messages if isinstance(m, llm.UserMessage) and m.tool_files]
    assert result.text.startswith("[image image/png, about ")
    if accepts:
        [image] = result.files
        assert image.mime == "image/png" and image.uri.startswith("data:image/png;base64,iVBOR")
        assert [p for p in trailer[0].parts if isinstance(p, llm.FilePart)] == [image]  # for Chat Completions
    else:
        assert result.files == () and trailer == []


async def test_the_model_can_list_and_read_the_resources_a_server_offers(tmp_path):
    async with harness(tmp_path) as h:
        h.configure({"srv": local("srv")}, provider=IMAGES)
        sid = (await h.rt.sessions.create()).id
        records = await h.turn(
            sid, "what do the notes say?", tool_call("c1", "srv_link", {}),
            [llm.ToolCall("c2", "read_mcp_resource", {"server": "srv", "uri": "test://notes"}),
             llm.ToolCall("c3", "read_mcp_resource", {"server": "srv", "uri": "test://pixel"}),
             llm.ToolCall("c4", "read_mcp_resource", {"server": "srv", "uri": "test://tickets/7"}),
             llm.ToolCall("c5", "read_mcp_resource", {"server": "srv", "uri": "test://missing"}),
             llm.ToolCall("c6", "read_mcp_resource", {"server": "nobody", "uri": "test://notes"}),
             llm.ToolCall("c7", "list_mcp_resources", {}), llm.Finish("tool-calls", llm.Usage(10, 5))],
            text("Ship on Friday."))
    assert {"list_mcp_resources", "read_mcp_resource"} <= set(offered(h.provider.requests[0]))
    success = {s["callID"]: s for s in of_type(records, "session.tool.success")}
    failed = {f["callID"]: f for f in of_type(records, "session.tool.failed")}
    assert success["c1"]["content"][0]["text"].startswith("Resource link test://notes (notes)")
    assert success["c2"]["content"] == [{"type": "text", "text": "Resource test://notes:\nShip on Friday."}]
    pixel = success["c3"]["content"]
    assert pixel[1]["type"] == "file" and pixel[1]["uri"].startswith("data:image/png;base64,iVBOR")
    assert success["c4"]["content"][0]["text"] == "Resource test://tickets/7:\nTicket 7: open"
    assert "test://missing" in failed["c5"]["error"]["message"]
    assert "'nobody' is not connected or offers no resources" in failed["c6"]["error"]["message"]
    listing = success["c7"]
    assert [r["uri"] for r in listing["structured"]["resources"]] == ["test://notes", "test://pixel"]
    assert [t["uriTemplate"] for t in listing["structured"]["templates"]] == ["test://tickets/{number}"]
    # the image read reaches the model as an image
    [shown] = [m for m in h.provider.requests[2].messages if isinstance(m, llm.ToolResultMessage) and m.files]
    assert shown.call_id == "c3"


async def test_a_failing_tool_is_a_tool_error_the_model_reads(tmp_path):
    async with harness(tmp_path, {"srv": local("srv")}) as h:
        sid = (await h.rt.sessions.create()).id
        records = await h.turn(sid, "fail", tool_call("c1", "srv_fail", {"message": "the disk is full"}),
                               text("sorry"))
    [failed] = of_type(records, "session.tool.failed")
    assert failed["error"]["type"] == "tool.execution" and "the disk is full" in failed["error"]["message"]
    assert of_type(records, "session.execution.succeeded")


async def test_a_call_that_hangs_times_out_and_the_server_is_told_to_cancel(tmp_path):
    async with harness(tmp_path) as h:
        h.configure({"slow": local("slow", timeout=1500, MCP_TEST_MARKS=str(h.marks))})
        sid = (await h.rt.sessions.create()).id
        records = await h.turn(sid, "wait", tool_call("c1", "slow_hang", {}), text("it timed out"))
        [failed] = of_type(records, "session.tool.failed")
        assert "did not answer within 1.5 s" in failed["error"]["message"]
        wait_until(lambda: (h.marks / "cancelled").exists(), 10, "the server to see the cancellation")


async def test_progress_notifications_extend_a_calls_timeout(tmp_path):
    async with harness(tmp_path, {"srv": local("srv", timeout=1000)}) as h:
        sid = (await h.rt.sessions.create()).id
        # 2 s of work under a 1 s timeout: reporting progress every 0.3 s keeps it alive, silence does not
        records = await h.turn(sid, "work", tool_call("c1", "srv_work", {"seconds": 2, "every": 0.3}),
                               tool_call("c2", "srv_work", {"seconds": 2}), text("ok"))
    [success] = of_type(records, "session.tool.success")
    assert success["callID"] == "c1" and success["content"][0]["text"] == "worked 2 s"
    [failed] = of_type(records, "session.tool.failed")
    assert failed["callID"] == "c2" and "did not answer within 1 s" in failed["error"]["message"]


async def test_an_interrupt_cancels_the_call_on_the_server(tmp_path):
    async with harness(tmp_path) as h:
        h.configure({"slow": local("slow", MCP_TEST_MARKS=str(h.marks))})
        sid = (await h.rt.sessions.create()).id
        h.provider.push(tool_call("c1", "slow_hang", {}))
        await h.rt.sessions.admit(sid, PromptInput(text="wait"))
        with anyio.fail_after(20):
            while not (h.marks / "hanging").exists():
                await anyio.sleep(0.02)
            assert h.rt.execution is not None
            assert await h.rt.execution.interrupt(sid)
            await h.rt.execution.wait(sid)
            while not (h.marks / "cancelled").exists():
                await anyio.sleep(0.02)
        records = [r async for r in await h.rt.sessions.log(sid, -1, follow=False)]
        assert of_type(records, "session.execution.interrupted")


async def test_permission_rules_and_agent_switches_apply_to_mcp_tools(tmp_path):
    async with harness(tmp_path) as h:
        h.configure({"srv": local("srv", MCP_TEST_INSTRUCTIONS="Use srv."),
                     "other": local("other", MCP_TEST_INSTRUCTIONS="Use other.")},
                    permission={"srv_*": "ask"}, agent={"build": {"tools": {"other_*": False}}})
        sid = (await h.rt.sessions.create()).id
        h.provider.push(tool_call("c1", "srv_echo", {"text": "asked"}), text("done"))
        await h.rt.sessions.admit(sid, PromptInput(text="ask first"))
        with anyio.fail_after(20):
            while not h.rt.permissions.pending(sid):
                await anyio.sleep(0.02)
            [asked] = h.rt.permissions.pending(sid)
            assert asked.action == "srv_echo"
            await h.rt.permissions.reply(sid, asked.id, "once", None)
            assert h.rt.execution is not None
            await h.rt.execution.wait(sid)
        records = [r async for r in await h.rt.sessions.log(sid, -1, follow=False)]
    names = offered(h.provider.requests[0])
    assert "srv_echo" in names and not [n for n in names if n.startswith("other_")]
    baseline = h.provider.requests[0].system[-1]
    assert "Use srv." in baseline and "Use other." not in baseline  # a server the agent may not use gives no guidance
    [success] = of_type(records, "session.tool.success")
    assert success["content"] == [{"type": "text", "text": "echo: asked"}]


async def test_instructions_appear_change_and_go_as_chronological_updates(tmp_path):
    async with harness(tmp_path) as h:
        h.configure({"guide": local("guide", MCP_TEST_INSTRUCTIONS="Version one.")})
        sid = (await h.rt.sessions.create()).id
        await h.turn(sid, "first", text("ok"))
        assert "Version one." in h.provider.requests[0].system[-1]
        h.configure({"guide": local("guide", MCP_TEST_INSTRUCTIONS="Version two.")})  # restarts the server
        await h.turn(sid, "second", text("ok"))
        [changed] = updates(h.provider.requests[1])
        assert "supersedes the previous one" in changed and "Version two." in changed
        h.configure({"guide": local("guide", MCP_TEST_INSTRUCTIONS="Version two."),
                     "extra": local("extra", MCP_TEST_INSTRUCTIONS="Extra guidance.")})
        await h.turn(sid, "third", text("ok"))
        added = updates(h.provider.requests[2])[-1]  # the history holds the earlier updates too
        assert "in addition to those previously listed" in added and "Extra guidance." in added
        assert "Version two." not in added
        h.configure({})
        await h.turn(sid, "fourth", text("ok"))
        assert updates(h.provider.requests[3])[-1] == "MCP server instructions are no longer available."
        assert h.provider.requests[3].system == h.provider.requests[0].system  # the baseline stays
        assert not [n for n in offered(h.provider.requests[3]) if n.startswith("guide_")]
        assert h.rt.mcp.running() == []  # servers no longer configured are stopped


async def test_a_server_that_fails_to_start_is_reported_and_blocks_nothing(tmp_path):
    async with harness(tmp_path) as h:
        h.configure({"gone": {"type": "local", "command": ["no-such-mcp-server-anywhere"]},
                     "broken": {"type": "local"}, "off": {"type": "remote", "url": "http://x", "enabled": False},
                     "srv": local("srv")})
        status = await h.rt.mcp.status(h.work, await h.rt.config.at(h.rt.location))
        assert status["gone"].status == "failed" and "command not found" in (status["gone"].error or "")
        assert status["broken"].status == "failed" and "command" in (status["broken"].error or "")
        assert status["off"].status == "disabled" and status["srv"].status == "connected"
        sid = (await h.rt.sessions.create()).id
        records = await h.turn(sid, "go", tool_call("c1", "srv_echo", {"text": "still"}), text("ok"))
    assert of_type(records, "session.tool.success")[0]["content"][0]["text"] == "echo: still"
    assert not [n for n in offered(h.provider.requests[0]) if n.startswith(("gone_", "broken_", "off_"))]


async def test_a_missing_command_is_retried_up_to_a_cap_then_left_failed_until_its_config_changes(tmp_path, caplog):
    from opencode_session.core.mcp.connection import MISSING_COMMAND_ATTEMPTS

    async with harness(tmp_path, {"gone": {"type": "local", "command": ["no-such-mcp-server-anywhere"]}}) as h:
        h.rt.mcp.backoff_s = 0.01
        config = await h.rt.config.at(h.rt.location)
        [server] = h.rt.mcp.at(h.work, config)
        with anyio.fail_after(20):
            while not server.gave_up:
                await anyio.sleep(0.02)
        status = await h.rt.mcp.status(h.work, config)
        attempts = [r for r in caplog.records if "MCP server gone failed: command not found" in r.getMessage()]
        assert len(attempts) == MISSING_COMMAND_ATTEMPTS  # and no more: nothing is retrying it
        assert status["gone"].status == "failed"
        assert "command not found: no-such-mcp-server-anywhere" in (status["gone"].error or "")
        assert "tried again when its configuration changes" in (status["gone"].error or "")
        h.configure({"gone": {"type": "local", "command": ["no-such-mcp-server-anywhere", "--now"]}})
        [again] = h.rt.mcp.at(h.work, await h.rt.config.at(h.rt.location))
        assert again is not server and not again.gave_up  # a changed configuration starts it anew
        with anyio.fail_after(20):
            await again.settled.wait()
        assert again.status == "failed" and again.failures == 1


async def test_a_list_changed_notification_reaches_the_next_step_and_not_the_running_one(tmp_path):
    async with harness(tmp_path, {"srv": local("srv")}) as h:
        sid = (await h.rt.sessions.create()).id
        await h.turn(sid, "grow", tool_call("c1", "srv_grow", {}), tool_call("c2", "srv_grown", {}), text("ok"))
        servers = h.rt.mcp.running()
    assert "srv_grown" not in offered(h.provider.requests[0])
    assert "srv_grown" in offered(h.provider.requests[1])
    assert servers and all(t.name != "missing" for t in servers[0].tools)


async def test_a_server_that_dies_fails_the_call_clearly_and_is_restarted(tmp_path):
    async with harness(tmp_path, {"srv": local("srv")}) as h:
        h.rt.mcp.backoff_s = 0.05
        sid = (await h.rt.sessions.create()).id
        records = await h.turn(sid, "die", tool_call("c1", "srv_die", {}), text("it died"))
        [failed] = of_type(records, "session.tool.failed")
        assert "srv_die" in failed["error"]["message"] and "MCP server srv" in failed["error"]["message"]
        [server] = h.rt.mcp.running()
        with anyio.fail_after(20):
            while server.status != "connected" or server.failures:
                await anyio.sleep(0.02)
        records = await h.turn(sid, "again", tool_call("c2", "srv_echo", {"text": "back"}), text("ok"))
    assert of_type(records, "session.tool.success"), of_type(records, "session.tool.failed")
    assert of_type(records, "session.tool.success")[0]["content"][0]["text"] == "echo: back"


@pytest.mark.parametrize("transport", ["http", "sse"])
async def test_remote_servers_over_streamable_http_and_sse(tmp_path, transport):
    with served("remote", transport, MCP_TEST_INSTRUCTIONS="Remote guidance.") as url:
        async with harness(tmp_path, {"web": {"type": "remote", "url": url, "headers": {"X-Test": "1"}}}) as h:
            sid = (await h.rt.sessions.create()).id
            records = await h.turn(sid, "call", tool_call("c1", "web_echo", {"text": "over http"}), text("ok"))
    assert "Remote guidance." in h.provider.requests[0].system[-1]
    assert of_type(records, "session.tool.success")[0]["content"][0]["text"] == "echo: over http"


async def test_a_remote_server_that_restarts_gets_a_new_session_and_the_call_goes_through(tmp_path):
    with serving("remote") as remote:
        async with harness(tmp_path, {"web": {"type": "remote", "url": remote.url}}) as h:
            sid = (await h.rt.sessions.create()).id
            await h.turn(sid, "one", tool_call("c1", "web_echo", {"text": "before"}), text("ok"))
            remote.restart()  # the same port; every MCP session it had is gone: it answers 404 "Session not found"
            records = await h.turn(sid, "two", tool_call("c2", "web_echo", {"text": "after"}),
                                   tool_call("c3", "web_echo", {"text": "and again"}), text("ok"))
            status = await h.rt.mcp.status(h.work, await h.rt.config.at(h.rt.location))
    assert not of_type(records, "session.tool.failed"), of_type(records, "session.tool.failed")
    assert [s["content"][0]["text"] for s in of_type(records, "session.tool.success")] == \
        ["echo: after", "echo: and again"]
    assert status["web"].status == "connected"


async def test_servers_are_shared_by_a_locations_sessions_and_stopped_with_the_runtime(tmp_path):
    async with harness(tmp_path) as h:
        h.configure({"srv": local("srv", MCP_TEST_MARKS=str(h.marks))})
        one, two = (await h.rt.sessions.create()).id, (await h.rt.sessions.create()).id
        await h.turn(one, "a", text("ok"))
        await h.turn(two, "b", text("ok"))
        started = [p for p in h.marks.iterdir() if p.name.startswith("started-")]
        assert len(started) == 1  # one process for both sessions
        pid = int(started[0].read_text())
        assert pid in children()
    wait_until(lambda: not alive(pid), 10, "the server process to end")
    assert pid not in children()


async def test_an_idle_server_is_stopped_and_started_again_when_needed(tmp_path):
    async with harness(tmp_path) as h:
        h.configure({"srv": local("srv", MCP_TEST_MARKS=str(h.marks))})
        sid = (await h.rt.sessions.create()).id
        await h.turn(sid, "a", text("ok"))
        [first] = [int(p.read_text()) for p in h.marks.iterdir() if p.name.startswith("started-")]
        assert await h.rt.mcp.stop_idle(now=1e12) == 1
        wait_until(lambda: not alive(first), 10, "the idle server to end")
        records = await h.turn(sid, "b", tool_call("c1", "srv_echo", {"text": "again"}), text("ok"))
        assert of_type(records, "session.tool.success")[0]["content"][0]["text"] == "echo: again"
        assert len([p for p in h.marks.iterdir() if p.name.startswith("started-")]) == 2


async def test_a_local_server_runs_in_the_location_with_the_pty_environment(tmp_path):
    from opencode_session.sdk import OpenCode

    work = tmp_path / "work"
    work.mkdir()
    (work / "opencode.json").write_text(json.dumps({"mcp": {"srv": local("srv", MCP_TEST_SEEN="config")}}))
    env = {**os.environ, "MCP_TEST_SEEN": "runtime"}
    async with OpenCode(db=tmp_path / "db.sqlite", directory=work, env=env,
                        pty_environment=lambda location, cwd: {"MCP_TEST_SEEN": f"host {cwd}"}) as oc:
        rt = oc.runtime
        [server] = await rt.mcp.ready(rt.location.directory, await rt.config.at(rt.location))
        result = await server.call("pid", {}, 10)
    pid, cwd, seen = result.content[0].text.split(" ", 2)
    assert cwd == str(work.resolve()) and seen == f"host {work.resolve()}"


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_the_location_is_offered_as_the_clients_roots(tmp_path, transport):
    with served("remote") as url:
        entry = local("srv") if transport == "stdio" else {"type": "remote", "url": url}
        async with harness(tmp_path, {"srv": entry}) as h:
            sid = (await h.rt.sessions.create()).id
            records = await h.turn(sid, "roots", tool_call("c1", "srv_roots", {}), text("ok"))
    [success] = of_type(records, "session.tool.success")
    assert success["content"][0]["text"] == f"{h.work.resolve().as_uri()} work"


async def test_a_large_result_is_bounded_like_every_tools_output(tmp_path):
    async with harness(tmp_path, {"srv": local("srv")}) as h:
        sid = (await h.rt.sessions.create()).id
        big = "\n".join(f"line {n}" for n in range(5000))
        records = await h.turn(sid, "big", tool_call("c1", "srv_echo", {"text": big}), text("ok"))
    [success] = of_type(records, "session.tool.success")
    shown = success["content"][0]["text"]
    assert shown.startswith("echo: line 0\nline 1") and "line 4999" in shown and "line 2500\n" not in shown
    [path] = success["outputPaths"]
    assert Path(path).read_text() == f"echo: {big}"
