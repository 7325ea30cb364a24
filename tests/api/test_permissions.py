"""Asking the user, end to end over HTTP against `ocs serve` and the Embedded host: a tool call whose rules say `ask`
waits on a pending request, published live and listed by the API, until a reply allows it (`once`, `always`, saved
for the project), refuses it with feedback (the model reads it and goes on) or declines it (the session stops); an
interrupt withdraws it. The model is a loopback Chat Completions server; `glob` outside the Location asks for
`external_directory`."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from opencode_session.client import (
    InvalidRequestError,
    OpenCodeClient,
    PermissionNotFoundError,
    QuestionNotFoundError,
    SessionNotFoundError,
)
from opencode_session.core.tools.tool import ToolContext, ToolOutput
from opencode_session.sdk import OpenCode
from tests.api.conftest import raw_http
from tests.security.conftest import serve, write_provider_config
from tests.support import fake_openai as fake
from tests.support.server import isolated_env

pytestmark = pytest.mark.anyio

WAIT = 60  # seconds: the machine may be busy


@pytest.fixture(scope="module")
def provider(loop_provider):
    return loop_provider


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = tmp_path_factory.mktemp("asking")
    for name in ("outside", "elsewhere"):
        (root / name).mkdir()
        (root / name / f"in-{name}.txt").write_text(name)
    (root / "work").mkdir()
    return root


@pytest.fixture(scope="module")
def server(root, provider):
    srv = serve(root, provider=provider)
    yield srv
    assert srv.stop() == 0, "".join(srv.stderr_lines)


@pytest.fixture(params=["server", "embedded"])
async def api(request, root, provider):
    write_provider_config(root, provider)
    provider.requests.clear()
    if request.param == "server":
        async with OpenCodeClient(request.getfixturevalue("server").url) as client:
            yield client
    else:
        async with OpenCode(db=root / f"embedded-{request.node.name}.sqlite", directory=root / "work",
                            env=isolated_env(root)) as host:
            yield host
    provider.release_held()
    assert provider.pending == 0, "a scripted provider response was never requested"


class Live:
    """The instance event stream, connected before the test acts, read until the event it waits for."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.iterator: AsyncIterator[Any] = stream.__aiter__()

    async def next(self, type_: str, session_id: str) -> dict[str, Any]:
        with anyio.fail_after(WAIT):
            while True:
                event = await self.iterator.__anext__()
                if event.type == type_ and event.data.get("sessionID") == session_id:
                    return dict(event.data)


@pytest.fixture
async def live(api):
    stream = api.event.subscribe()
    watcher = Live(stream)
    with anyio.fail_after(WAIT):
        first = await watcher.iterator.__anext__()
    assert first.type == "server.connected"
    yield watcher
    await stream.aclose()


def globs(*dirs: Path) -> fake.Script:
    """One completion calling `glob` on each directory (all outside the Location), in parallel."""
    calls = [fake.tool_call_deltas(i, f"call_{i + 1}", "glob", json.dumps({"pattern": "*", "path": str(d)}))
             for i, d in enumerate(dirs)]
    return fake.completion(*calls, finish_reason="tool_calls")


async def start(api, provider, *scripts: fake.Script, session_id: str | None = None) -> str:
    provider.enqueue(*scripts)
    sid = session_id or (await api.session.create()).id
    await api.session.prompt(sid, prompt={"text": "look around"})
    return sid


async def finish(api, sid: str) -> list[Any]:
    with anyio.fail_after(WAIT):
        await api.session.wait(sid)
    return [e async for e in api.session.log(sid, follow=False) if e.type not in ("log.synced", "session.renamed")]


def settlements(log: list[Any]) -> dict[str, Any]:
    return {e.data.callID: e for e in log if e.type in ("session.tool.success", "session.tool.failed")}


def last_tool_message(provider) -> str:
    return "\n".join(m["content"] for m in provider.requests[-1].json["messages"] if m["role"] == "tool")


