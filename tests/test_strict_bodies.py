"""Request bodies are checked, not coerced, against a real `ocs serve` whose model answers on loopback.

Every JSON body field keeps its declared JSON type, and NaN, Infinity and lone UTF-16 surrogates are refused at the
door with 400 InvalidRequestError naming the field. The property test sends generated bodies (right shapes with
adversarial values, and arbitrary JSON) to every body route and checks that whatever the server accepts can be read
back, listed, streamed and run.
"""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Iterator
from typing import Any

import pytest
import requests
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from opencode_session.protocol.api import ENDPOINTS
from opencode_session.sdk import OpenCode
from tests.support import fake_openai as fake
from tests.support.config import write_global_config
from tests.support.server import ServerProcess, isolated_env, start_server

TIMEOUT = 20  # seconds per request: a guard against hangs
MODEL = {"id": "fake-model", "providerID": "loop"}
SURROGATE = "\ud800"


@pytest.fixture(scope="module")
def provider() -> Iterator[fake.FakeOpenAI]:
    server = fake.FakeOpenAI()
    server.fallback = fake.completion(fake.text_deltas("done"))
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def server(tmp_path_factory, provider) -> Iterator[ServerProcess]:
    root = tmp_path_factory.mktemp("strict")
    env = isolated_env(root)
    write_global_config(env["XDG_CONFIG_HOME"], {
        "model": "loop/fake-model",
        "provider": {"loop": {"npm": "@ai-sdk/openai-compatible",
                              "options": {"baseURL": provider.base_url, "apiKey": "k"},
                              "models": {"fake-model": {}}}},
    })
    (root / "work").mkdir()
    (root / "work" / "notes.txt").write_text("alpha\n")
    proc = start_server(root, env=env, workdir=root / "work")
    yield proc
    assert proc.stop() == 0, "".join(proc.stderr_lines)


@pytest.fixture(scope="module")
def http() -> Iterator[requests.Session]:
    with requests.Session() as session:
        session.trust_env = False  # loopback only
        yield session


def _strict_json(text: str | bytes) -> Any:
    def refuse(constant: str) -> Any:
        raise AssertionError(f"the server sent {constant}, which is not JSON")

    return json.loads(text, parse_constant=refuse)


def _ok(response: requests.Response) -> Any:
    """The JSON answer of a successful response (None for 204)."""
    assert response.status_code < 300, f"{response.request.method} {response.request.url}: {response.text[:300]}"
    return _strict_json(response.content) if response.content else None


def _log(http, base: str, sid: str) -> list[dict[str, Any]]:
    response = http.get(f"{base}/api/session/{sid}/log", params={"follow": "false"}, timeout=TIMEOUT)
    assert response.status_code == 200, response.text
    # the body is UTF-8 by definition (text/event-stream): never let a charset guess decode it
    lines = response.content.decode("utf-8").split("\n")
    items = [_strict_json(line[len("data: "):]) for line in lines if line.startswith("data: ")]
    assert items and items[-1]["type"] == "log.synced"
    return items[:-1]


def _new_session(http, base: str) -> str:
    return _ok(http.post(f"{base}/api/session", json={}, timeout=TIMEOUT))["data"]["id"]


def _send(http, base: str, method: str, path: str, body: Any) -> requests.Response:
    # json.dumps writes NaN/Infinity tokens and escapes lone surrogates (\ud800): what a careless client sends
    raw = json.dumps(body, allow_nan=True).encode()
    return http.request(method, base + path, data=raw, headers={"content-type": "application/json"},
                        timeout=TIMEOUT)


# --- the cases the issue names ------------------------------------------------------------------------

