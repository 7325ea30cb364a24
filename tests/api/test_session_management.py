"""Managing sessions over the API (upstream's later session routes): children, update, remove, the inbox, export and
import. Each test runs against a real `ocs serve` on loopback and against the Embedded host, each on SQLite and on
PostgreSQL, with a scripted model (a loopback Chat Completions server); what a route removed is checked in the
database itself."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import secrets
import sqlite3
import subprocess
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx2
import psycopg
import pytest

from opencode_session.client import (
    ConflictError,
    InvalidRequestError,
    OpenCodeClient,
    SessionNotFoundError,
)
from opencode_session.core.snapshot.service import SNAPSHOT_DIRECTORY
from opencode_session.sdk import OpenCode
from tests.security.conftest import write_provider_config
from tests.support import fake_openai as fake
from tests.support.postgres import fresh_schema
from tests.support.server import isolated_env, start_server

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(180)]

WAIT = 60  # seconds: the machine may be busy
# every table that holds rows of a session (the log aside)
SESSION_TABLES = ("session_message", "session_pending", "instruction_checkpoint", "instruction_entry",
                  "session_message_removal", "session_lease")


@dataclass
class Host:
    client: Any  # OpenCodeClient, or the Embedded host (the same API)
    project: Path
    db: str  # a SQLite file or a postgresql:// URL
    home: Path  # the host's $HOME
    snapshots: Path  # where the host keeps its file snapshots

    def snapshot_repo(self, project: Path) -> Path:
        return self.snapshots / hashlib.sha256(str(project.resolve()).encode()).hexdigest()[:20]

    async def session(self, **fields: Any) -> str:
        fields.setdefault("location", {"directory": str(self.project)})
        return (await self.client.session.create(**fields)).id

    @contextlib.contextmanager
    def sql(self) -> Iterator[Any]:
        """A connection to the host's database, for what the API cannot show (rows it removed)."""
        if self.db.startswith("postgresql://"):
            with psycopg.connect(self.db, autocommit=True) as conn:
                yield conn
        else:
            conn = sqlite3.connect(self.db)
            try:
                yield conn
            finally:
                conn.close()

    def rows(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        with self.sql() as conn:
            if isinstance(conn, sqlite3.Connection):
                return conn.execute(sql, params).fetchall()
            return conn.execute(sql.replace("?", "%s"), params).fetchall()


def _project(root: Path, config: dict[str, Any] | None = None) -> Path:
    project = root / "project"
    project.mkdir(parents=True)
    (project / "notes.txt").write_text("alpha\n")
    if config is not None:
        (project / "opencode.json").write_text(json.dumps(config))
    return project


@pytest.fixture(scope="module")
def provider(loop_provider):
    return loop_provider


@contextlib.contextmanager
def _served(root: Path, provider: fake.FakeOpenAI, db: str | None) -> Iterator[tuple[Any, str]]:
    env = isolated_env(root)
    write_provider_config(root, provider)
    path = db or str(root / "db.sqlite")
    srv = start_server(root, env=env, db=path)
    try:
        yield srv, path, root
    finally:
        assert srv.stop() == 0, "".join(srv.stderr_lines)


@pytest.fixture(scope="module")
def sqlite_server(tmp_path_factory, provider):
    with _served(tmp_path_factory.mktemp("manage-sqlite"), provider, None) as served:
        yield served


@pytest.fixture(scope="module")
def postgres_server(tmp_path_factory, provider):
    with fresh_schema() as url, _served(tmp_path_factory.mktemp("manage-pg"), provider, url) as served:
        yield served


@pytest.fixture(params=["server-sqlite", "server-postgres", "embedded-sqlite", "embedded-postgres"])
async def host(request, tmp_path, provider) -> AsyncIterator[Host]:
    provider.requests.clear()
    kind, backend = request.param.split("-")
    if kind == "server":
        srv, db, root = request.getfixturevalue(f"{backend}_server")
        data = root if backend == "sqlite" else root / "data" / "opencode-session"  # beside the database, or $XDG
        async with OpenCodeClient(srv.url) as client:
            yield Host(client, _project(tmp_path), db, root / "home", data / SNAPSHOT_DIRECTORY)
    else:
        root = tmp_path / "host"
        write_provider_config(root, provider)
        env = isolated_env(root)
        with contextlib.ExitStack() as stack:
            db = stack.enter_context(fresh_schema()) if backend == "postgres" else str(tmp_path / "db.sqlite")
            async with OpenCode(db=db, directory=tmp_path, env=env) as oc:
                yield Host(oc, _project(tmp_path), db, root / "home", oc.runtime.snapshots.root)
    provider.release_held()
    assert provider.pending == 0, "a scripted provider response was never requested"


async def turn(host: Host, provider: fake.FakeOpenAI, sid: str, text: str, *scripts: fake.Script) -> str:
    provider.enqueue(*(scripts or (fake.completion(fake.text_deltas(f"answer to {text}")),)))
    admitted = await host.client.session.prompt(sid, prompt={"text": text})
    with anyio.fail_after(WAIT):
        await host.client.session.wait(sid)
    return str(admitted.id)


async def log_types(host: Host, sid: str) -> list[str]:
    return [e.type async for e in host.client.session.log(sid, follow=False) if e.type != "log.synced"]


def raw(host: Host) -> httpx2.AsyncClient:
    client = host.client
    return httpx2.AsyncClient(base_url=client.base_url,
                              transport=client.transport if isinstance(client, OpenCode) else None)


def _last_user_texts(request: fake.RecordedRequest) -> list[str]:
    texts = []
    for message in request.json["messages"]:
        content = message.get("content")
        if message["role"] == "user":
            texts.append(content if isinstance(content, str) else " ".join(p.get("text", "") for p in content))
    return texts


# --- create, list by parent, fork ----------------------------------------------------------------------


async def test_children_are_created_listed_by_parent_and_forked(host):
    rules = [{"action": "webfetch", "resource": "*", "effect": "deny"}]
    parent = await host.client.session.create(location={"directory": str(host.project)}, title="Plan the release",
                                              metadata={"ticket": 42}, permissions=rules)
    assert (parent.title, parent.metadata, [r.wire() for r in parent.permissions]) == (
        "Plan the release", {"ticket": 42}, rules)
    child = await host.client.session.create(parent_id=parent.id)
    assert child.parentID == parent.id and child.location == parent.location  # at its parent's Location
    fork = await host.client.session.fork(parent.id)
    assert fork.parentID == parent.id

    children = await host.client.session.list(parent_id=parent.id)
    assert {s.id for s in children.items} == {child.id, fork.id}
    roots = await host.client.session.list(parent_id="null", limit=200)
    assert parent.id in {s.id for s in roots.items} and not {child.id, fork.id} & {s.id for s in roots.items}
    first = await host.client.session.list(parent_id=parent.id, limit=1, order="asc")
    assert [s.id for s in first.items] == [child.id]
    rest = await host.client.session.list(cursor=first.next)  # the cursor keeps the filter
    assert [s.id for s in rest.items] == [fork.id]

    with pytest.raises(SessionNotFoundError):
        await host.client.session.create(parent_id="ses_doesnotexist")
    async with raw(host) as http:
        answer = await http.get("/api/session", params={"parentID": "not-a-session"})
        assert answer.status_code == 400 and answer.json()["_tag"] == "InvalidRequestError"


# --- update ---------------------------------------------------------------------------------------------


async def test_update_changes_title_metadata_and_rules_and_an_explicit_title_stays(host, provider):
    sid = await host.session()
    # a title that looks like a default one is still the client's: the automatic title must not replace it
    chosen = "New session - 2020-01-01T00:00:00.000Z"
    await host.client.session.update(sid, title=chosen, metadata={"k": "v"},
                                      permissions=[{"action": "bash", "resource": "*", "effect": "deny"}])
    info = await host.client.session.get(sid)
    assert (info.title, info.metadata, [r.effect for r in info.permissions]) == (chosen, {"k": "v"}, ["deny"])
    await host.client.session.update(sid, metadata={"k": "w"})  # only what is given changes
    info = await host.client.session.get(sid)
    assert (info.title, info.metadata) == (chosen, {"k": "w"})
    assert (await log_types(host, sid)).count("session.updated") == 2
    await host.client.session.update(sid, metadata={"k": "w"})  # nothing changes: no event
    assert (await log_types(host, sid)).count("session.updated") == 2

    # an untitled session of the same host is titled after its first turn; the explicitly titled one is not
    control = await host.session()
    provider.title_requests.clear()
    await turn(host, provider, control, "name me")
    with anyio.fail_after(WAIT):
        async for event in host.client.session.log(control, follow=True):
            if event.type == "session.renamed":
                break
    await turn(host, provider, sid, "keep my title")
    assert len(provider.title_requests) == 1
    assert (await host.client.session.get(sid)).title == chosen
    assert (await host.client.session.get(control)).title == provider.title

    with pytest.raises(SessionNotFoundError):
        await host.client.session.update("ses_doesnotexist", title="x")
    async with raw(host) as http:
        bad = await http.patch(f"/api/session/{sid}", json={"title": None})
        assert bad.status_code == 400 and bad.json()["_tag"] == "InvalidRequestError"


async def test_session_rules_apply_after_the_agents_and_a_configured_deny_still_wins(tmp_path, host, provider):
    # the session's own deny takes bash away from the model
    sid = await host.session(permissions=[{"action": "bash", "resource": "*", "effect": "deny"}])
    await turn(host, provider, sid, "list files")
    assert "bash" not in {t["function"]["name"] for t in provider.requests[-1].json.get("tools", [])}
    # where the configuration denies bash, the session's allow does not give it back
    denied = tmp_path / "denied"
    denied.mkdir()
    (denied / "opencode.json").write_text(json.dumps({"permission": {"bash": "deny"}}))
    other = await host.session(location={"directory": str(denied)},
                               permissions=[{"action": "bash", "resource": "*", "effect": "allow"}])
    await turn(host, provider, other, "list files")
    assert "bash" not in {t["function"]["name"] for t in provider.requests[-1].json.get("tools", [])}
    # and a session allow does lift the default ask where the configuration says nothing
    asked = await host.session(permissions=[{"action": "external_directory", "resource": "*", "effect": "allow"}])
    created = await host.client.session.permission_create(asked, action="external_directory",
                                                          resources=["/elsewhere/*"])
    assert created.effect == "allow"


# --- remove ------------------------------------------------------------------------------------------------


async def test_remove_takes_the_session_its_children_and_everything_they_held(host, provider):
    subprocess.run(["git", "init", "-q", str(host.project)], check=True)  # a project with file snapshots
    root = await host.session()
    await turn(host, provider, root, "make output", fake.completion(
        fake.tool_call_deltas(0, "c1", "bash", json.dumps({"command": "seq 1 4000", "description": "count"})),
        finish_reason="tool_calls"), fake.completion(fake.text_deltas("counted")))
    messages = (await host.client.session.messages(root, order="asc")).items
    tool = next(p for m in messages if m.type == "assistant" for p in m.content if p.type == "tool")
    output_files = [Path(p) for p in tool.state.outputPaths or ()]
    assert output_files and all(p.exists() for p in output_files)  # the long output was kept in a file
    assert host.snapshot_repo(host.project).is_dir()  # the Step's snapshots
    where = {"directory": str(host.project)}
    terminal = (await host.client.pty.create(location=where, command="sh")).data

    child = (await host.client.session.create(parent_id=root)).id
    grandchild = (await host.client.session.create(parent_id=child)).id
    await host.client.session.context_entry_put(child, "notes", value="remember")
    await host.client.session.prompt(grandchild, prompt={"text": "later"}, resume=False)  # pending input
    # the child executes while it is removed: its model answer holds
    held = fake.completion(fake.text_deltas("working", " on it"), hold_after=2)
    provider.enqueue(held)
    await host.client.session.prompt(child, prompt={"text": "take a while"})
    with anyio.fail_after(WAIT):
        await anyio.to_thread.run_sync(held.held.wait)

    seen: list[str] = []
    async with anyio.create_task_group() as tg:
        subscribed = anyio.Event()

        async def watch() -> None:
            stream = host.client.event.subscribe()
            async for event in stream:
                if event.type == "server.connected":
                    subscribed.set()
                elif event.type == "session.deleted":
                    seen.append(event.data["sessionID"] if isinstance(event.data, dict) else event.data.sessionID)
                    if len(seen) == 3:
                        return

        tg.start_soon(watch)
        with anyio.fail_after(WAIT):
            await subscribed.wait()
            await host.client.session.remove(root)
    assert sorted(seen) == sorted([root, child, grandchild])
    assert seen[-1] == root  # children go before their parent

    for sid in (root, child, grandchild):
        with pytest.raises(SessionNotFoundError):
            await host.client.session.get(sid)
        with pytest.raises(SessionNotFoundError):
            await host.client.session.messages(sid)
    with pytest.raises(SessionNotFoundError):  # a client that retries is told it is gone
        await host.client.session.remove(root)
    assert not output_files[0].exists()
    # no session works in the Location any more: its terminals and snapshots are released
    assert terminal.id not in {t.id for t in (await host.client.pty.list(location=where)).data}
    assert not host.snapshot_repo(host.project).exists()
    ids = (root, child, grandchild)
    marks = ", ".join("?" * len(ids))
    for table in SESSION_TABLES:
        assert host.rows(f"SELECT * FROM {table} WHERE session_id IN ({marks})", *ids) == [], table
    assert host.rows(f"SELECT * FROM session WHERE id IN ({marks})", *ids) == []
    # of their log only the tombstones stay
    events = host.rows(f"SELECT aggregate_id, type FROM event WHERE aggregate_id IN ({marks})", *ids)
    assert sorted(events) == sorted((sid, "session.deleted.2") for sid in ids)
    listed = await host.client.session.list(limit=200)
    assert not set(ids) & {s.id for s in listed.items}


async def test_removing_a_fork_keeps_the_tool_output_its_parent_still_names(host, provider):
    parent = await host.session()
    await turn(host, provider, parent, "make output", fake.completion(
        fake.tool_call_deltas(0, "c1", "bash", json.dumps({"command": "seq 1 4000", "description": "count"})),
        finish_reason="tool_calls"), fake.completion(fake.text_deltas("counted")))
    messages = (await host.client.session.messages(parent, order="asc")).items
    tool = next(p for m in messages if m.type == "assistant" for p in m.content if p.type == "tool")
    kept = [Path(p) for p in tool.state.outputPaths or ()]
    assert kept
    fork = await host.client.session.fork(parent)
    await host.client.session.remove(fork.id)
    assert all(p.exists() for p in kept)  # the parent's history still names it
    await host.client.session.remove(parent)
    assert not any(p.exists() for p in kept)


# --- the inbox ---------------------------------------------------------------------------------------------


async def test_inbox_lists_cancels_and_redelivers_pending_input(host, provider):
    sid = await host.session()
    first = await host.client.session.prompt(sid, prompt={"text": "first"}, delivery="queue", resume=False)
    second = await host.client.session.prompt(sid, prompt={"text": "second"}, delivery="queue", resume=False)
    inbox = await host.client.session.inbox_list(sid)
    assert [(i.id, i.type, i.delivery, i.prompt.text) for i in inbox] == [
        (first.id, "user", "queue", "first"), (second.id, "user", "queue", "second")]

    await host.client.session.inbox_cancel(sid, second.id)
    assert [i.id for i in await host.client.session.inbox_list(sid)] == [first.id]
    await host.client.session.inbox_cancel(sid, second.id)  # no longer pending: nothing to do
    assert "session.input.cancelled" in await log_types(host, sid)

    # queue -> steer wakes execution: nothing else started it (resume=false)
    provider.enqueue(fake.completion(fake.text_deltas("steered")))
    synced = [e async for e in host.client.session.log(sid, follow=False)][-1]
    await host.client.session.inbox_update(sid, first.id, delivery="steer")
    with anyio.fail_after(WAIT):
        async for event in host.client.session.log(sid, after=synced.seq, follow=True):
            if event.type == "session.execution.succeeded":
                break
    assert await host.client.session.inbox_list(sid) == []
    texts = [m.text for m in (await host.client.session.messages(sid, order="asc")).items if m.type == "user"]
    assert texts == ["first"]  # the cancelled input never executed
    assert all("second" not in _last_user_texts(r) for r in provider.requests)

    with pytest.raises(ConflictError):  # delivered already
        await host.client.session.inbox_update(sid, first.id, delivery="queue")
    with pytest.raises(SessionNotFoundError):
        await host.client.session.inbox_list("ses_doesnotexist")
    with pytest.raises(SessionNotFoundError):
        await host.client.session.inbox_cancel("ses_doesnotexist", first.id)


async def test_a_cancel_racing_the_promotion_of_the_same_input_leaves_exactly_one_outcome(host, provider):
    sid = await host.session()
    # the answer to a promoted input, when the promotion wins (nothing is scripted for it)
    provider.fallback = fake.completion(fake.text_deltas("answered"))
    try:
        for attempt in range(4):
            # a turn holds; meanwhile one steer waits to be promoted at the Step's end, and a cancel races that
            held = fake.completion(fake.text_deltas("busy"), hold_after=1)
            provider.enqueue(held)
            await host.client.session.prompt(sid, prompt={"text": f"hold {attempt}"})
            with anyio.fail_after(WAIT):
                await anyio.to_thread.run_sync(held.held.wait)
            racing = await host.client.session.prompt(sid, prompt={"text": f"racing {attempt}"}, resume=False)
            async with anyio.create_task_group() as tg:
                tg.start_soon(anyio.to_thread.run_sync, held.release.set)
                tg.start_soon(host.client.session.inbox_cancel, sid, racing.id)
            with anyio.fail_after(WAIT):
                await host.client.session.wait(sid)
            log = [e async for e in host.client.session.log(sid, follow=False) if e.type != "log.synced"]
            cancelled = [e for e in log if e.type == "session.input.cancelled" and e.data.inputID == racing.id]
            promoted = [e for e in log if e.type == "session.input.promoted" and e.data.inputID == racing.id]
            assert len(cancelled) + len(promoted) == 1
            asked = any(f"racing {attempt}" in _last_user_texts(r) for r in provider.requests)
            assert asked == bool(promoted)  # cancelled input never reached the model
            assert await host.client.session.inbox_list(sid) == []  # whichever won, nothing stays pending
            assert [e.type for e in log if e.type != "session.renamed"][-1] == "session.execution.succeeded"
            provider.requests.clear()
    finally:
        provider.fallback = None


# --- export and import ------------------------------------------------------------------------------------


async def test_export_sanitizes_and_import_recreates_a_session_that_continues(host, provider):
    secret = "sk-" + "A1b2" * 8
    home_path = f"{host.home}/private/plan.txt"
    picture = "data:image/png;base64," + base64.b64encode(b"\x89PNG not really").decode()
    parent = await host.session(title="Exported")
    await turn(host, provider, parent, f"my key is {secret}, see {home_path}")
    # one more turn with an attachment carried as bytes
    provider.enqueue(fake.completion(fake.text_deltas("nice picture")))
    await host.client.session.prompt(parent, prompt={"text": "look", "files": [{"uri": picture, "name": "p.png"}]})
    with anyio.fail_after(WAIT):
        await host.client.session.wait(parent)
    child = (await host.client.session.create(parent_id=parent, title="Child")).id

    plain = await host.client.experimental.session_export(parent)
    listed = (await host.client.session.messages(parent, order="asc", limit=200)).items
    assert plain.info.id == parent and [m.id for m in plain.messages] == [m.id for m in listed]
    assert secret in json.dumps(plain.wire())
    clean = json.dumps((await host.client.experimental.session_export(parent, sanitize=True)).wire())
    assert secret not in clean and "[redacted]" in clean
    assert str(host.home) not in clean and "~/private/plan.txt" in clean
    assert "base64," + picture.split(",")[1] not in clean and '"data:image/png,"' in clean
    child_export = await host.client.experimental.session_export(child)

    with pytest.raises(ConflictError):  # it is still here
        await host.client.experimental.session_import(info=plain.info, messages=plain.messages)
    await host.client.session.remove(parent)
    with pytest.raises(SessionNotFoundError):  # parents before children
        await host.client.experimental.session_import(info=child_export.info, messages=child_export.messages)

    elsewhere = host.project.parent / "elsewhere"
    elsewhere.mkdir()
    imported = await host.client.experimental.session_import(info=plain.info, messages=plain.messages,
                                                             location={"directory": str(elsewhere)})
    assert imported.id == parent and imported.location.directory == str(elsewhere.resolve())
    assert imported.title == "Exported"
    again = (await host.client.session.messages(parent, order="asc", limit=200)).items
    assert [m.wire() for m in again] == [m.wire() for m in listed]
    assert parent in {s.id for s in (await host.client.session.list(limit=200)).items}
    assert (await host.client.experimental.session_import(info=child_export.info,
                                                          messages=child_export.messages)).parentID == parent

    if isinstance(host.client, OpenCode):  # replay rebuilds it from the log alone
        await host.client.runtime.store.rebuild_projections()
        rebuilt = (await host.client.session.messages(parent, order="asc", limit=200)).items
        assert [m.wire() for m in rebuilt] == [m.wire() for m in listed]

    provider.requests.clear()
    await turn(host, provider, parent, "what did I say first?")
    assert any(f"my key is {secret}" in t for t in _last_user_texts(provider.requests[-1]))  # the imported history


async def test_import_refuses_malformed_bodies_naming_the_field_and_imports_nothing_half(host):
    sid = await host.session(title="Source")
    exported = (await host.client.experimental.session_export(sid)).wire()
    await host.client.session.remove(sid)
    async with raw(host) as http:
        broken = {**exported, "messages": [{"type": "user", "id": "msg_x"}]}
        answer = await http.post("/api/experimental/session/import", json=broken)
        assert answer.status_code == 400 and answer.json()["_tag"] == "InvalidRequestError"
        assert "messages" in json.dumps(answer.json())
        answer = await http.post("/api/experimental/session/import", json={"messages": []})
        assert answer.status_code == 400 and "info" in json.dumps(answer.json())
    # a message whose ID another session holds: a conflict, and the session is not half there
    other = await host.session()
    await host.client.session.prompt(other, prompt={"text": "taken"}, resume=False)
    await host.client.session.inbox_update(other, (await host.client.session.inbox_list(other))[0].id,
                                           delivery="queue")
    taken = await host.client.experimental.session_export(other)
    assert taken.messages == []  # still pending: not in its transcript
    user = {"id": "msg_sharedid0000000000000000", "type": "user", "text": "hi", "time": {"created": 1}}
    first = {**exported, "info": {**exported["info"], "id": "ses_importedfirst00000000000"}, "messages": [user]}
    second = {**exported, "info": {**exported["info"], "id": "ses_importedsecond0000000000"}, "messages": [user]}
    await host.client.experimental.session_import(**first)
    with pytest.raises(ConflictError):
        await host.client.experimental.session_import(**second)
    with pytest.raises(SessionNotFoundError):
        await host.client.session.get("ses_importedsecond0000000000")
    assert host.rows("SELECT id FROM event WHERE aggregate_id = ?", "ses_importedsecond0000000000") == []
    with pytest.raises(InvalidRequestError):  # the same message twice
        await host.client.experimental.session_import(**{**second, "messages": [user, user]})


# --- search ---------------------------------------------------------------------------------------------


async def _searched(host: Host, text: str, **query: Any) -> list[str]:
    """The IDs of every session the search finds, page after page through the list's cursors."""
    page = await host.client.session.list(search=text, **query)
    found = [s.id for s in page.items]
    while page.next is not None and page.items:
        page = await host.client.session.list(cursor=page.next)
        found += [s.id for s in page.items]
    return found


async def test_search_ranks_titles_and_message_text_pages_and_forgets_removed_sessions(host, provider):
    word = "budget" + secrets.token_hex(4)  # this run's own word: the module's servers keep other tests' sessions
    titled = await host.session(title=f"Quarterly {word} review")
    talked = await host.session(title="Spreadsheet chat")
    await turn(host, provider, talked, f"please check the {word} spreadsheet")
    answered = await host.session(title="Weather chat")
    await turn(host, provider, answered, "how is the weather",
               fake.completion(fake.text_deltas(f"sunny, and the {word} ", "looks fine")))
    await host.session(title="Unrelated")

    # a title match ranks above matches in message text (the user's prompt, the model's answer)
    found = await _searched(host, word)
    assert found[0] == titled and set(found) == {titled, talked, answered}
    assert await _searched(host, word[:-2]) == found  # the last word matches as a prefix
    assert await _searched(host, f"{word} spreadsheet") == [talked]  # every word must match
    assert await _searched(host, f"{word} nowhere") == []

    # paged by the list's cursors: each session once, in rank order, and back again
    more = [await host.session(title=f"{word} page {n}") for n in range(5)]
    everything = await _searched(host, word, limit=2)
    assert len(everything) == len(set(everything)) == 8 and set(more) < set(everything)
    assert everything.index(talked) > max(everything.index(s) for s in [titled, *more])
    first = await host.client.session.list(search=word, limit=3)
    second = await host.client.session.list(cursor=first.next)
    back = await host.client.session.list(cursor=second.previous)
    assert [s.id for s in back.items] == [s.id for s in first.items] == everything[:3]
    assert [s.id for s in second.items] == everything[3:6]

    # a renamed title is found by its new words only; a removed session is found no more
    renamed = "renamed" + secrets.token_hex(4)
    await host.client.session.update(titled, title=f"{renamed} plan")
    assert await _searched(host, renamed) == [titled]
    assert titled not in await _searched(host, f"quarterly {word}")
    await host.client.session.remove(talked)
    assert talked not in await _searched(host, word)
    assert host.rows("SELECT count(*) FROM session_search_doc WHERE session_id = ?", talked) == [(0,)]

    # other filters still apply to a search
    assert await _searched(host, word, directory=str(host.project)) == await _searched(host, word)
    assert await _searched(host, word, directory=str(host.project / "elsewhere")) == []


async def test_search_text_is_never_query_syntax(host):
    word = "quote" + secrets.token_hex(4)
    # operators of FTS5 and tsquery are words like any other
    sid = await host.session(title=f'He said "{word}" -- AND, OR, NOT 1 (NEAR) title: über* café 漢字')
    for text in (f'"{word}', f'{word}"', f'{word}*', f'-{word}', f'{word} AND', f'NOT {word}', f'{word} OR',
                 f'NEAR({word}', f'{word}:*', f"{word} & !", f"{word}' OR '1'='1", f"title:{word}", f"^{word}"):
        assert await _searched(host, text) == [sid], text
    assert await _searched(host, f"über {word}") == [sid]
    assert await _searched(host, f"CAFÉ {word}") == [sid]  # case does not matter
    async with raw(host) as http:
        for text in ('"', "*", "AND", "-", "(", ")", ":", "^", "NEAR", "'", "%_", "\\", "漢字", "🙂", "a" * 5000,
                     " ".join(["and"] * 100)):
            answer = await http.get("/api/session", params={"search": text})
            assert answer.status_code == 200, (text, answer.text)
        # a search with no words in it finds nothing (rather than everything)
        answer = await http.get("/api/session", params={"search": '"*-'})
        assert answer.status_code == 200 and answer.json()["data"] == []


async def test_removing_the_session_that_wrote_last_reaches_every_subscriber(host, provider):
    # its events are the newest in the log: the tombstone must still be numbered after everything a subscriber has
    # seen (on SQLite a purged newest row's position would otherwise be handed out again, below the reader's cursor)
    await host.session()
    sid = await host.session()
    await turn(host, provider, sid, "say hi", fake.completion(fake.text_deltas("hi")))
    seen: list[str] = []
    subscribed = anyio.Event()

    async def watch() -> None:
        async for event in host.client.event.subscribe():
            if event.type == "server.connected":
                subscribed.set()
            elif event.type == "session.deleted":
                seen.append(event.data["sessionID"] if isinstance(event.data, dict) else event.data.sessionID)
                return

    with anyio.move_on_after(WAIT):  # (a guard: the assertion below says what arrived)
        async with anyio.create_task_group() as tg:
            tg.start_soon(watch)
            await subscribed.wait()
            await host.client.session.remove(sid)
    assert seen == [sid]