async def test_once_allows_the_waiting_call(api, provider, root, live):
    sid = await start(api, provider, globs(root / "outside"), fake.completion(fake.text_deltas("done")))
    asked = await live.next("permission.v2.asked", sid)
    assert asked["action"] == "external_directory"
    assert asked["resources"] == asked["save"] == [f"{root / 'outside'}/*"]
    assert asked["source"]["type"] == "tool" and asked["source"]["callID"] == "call_1"
    # the session is active while it waits, and the request is listed everywhere a client looks
    assert sid in await api.session.active()
    pending = await api.session.permission_list(sid)
    assert [p.id for p in pending] == [asked["id"]]
    assert (await api.session.permission_get(sid, asked["id"])).resources == asked["resources"]
    everywhere = await api.permission.request_list(location={"directory": str(root / "work")})
    assert asked["id"] in [p.id for p in everywhere.data]
    await api.session.permission_reply(sid, asked["id"], reply="once")
    replied = await live.next("permission.v2.replied", sid)
    assert replied == {"sessionID": sid, "requestID": asked["id"], "reply": "once"}
    log = await finish(api, sid)
    assert settlements(log)["call_1"].type == "session.tool.success"
    assert "in-outside.txt" in last_tool_message(provider)
    assert log[-1].type == "session.execution.succeeded"
    assert await api.session.permission_list(sid) == []
    # `once` remembers nothing
    assert await api.permission.saved_list() == []


async def test_always_saves_for_the_project_covers_waiting_calls_and_is_removable(api, provider, root, live):
    outside = root / "outside"
    sid = await start(api, provider, globs(outside, outside), fake.completion(fake.text_deltas("done")))
    first = await live.next("permission.v2.asked", sid)
    second = await live.next("permission.v2.asked", sid)
    assert {first["source"]["callID"], second["source"]["callID"]} == {"call_1", "call_2"}
    await api.session.permission_reply(sid, first["id"], reply="always")
    log = await finish(api, sid)
    # the other waiting call was covered by the saved pattern and allowed with it
    assert {e.type for e in settlements(log).values()} == {"session.tool.success"}
    replies = [await live.next("permission.v2.replied", sid) for _ in range(2)]
    assert {(r["requestID"], r["reply"]) for r in replies} == {(first["id"], "always"), (second["id"], "always")}
    saved = await api.permission.saved_list()
    assert [(s.action, s.resource) for s in saved] == [("external_directory", f"{outside}/*")]
    project = (await api.location.get(location={"directory": str(root / "work")})).project.id
    assert saved[0].projectID == project
    assert [s.id for s in await api.permission.saved_list(project_id=project)] == [saved[0].id]
    assert await api.permission.saved_list(project_id="another-project") == []

    try:
        # a later call is allowed by the saved rule without asking (nobody replies here)
        sid = await start(api, provider, globs(outside), fake.completion(fake.text_deltas("done")))
        log = await finish(api, sid)
        assert settlements(log)["call_1"].type == "session.tool.success"
        # ... but not for another directory
        sid = await start(api, provider, globs(root / "elsewhere"), fake.completion(fake.text_deltas("done")))
        asked = await live.next("permission.v2.asked", sid)
        await api.session.permission_reply(sid, asked["id"], reply="reject", message="not there")
        await finish(api, sid)
    finally:
        await api.permission.saved_remove(saved[0].id)
    assert await api.permission.saved_list() == []
    # removed: the next call asks again
    sid = await start(api, provider, globs(outside), fake.completion(fake.text_deltas("done")))
    asked = await live.next("permission.v2.asked", sid)
    await api.session.permission_reply(sid, asked["id"], reply="once")
    await finish(api, sid)


def bash(command: str) -> fake.Script:
    return fake.completion(fake.tool_call_deltas(0, "call_1", "bash", json.dumps({"command": command})),
                           finish_reason="tool_calls")


async def test_a_command_naming_an_outside_path_asks_and_always_is_saved_like_any_other(api, provider, root, live):
    outside = root / "outside"
    command = f"cat {outside}/in-outside.txt"
    sid = await start(api, provider, bash(command), fake.completion(fake.text_deltas("done")))
    asked = await live.next("permission.v2.asked", sid)
    assert asked["action"] == "external_directory"
    assert asked["resources"] == asked["save"] == [f"{outside}/*"]
    assert asked["metadata"] == {"command": command}
    await api.session.permission_reply(sid, asked["id"], reply="always")
    log = await finish(api, sid)
    assert settlements(log)["call_1"].type == "session.tool.success"
    assert "outside" in last_tool_message(provider)
    saved = await api.permission.saved_list()
    try:
        assert [(s.action, s.resource) for s in saved] == [("external_directory", f"{outside}/*")]
        # the saved rule covers the next command there, which runs without asking (nobody replies here)
        sid = await start(api, provider, bash(f"cd {outside} && cat in-outside.txt"),
                          fake.completion(fake.text_deltas("done")))
        log = await finish(api, sid)
        assert settlements(log)["call_1"].type == "session.tool.success"
    finally:
        for rule in saved:
            await api.permission.saved_remove(rule.id)