PINNED = [
    pytest.param("prompt", {"prompt": {"text": "hi"}, "resume": "no"}, "resume", id="resume-string"),
    pytest.param("prompt", {"prompt": {"text": "hi"}, "resume": 1}, "resume", id="resume-number"),
    pytest.param("prompt", {"prompt": {"text": 5}}, "prompt.text", id="text-number"),
    pytest.param("prompt", {"prompt": {"text": "hi", "files": [{"uri": "file:///x", "source": {
        "start": "5", "end": 6, "text": "x"}}]}}, "prompt.files.0.source.start", id="source-start-string"),
    pytest.param("prompt", {"prompt": {"text": "a" + SURROGATE}}, "prompt.text", id="text-lone-surrogate"),
    pytest.param("entry", {"value": math.nan}, "value", id="entry-nan"),
    pytest.param("entry", {"value": [1, {"x": math.inf}]}, "value.1.x", id="entry-nested-infinity"),
    pytest.param("entry", {"value": {SURROGATE: 1}}, "value.\ufffd", id="entry-key-lone-surrogate"),  # named, replaced
    pytest.param("agent", {"agent": SURROGATE}, "agent", id="agent-lone-surrogate"),
    pytest.param("agent", {"agent": True}, "agent", id="agent-boolean"),
    pytest.param("model", {"model": {"id": 1, "providerID": "loop"}}, "model.id", id="model-id-number"),
    pytest.param("create", {"agent": ["build"]}, "agent", id="create-agent-list"),
    pytest.param("revert", {"messageID": 5}, "messageID", id="revert-message-number"),
    pytest.param("revert", {"messageID": "msg_x", "files": "no"}, "files", id="revert-files-string"),
    pytest.param("fork", {"messageID": True}, "messageID", id="fork-message-boolean"),
    pytest.param("move", {"location": {"directory": 5}}, "location.directory", id="move-directory-number"),
    pytest.param("move", {"location": {"directory": "/" + SURROGATE}}, "location.directory",
                 id="move-directory-lone-surrogate"),
]
ROUTES = {
    "create": ("POST", "/api/session"),
    "agent": ("POST", "/api/session/{sid}/agent"),
    "model": ("POST", "/api/session/{sid}/model"),
    "prompt": ("POST", "/api/session/{sid}/prompt"),
    "entry": ("PUT", "/api/session/{sid}/context-entry/alpha"),
    "revert": ("POST", "/api/session/{sid}/revert/stage"),
    "fork": ("POST", "/api/session/{sid}/fork"),
    "move": ("POST", "/api/session/{sid}/move"),
}
# Bodies that name a message of the session: the property's sessions get one first, named here by FIRST.
NAMES_A_MESSAGE = {"revert", "fork"}
FIRST = "msg_the_first_prompt"


# Asking and replying: no durable record to read back and nothing for a drain to run; tests/api/test_permissions.py
# sends them, and their refusals of bad bodies.
WAITING_ONLY = {("POST", "/api/session/{sessionID}/permission"),
                ("POST", "/api/session/{sessionID}/permission/{requestID}/reply"),
                ("POST", "/api/session/{sessionID}/question/{requestID}/reply")}


# Not a session's: their refusals of bad bodies are in tests/api/test_pty.py and tests/api/test_integrations.py.
NOT_A_SESSIONS = {("POST", "/api/pty"), ("PUT", "/api/pty/{ptyID}"),
                  ("POST", "/api/integration/{integrationID}/connect/key"),
                  ("POST", "/api/integration/{integrationID}/connect/oauth"),
                  ("POST", "/api/integration/attempt/{attemptID}/complete"),
                  ("PATCH", "/api/credential/{credentialID}"),
                  ("POST", "/api/experimental/trust")}  # its refusals: tests/security/test_trust.py


# Managing sessions (update, inbox delivery, import): their refusals of bad bodies, and what they write read back,
# are in tests/api/test_session_management.py.
MANAGEMENT = {("PATCH", "/api/session/{sessionID}"), ("PATCH", "/api/session/{sessionID}/inbox/{inboxID}"),
              ("POST", "/api/experimental/session/import")}


# The later session routes (synthetic, shell, environment, generate, view): their refusals of bad bodies are in
# tests/api/test_session_more_routes.py.
MORE_ROUTES = {("POST", "/api/session/{sessionID}/synthetic"), ("POST", "/api/session/{sessionID}/shell"),
               ("PUT", "/api/session/{sessionID}/environment"), ("POST", "/api/session/{sessionID}/generate"),
               ("POST", "/api/session/{sessionID}/view")}


def test_every_body_route_is_covered():
    with_body = {(e.method, e.path) for e in ENDPOINTS if e.body is not None}
    covered = {(m, p.replace("{sid}", "{sessionID}").replace("/alpha", "/{key}")) for m, p in ROUTES.values()}
    assert covered | WAITING_ONLY | NOT_A_SESSIONS | MANAGEMENT | MORE_ROUTES == with_body


@pytest.mark.parametrize(("route", "body", "field"), PINNED)
def test_wrong_types_and_non_json_values_are_refused_naming_the_field(server, http, route, body, field):
    sid = _new_session(http, server.url)
    method, path = ROUTES[route]
    response = _send(http, server.url, method, path.format(sid=sid), body)
    assert response.status_code == 400, response.text
    error = response.json()
    assert error["_tag"] == "InvalidRequestError" and error["field"] == field and field.split(".")[0] in error[
        "message"]
    # nothing was recorded, and the session still runs
    assert _log(http, server.url, sid) == []
    _run_and_check(http, server.url, sid)


# --- the property -------------------------------------------------------------------------------------

# Named functions, not lambdas, expand the strategies: to describe a lambda (in a strategy's repr, which it makes
# while validating a deep recursive one) hypothesis parses its source, and CPython 3.11.7's parser can then fail with
# "SystemError: AST constructor recursion depth mismatch" at that depth (seen in a full run).


def _text_of(n: int) -> st.SearchStrategy:
    return st.text(max_size=12) if n > 1 else st.one_of(
        st.text(st.characters(exclude_categories=[]), max_size=4),
        st.sampled_from([SURROGATE, "x\udfff", "\udc00\ud800", "ok \U0001f600"]))


def _nested(inner: st.SearchStrategy) -> st.SearchStrategy:
    return st.lists(inner, max_size=3) | st.dictionaries(_texts, inner, max_size=3)


_texts = st.integers(0, 5).flatmap(_text_of)
_scalars = st.one_of(st.none(), st.booleans(), st.integers(-(10 ** 20), 10 ** 20),
                     st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([math.nan, math.inf, -math.inf]),
                     _texts)
_json = st.recursive(_scalars, _nested, max_leaves=8)


def _maybe(strategy: st.SearchStrategy) -> st.SearchStrategy:
    """Mostly the right shape, sometimes any JSON at all."""
    def shaped(n: int) -> st.SearchStrategy:
        return _json if n == 0 else strategy

    return st.integers(0, 7).flatmap(shaped)


_models = _maybe(st.one_of(st.just(MODEL), st.fixed_dictionaries({"id": _texts, "providerID": _texts})))
_agents = _maybe(st.one_of(st.sampled_from(["build", "plan"]), _texts))
_files = st.lists(_maybe(st.fixed_dictionaries(
    {"uri": _maybe(st.sampled_from(["notes.txt", "data:text/plain;base64,aGk=", "https://example.invalid/a"]))},
    optional={"name": _texts, "description": _texts,
              "source": _maybe(st.fixed_dictionaries({"start": _scalars, "end": _scalars, "text": _texts}))})),
    max_size=2)
_prompt = _maybe(st.fixed_dictionaries({"text": _maybe(_texts)}, optional={
    "files": _maybe(_files), "agents": _maybe(st.lists(_maybe(st.fixed_dictionaries({"name": _agents})), max_size=2))}))
BODIES = {
    "create": _maybe(st.fixed_dictionaries({}, optional={"agent": _agents, "model": _models})),
    "agent": _maybe(st.fixed_dictionaries({"agent": _agents})),
    "model": _maybe(st.fixed_dictionaries({"model": _models})),
    "prompt": _maybe(st.fixed_dictionaries({"prompt": _prompt}, optional={
        "delivery": _maybe(st.sampled_from(["steer", "queue"])), "resume": _maybe(st.booleans()),
        "id": _maybe(st.just("msg_fixed_property_input"))})),
    "entry": _maybe(st.fixed_dictionaries({"value": _json})),
    "revert": _maybe(st.fixed_dictionaries({"messageID": _maybe(st.sampled_from([FIRST, "msg_elsewhere"]))},
                                           optional={"files": _maybe(st.booleans())})),
    "fork": _maybe(st.fixed_dictionaries({}, optional={"messageID": _maybe(st.sampled_from([FIRST,
                                                                                          "msg_elsewhere"]))})),
    "move": _maybe(st.fixed_dictionaries({"location": _maybe(st.fixed_dictionaries(
        {"directory": _maybe(st.sampled_from([".", "nowhere", "/nonexistent/dir"]))},
        optional={"workspaceID": _maybe(st.sampled_from(["wrk_1", "x"]))}))})),
}


def _named(body: Any, first: str) -> Any:
    """`body` with FIRST replaced by the ID of the session's first message."""
    if body == FIRST:
        return first
    if isinstance(body, list):
        return [_named(item, first) for item in body]
    if isinstance(body, dict):
        return {key: _named(value, first) for key, value in body.items()}
    return body