async def test_a_config_deny_beats_a_saved_allow(api, provider, root, live):
    outside = root / "outside"
    sid = await start(api, provider, globs(outside), fake.completion(fake.text_deltas("done")))
    asked = await live.next("permission.v2.asked", sid)
    await api.session.permission_reply(sid, asked["id"], reply="always")
    await finish(api, sid)
    try:
        write_provider_config(root, provider, permission={"external_directory": {f"{outside}/*": "deny"}})
        sid = await start(api, provider, globs(outside), fake.completion(fake.text_deltas("done")))
        log = await finish(api, sid)
        failed = settlements(log)["call_1"]
        assert failed.type == "session.tool.failed" and failed.data.error.type == "permission.rejected"
    finally:
        for saved in await api.permission.saved_list():
            await api.permission.saved_remove(saved.id)


async def test_reject_with_feedback_is_read_by_the_model_and_the_session_goes_on(api, provider, root, live):
    sid = await start(api, provider, globs(root / "outside"), fake.completion(fake.text_deltas("ok, I will not")))
    asked = await live.next("permission.v2.asked", sid)
    await api.session.permission_reply(sid, asked["id"], reply="reject", message="stay inside the project")
    log = await finish(api, sid)
    failed = settlements(log)["call_1"]
    assert failed.type == "session.tool.failed" and failed.data.error.type == "permission.rejected"
    assert "stay inside the project" in failed.data.error.message
    assert "stay inside the project" in last_tool_message(provider)
    assert [e.type for e in log[-2:]] == ["session.step.ended", "session.execution.succeeded"]


async def test_reject_without_feedback_declines_stops_the_session_and_its_other_requests(api, provider, root, live):
    sid = await start(api, provider, globs(root / "outside", root / "elsewhere"))
    first = await live.next("permission.v2.asked", sid)
    second = await live.next("permission.v2.asked", sid)
    requests_before = len(provider.requests)
    await api.session.permission_reply(sid, first["id"], reply="reject")
    log = await finish(api, sid)
    calls = settlements(log)
    assert {c.data.error.type for c in calls.values()} == {"permission.declined"}
    assert all(c.data.error.message == "The user declined this tool call" for c in calls.values())
    replies = [await live.next("permission.v2.replied", sid) for _ in range(2)]
    assert {(r["requestID"], r["reply"]) for r in replies} == {(first["id"], "reject"), (second["id"], "reject")}
    assert [e.type for e in log[-2:]] == ["session.step.failed", "session.execution.interrupted"]
    assert log[-1].data.reason == "user"
    assert len(provider.requests) == requests_before  # the model was not asked to go on
    assert await api.session.permission_list(sid) == []


async def test_interrupt_while_waiting_withdraws_the_request(api, provider, root, live):
    sid = await start(api, provider, globs(root / "outside"))
    asked = await live.next("permission.v2.asked", sid)
    await api.session.interrupt(sid)
    replied = await live.next("permission.v2.replied", sid)
    assert replied["requestID"] == asked["id"] and replied["reply"] == "reject"
    log = await finish(api, sid)
    assert settlements(log)["call_1"].data.error.type == "aborted"
    assert log[-1].type == "session.execution.interrupted" and log[-1].data.reason == "user"
    assert await api.session.permission_list(sid) == []
    with pytest.raises(PermissionNotFoundError):
        await api.session.permission_reply(sid, asked["id"], reply="once")


async def test_a_waiting_call_keeps_the_policy_of_the_step_that_issued_it(api, provider, root, live):
    # `locked` denies leaving the Location; the call was issued under `build`, which asks
    write_provider_config(root, provider, agent={"locked": {"permission": {"external_directory": "deny"}}})
    sid = await start(api, provider, globs(root / "outside"), fake.completion(fake.text_deltas("done")))
    asked = await live.next("permission.v2.asked", sid)
    await api.session.switch_agent(sid, agent="locked")
    await api.session.permission_reply(sid, asked["id"], reply="once")
    log = await finish(api, sid)
    assert settlements(log)["call_1"].type == "session.tool.success"
    steps = [e.data.agent for e in log if e.type == "session.step.started"]
    assert steps == ["build", "locked"]  # the switch applies from the next Step on


async def test_unknown_requests_and_sessions_are_404(api, provider, root, live):
    sid = (await api.session.create()).id
    for call in (api.session.permission_get(sid, "per_unknown"),
                 api.session.permission_reply(sid, "per_unknown", reply="once")):
        with pytest.raises(PermissionNotFoundError) as info:
            await call
        assert info.value.requestID == "per_unknown"
    with pytest.raises(SessionNotFoundError):
        await api.session.permission_list("ses_unknown")
    with pytest.raises(SessionNotFoundError):
        await api.session.permission_reply("ses_unknown", "per_unknown", reply="once")
    # a request is found only under its own session
    other = await start(api, provider, globs(root / "outside"))
    asked = await live.next("permission.v2.asked", other)
    with pytest.raises(PermissionNotFoundError):
        await api.session.permission_get(sid, asked["id"])
    # a reply that is none of the three, or an answer that is not lists of labels, is refused and changes nothing
    async with raw_http(api) as http:
        for path, body in ((f"permission/{asked['id']}/reply", {"reply": "maybe"}),
                           (f"permission/{asked['id']}/reply", {"reply": "once", "message": 5}),
                           ("question/que_1/reply", {"answers": ["SQLite"]})):
            response = await http.post(f"/api/session/{other}/{path}", json=body)
            assert response.status_code == 400 and response.json()["_tag"] == "InvalidRequestError", response.text
    assert [p.id for p in await api.session.permission_list(other)] == [asked["id"]]
    await api.session.permission_reply(other, asked["id"], reply="reject")
    await finish(api, other)


# --- agents ---------------------------------------------------------------------------------------------------------


async def test_agents_are_listed_with_their_rules_and_switched_off_tools_are_not_offered(api, provider, root):
    write_provider_config(root, provider, agent={
        "reviewer": {"description": "Reviews code", "mode": "subagent", "steps": 3, "prompt": "Review carefully.",
                     "model": "loop/fake-model", "permission": {"read": {"*.lock": "deny"}}, "tools": {"glob": False}},
        "plan": {"description": "Plans first"},
    })
    listed = await api.agent.list(location={"directory": str(root / "work")})
    assert listed.location.directory == str((root / "work").resolve())
    agents = {a.id: a for a in listed.data}
    assert list(agents) == ["build", "plan", "reviewer"]
    reviewer = agents["reviewer"]
    assert (reviewer.description, reviewer.mode, reviewer.steps, reviewer.system, reviewer.hidden) == (
        "Reviews code", "subagent", 3, "Review carefully.", False)
    assert (reviewer.model.providerID, reviewer.model.id) == ("loop", "fake-model")
    rules = [(r.action, r.resource, r.effect) for r in reviewer.permissions]
    assert rules[0] == ("*", "*", "allow") and rules[-2:] == [("read", "*.lock", "deny"), ("glob", "*", "deny")]
    plan = agents["plan"]
    assert plan.description == "Plans first"  # a config entry refines the built-in agent
    plan_rules = {(r.action, r.resource): r.effect for r in plan.permissions}
    assert plan_rules[("edit", "*")] == plan_rules[("write", "*")] == plan_rules[("apply_patch", "*")] == "deny"
    assert plan_rules[("bash", "*")] == "ask"
    assert all(r.effect == "allow" for r in agents["build"].permissions if r.action == "*")

    # the model is not offered a tool its agent switched off
    provider.enqueue(fake.completion(fake.text_deltas("ok")), fake.completion(fake.text_deltas("ok")))
    for agent, missing in (("reviewer", {"glob"}), ("build", set())):
        sid = (await api.session.create(agent=agent)).id
        await api.session.prompt(sid, prompt={"text": "hi"})
        await finish(api, sid)
        offered = {t["function"]["name"] for t in provider.requests[-1].json.get("tools", [])}
        assert "read" in offered and not offered & missing
        assert missing or "glob" in offered


# --- questions, through a test-only tool on the Embedded host -------------------------------------------------------