def _run_and_check(http, base: str, sid: str) -> None:
    """The session reads back, lists, streams, and runs a prompt to a typed ending."""
    _ok(http.get(f"{base}/api/session/{sid}", timeout=TIMEOUT))
    listed = _ok(http.get(f"{base}/api/session", params={"limit": "5"}, timeout=TIMEOUT))["data"]
    assert sid in [s["id"] for s in listed]
    for tail in ("message?limit=200", "context", "context-entry"):
        _ok(http.get(f"{base}/api/session/{sid}/{tail}", timeout=TIMEOUT))
    before = len(_log(http, base, sid))
    _ok(http.post(f"{base}/api/session/{sid}/prompt", json={"prompt": {"text": "go"}}, timeout=TIMEOUT))
    _ok(http.post(f"{base}/api/session/{sid}/wait", timeout=TIMEOUT))
    ran = _log(http, base, sid)[before:]
    endings = [e for e in ran if e["type"] in ("session.execution.succeeded", "session.execution.failed")]
    assert endings, [e["type"] for e in ran]
    # a failure may be the session's own (an unknown agent, an unreadable attachment) but never an untyped crash
    assert all(e["data"].get("error", {}).get("type") != "unknown" for e in endings), endings
    for tail in ("message?limit=200", "context"):
        _ok(http.get(f"{base}/api/session/{sid}/{tail}", timeout=TIMEOUT))


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("route", sorted(ROUTES))
def test_whatever_is_accepted_can_be_read_back_listed_streamed_and_run(server, http, route):
    method, path = ROUTES[route]
    accepted = 0

    @settings(max_examples=40, deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(body=BODIES[route])
    def check(body: Any) -> None:
        nonlocal accepted
        sid = _new_session(http, server.url)
        if route in NAMES_A_MESSAGE:
            first = _ok(http.post(f"{server.url}/api/session/{sid}/prompt", json={"prompt": {"text": "first"}},
                                  timeout=TIMEOUT))["data"]["id"]
            _ok(http.post(f"{server.url}/api/session/{sid}/wait", timeout=TIMEOUT))
            body = _named(body, first)
        response = _send(http, server.url, method, path.format(sid=sid), body)
        assert response.status_code in (200, 204, 400, 404, 409), response.text
        answer = _strict_json(response.content) if response.content else None
        if response.status_code == 404:  # a message the body names that is not the session's
            assert route in NAMES_A_MESSAGE and answer["_tag"] == "MessageNotFoundError", answer
            return
        if response.status_code >= 400:
            assert answer["_tag"] in ("InvalidRequestError", "ConflictError") and answer["message"], answer
            return
        accepted += 1
        if route in ("create", "fork"):
            sid = answer["data"]["id"]
        _run_and_check(http, server.url, sid)

    check()
    assert accepted > 0, "no generated body was accepted: the strategies only test refusals"


@pytest.mark.anyio
async def test_values_stored_before_the_door_never_poison_reads(tmp_path):
    db = tmp_path / "db.sqlite"
    (tmp_path / "opencode.json").write_text(json.dumps({"agent": {"AGENT": {}}}))  # a switch needs a known agent
    async with OpenCode(db=db, directory=tmp_path) as host:
        sid = (await host.session.create()).id
        await host.session.switch_agent(sid, agent="AGENT")
        await host.session.context_entry_put(sid, "alpha", value={"n": 1})
    # what an earlier version could store: escaped lone surrogates and NaN, written behind the door's back
    conn = sqlite3.connect(db)
    with conn:
        for table in ("event", "session", "session_message"):
            conn.execute(f"UPDATE {table} SET data = replace(data, 'AGENT', '\\ud800')")
        conn.execute("UPDATE instruction_entry SET value = '{\"n\": NaN}'")
    conn.close()
    async with OpenCode(db=db, directory=tmp_path) as host:  # this version opens what the earlier one left
        assert (await host.session.get(sid)).agent == "\ufffd"
        assert sid in [s.id for s in (await host.session.list()).items]
        assert [m.agent for m in (await host.session.messages(sid)).items] == ["\ufffd"]
        log = [e async for e in host.session.log(sid, follow=False) if e.type != "log.synced"]
        assert [e.data.agent for e in log] == ["\ufffd"]
        assert [(e.key, e.value) for e in await host.session.context_entry_list(sid)] == [("alpha", {"n": None})]