class AskTool:
    """Hands the model's questions to the user and returns their answers."""

    name = "ask_user"
    description = "Ask the user questions."
    parameters: dict[str, Any] = {"type": "object", "properties": {"questions": {"type": "array"}},
                                  "required": ["questions"]}

    async def execute(self, input: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        assert ctx.questioner is not None
        answers = await ctx.questioner(input["questions"])
        return ToolOutput.of_text("answers: " + json.dumps(answers))


QUESTIONS = [{"question": "Which database?", "header": "Database",
              "options": [{"label": "SQLite", "description": "a file"}, {"label": "Postgres", "description": "a db"}]},
             {"question": "Add tests?", "header": "Tests", "multiple": True,
              "options": [{"label": "unit", "description": "fast"}, {"label": "e2e", "description": "slow"}]}]


@pytest.fixture
async def host(root, provider):
    write_provider_config(root, provider)
    provider.requests.clear()
    async with OpenCode(db=":memory:", directory=root / "work", env=isolated_env(root), tools=[AskTool()]) as oc:
        stream = oc.event.subscribe()
        watcher = Live(stream)
        with anyio.fail_after(WAIT):
            assert (await watcher.iterator.__anext__()).type == "server.connected"
        yield oc, watcher
        await stream.aclose()
    provider.release_held()
    assert provider.pending == 0, "a scripted provider response was never requested"


def ask_call() -> fake.Script:
    call = fake.tool_call_deltas(0, "call_q", "ask_user", json.dumps({"questions": QUESTIONS}))
    return fake.completion(call, finish_reason="tool_calls")


async def test_a_question_waits_for_the_answer(host, provider, root):
    oc, live = host
    sid = await start(oc, provider, ask_call(), fake.completion(fake.text_deltas("thanks")))
    asked = await live.next("question.v2.asked", sid)
    assert asked["questions"][0]["header"] == "Database" and asked["tool"]["callID"] == "call_q"
    pending = await oc.session.question_list(sid)
    assert [q.id for q in pending] == [asked["id"]] and pending[0].questions[1].multiple is True
    everywhere = await oc.question.request_list()
    assert [q.id for q in everywhere.data] == [asked["id"]]
    await oc.session.question_reply(sid, asked["id"], answers=[["SQLite"], ["unit", "e2e"]])
    replied = await live.next("question.v2.replied", sid)
    assert replied["answers"] == [["SQLite"], ["unit", "e2e"]]
    log = await finish(oc, sid)
    assert settlements(log)["call_q"].type == "session.tool.success"
    assert 'answers: [["SQLite"], ["unit", "e2e"]]' in last_tool_message(provider)
    assert log[-1].type == "session.execution.succeeded"
    assert await oc.session.question_list(sid) == []
    with pytest.raises(QuestionNotFoundError) as info:
        await oc.session.question_reply(sid, asked["id"], answers=[])
    assert info.value.requestID == asked["id"]


async def test_rejecting_a_question_fails_the_call_and_stops_the_session(host, provider, root):
    oc, live = host
    sid = await start(oc, provider, ask_call())
    asked = await live.next("question.v2.asked", sid)
    with pytest.raises(QuestionNotFoundError):
        await oc.session.question_reject((await oc.session.create()).id, asked["id"])  # not that session's
    await oc.session.question_reject(sid, asked["id"])
    assert (await live.next("question.v2.rejected", sid))["requestID"] == asked["id"]
    log = await finish(oc, sid)
    assert settlements(log)["call_q"].data.error.type == "question.rejected"
    assert log[-1].type == "session.execution.interrupted" and log[-1].data.reason == "user"


async def test_an_interrupt_withdraws_a_waiting_question(host, provider, root):
    oc, live = host
    sid = await start(oc, provider, ask_call())
    asked = await live.next("question.v2.asked", sid)
    await oc.session.interrupt(sid)
    assert (await live.next("question.v2.rejected", sid))["requestID"] == asked["id"]
    log = await finish(oc, sid)
    assert settlements(log)["call_q"].data.error.type == "aborted"
    assert await oc.session.question_list(sid) == []
    with pytest.raises(SessionNotFoundError):
        await oc.session.question_list("ses_unknown")


# --- bounded output ------------------------------------------------------------------------------------------------


async def test_oversized_output_is_bounded_and_kept_whole_in_a_managed_file(api, provider, root):
    many = root / "work" / "many"
    many.mkdir(exist_ok=True)
    names = [f"file-{n:03d}.txt" for n in range(40)]
    for name in names:
        (many / name).write_text(name)
    write_provider_config(root, provider, tool_output={"max_lines": 6})
    call = fake.tool_call_deltas(0, "call_1", "glob", json.dumps({"pattern": "many/*"}))
    sid = await start(api, provider, fake.completion(call, finish_reason="tool_calls"),
                      fake.completion(fake.text_deltas("done")))
    log = await finish(api, sid)
    success = settlements(log)["call_1"]
    assert success.type == "session.tool.success"
    [kept] = success.data.outputPaths
    preview = success.data.content[0].text
    assert kept in preview and preview.count("\n") + 1 <= 6
    assert kept in last_tool_message(provider)  # the model is told where the rest is
    whole = Path(kept).read_text()
    assert all(name in whole for name in names)
    # the durable log never held the complete output
    durable = json.dumps([e.wire() for e in log])
    assert sum(name in durable for name in names) < len(names) // 2

    # the model may read the managed file with an ordinary tool, though it is outside the Location: nobody is asked
    call = fake.tool_call_deltas(0, "call_1", "glob", json.dumps({"pattern": "*", "path": str(Path(kept).parent)}))
    sid = await start(api, provider, fake.completion(call, finish_reason="tool_calls"),
                      fake.completion(fake.text_deltas("done")))
    log = await finish(api, sid)
    assert settlements(log)["call_1"].type == "session.tool.success"
    assert Path(kept).name in last_tool_message(provider)


async def test_a_client_asks_on_a_sessions_behalf(api, provider, root, live):
    write_provider_config(root, provider, permission={"bash": {"*": "ask", "rm *": "deny", "ls *": "allow"}})
    sid = (await api.session.create(location={"directory": str(root / "work")})).id
    assert (await api.session.permission_create(sid, action="bash", resources=["rm -rf build"])).effect == "deny"
    assert (await api.session.permission_create(sid, action="bash", resources=["ls -la"])).effect == "allow"
    # the agent's rules decide: plan asks for every command, even one the global config allows
    created = await api.session.permission_create(sid, action="bash", resources=["ls -la"], agent="plan")
    assert created.effect == "ask"
    assert (await live.next("permission.v2.asked", sid))["id"] == created.id
    await api.session.permission_reply(sid, created.id, reply="once")

    created = await api.session.permission_create(sid, id="per_client1", action="bash", resources=["git push"],
                                                  save=["git push *"], metadata={"why": "release"})
    assert (created.id, created.effect) == ("per_client1", "ask")
    waiting = await api.session.permission_get(sid, "per_client1")
    assert (waiting.save, waiting.metadata, waiting.source) == (["git push *"], {"why": "release"}, None)
    await api.session.permission_reply(sid, "per_client1", reply="always")
    try:
        again = await api.session.permission_create(sid, action="bash", resources=["git push origin main"])
        assert again.effect == "allow"  # the saved pattern covers it now
    finally:
        for saved in await api.permission.saved_list():
            await api.permission.saved_remove(saved.id)
    with pytest.raises(InvalidRequestError):
        await api.session.permission_create(sid, action="bash", resources=["ls"], agent="nobody")
    with pytest.raises(SessionNotFoundError):
        await api.session.permission_create("ses_unknown", action="bash", resources=["ls"])


async def test_a_skill_the_rules_ask_for_waits_for_the_user(api, provider, root, live):
    folder = root / "config" / "opencode" / "skill" / "release"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_text("---\nname: release\ndescription: Ship it\n---\nRELEASE-STEPS\n")
    write_provider_config(root, provider, permission={"skill": {"rel*": "ask"}})
    call = fake.tool_call_deltas(0, "call_1", "skill", json.dumps({"name": "release"}))
    sid = await start(api, provider, fake.completion(call, finish_reason="tool_calls"),
                      fake.completion(fake.text_deltas("done")))
    asked = await live.next("permission.v2.asked", sid)
    assert (asked["action"], asked["resources"]) == ("skill", ["release"])
    await api.session.permission_reply(sid, asked["id"], reply="once")
    log = await finish(api, sid)
    assert settlements(log)["call_1"].type == "session.tool.success"
    assert "RELEASE-STEPS" in last_tool_message(provider)
