"""Provider connections, over `ocs serve` and the Embedded host: the providers listed with how they connect, a key
connected through the API used by the next Steps (no opencode.json edit) and no longer once removed, an OAuth attempt
driven against a loopback authorization server, and the secret never in an answer, an event or the server's log."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from opencode_session.client import InvalidRequestError, OpenCodeClient
from opencode_session.sdk import OpenCode
from tests.api.conftest import raw_http
from tests.support import fake_openai as fake
from tests.support.fake_oauth import ACCESS_TOKEN, FakeAuthorizationServer
from tests.support.server import isolated_env, start_configured

pytestmark = pytest.mark.anyio
KEY = "sk-connected-4f1c9e"
MODEL = {"providerID": "loop", "id": fake.DEFAULT_MODEL}


@pytest.fixture(scope="module")
def loop():
    with fake.FakeOpenAI.running() as provider, FakeAuthorizationServer.running() as auth:
        yield provider, auth


def _config(provider: fake.FakeOpenAI, auth: FakeAuthorizationServer) -> dict:
    return {"model": f"loop/{fake.DEFAULT_MODEL}", "provider": {"loop": {
        "npm": "@ai-sdk/openai-compatible", "name": "Loop", "options": {"baseURL": provider.base_url},
        "models": {fake.DEFAULT_MODEL: {}}, "oauth": auth.oauth_config()}}}


@pytest.fixture(params=["server", "embedded"])
async def connected(request, tmp_path, loop):
    """(client, the database's directory, the server's stderr lines or None) for a fresh instance."""
    provider, auth = loop
    provider.requests.clear()
    provider.refused.clear()
    provider.keys = {KEY, ACCESS_TOKEN}
    provider.fallback = fake.completion(fake.text_deltas("ok"))
    if request.param == "server":
        srv, _work = start_configured(tmp_path, _config(provider, auth), OCS_RETRY_BASE_DELAY_MS="1")
        try:
            async with OpenCodeClient(srv.url) as client:
                yield client, srv.db.parent, srv.stderr_lines
        finally:
            assert srv.stop() == 0, "".join(srv.stderr_lines)
    else:
        env = isolated_env(tmp_path, OCS_RETRY_BASE_DELAY_MS="1")
        config = Path(env["XDG_CONFIG_HOME"]) / "opencode" / "opencode.json"
        config.parent.mkdir(parents=True)
        config.write_text(json.dumps(_config(provider, auth)))
        (tmp_path / "work").mkdir()
        async with OpenCode(db=tmp_path / "db.sqlite", directory=tmp_path / "work", env=env) as host:
            yield host, tmp_path, None
    provider.keys = None
    provider.fallback = None


async def _turn(client) -> str:
    """Run one prompt to its end; how its execution ended (its session.execution.* event). No event holds a key."""
    session = await client.session.create(model=MODEL)
    await client.session.prompt(session.id, prompt={"text": "hello"})
    await client.session.wait(session.id)
    events = [e async for e in client.session.log(session.id)]
    assert KEY not in json.dumps([e.model_dump(mode="json") for e in events])
    return [e.type for e in events if e.type.startswith("session.execution.")][-1]


def _credential_connections(info) -> list:
    return [c for c in info.connections if c.type == "credential"]


async def test_providers_are_listed_with_their_methods_and_connections(connected):
    client, _, _ = connected
    listed = {i.id: i for i in (await client.integration.list()).data}
    assert {"loop", "openai", "anthropic"} <= set(listed)
    loop = listed["loop"]
    assert loop.name == "Loop" and loop.connections == []
    methods = {m.type: m for m in loop.methods}
    assert set(methods) == {"oauth", "key", "env"} and methods["env"].names == ["LOOP_API_KEY"]
    assert {m.type for m in listed["openai"].methods} == {"key", "env"}  # no OAuth configured for it
    with pytest.raises(InvalidRequestError) as unknown:
        await client.integration.get("no-such-provider")
    assert unknown.value.field == "integrationID"
    with pytest.raises(InvalidRequestError):
        await client.integration.connect_key("no-such-provider", key="x")
    with pytest.raises(InvalidRequestError):
        await client.integration.connect_key("loop", key="")


async def test_a_connected_key_is_used_by_the_next_steps_until_it_is_removed(connected):
    client, data_dir, stderr = connected
    assert await _turn(client) == "session.execution.failed"  # no key yet: the provider refuses
    await client.integration.connect_key("loop", key=KEY)
    info = (await client.integration.get("loop")).data
    (credential,) = _credential_connections(info)
    assert credential.label == "Loop"
    assert await _turn(client) == "session.execution.succeeded"

    await client.credential.update(credential.id, label="work key")
    assert _credential_connections((await client.integration.get("loop")).data)[0].label == "work key"
    with pytest.raises(InvalidRequestError) as unknown:
        await client.credential.update("crd_unknown", label="x")
    assert unknown.value.field == "credentialID"

    stored = data_dir / "credentials.json"
    assert stat.S_IMODE(os.stat(stored).st_mode) == 0o600 and KEY in stored.read_text()
    answers = json.dumps([i.model_dump(mode="json") for i in (await client.integration.list()).data])
    answers += json.dumps((await client.provider.list()).model_dump(mode="json"))
    assert KEY not in answers

    await client.credential.remove(credential.id)
    await client.credential.remove(credential.id)  # removing it again is a no-op
    assert _credential_connections((await client.integration.get("loop")).data) == []
    assert await _turn(client) == "session.execution.failed"
    if stderr is not None:
        assert KEY not in "".join(stderr)


async def test_oauth_attempts_run_against_the_authorization_server(connected, loop):
    client, _, _ = connected
    _, auth = loop
    oauth = next(m for m in (await client.integration.get("loop")).data.methods if m.type == "oauth")
    assert oauth.label == "Sign in to Loop"

    failing = (await client.integration.connect_oauth("loop", method_id=oauth.id, inputs={})).data
    assert failing.mode == "code" and failing.url.startswith(auth.base_url + "/authorize?")
    assert failing.time.expires - failing.time.created == 10 * 60 * 1000
    auth.open(failing.url)
    assert (await client.integration.attempt_status(failing.attemptID)).data.status == "pending"
    with pytest.raises(InvalidRequestError) as refused:
        await client.integration.attempt_complete(failing.attemptID, code="wrong-code")
    assert refused.value.field == "code"
    failed = (await client.integration.attempt_status(failing.attemptID)).data
    assert failed.status == "failed" and "invalid_grant" in failed.message
    with pytest.raises(InvalidRequestError):  # it is settled: no second try
        await client.integration.attempt_complete(failing.attemptID, code=auth.code)

    attempt = (await client.integration.connect_oauth("loop", method_id=oauth.id, inputs={}, label="oauth")).data
    auth.open(attempt.url)
    with pytest.raises(InvalidRequestError):
        await client.integration.attempt_complete(attempt.attemptID)  # no code
    # a code that came back with another attempt's `state` is never exchanged (issue 39), and the attempt goes on
    exchanged = len(auth.exchanges)
    for forged in (f"{auth.code}#forged-state", f"http://localhost/callback?code={auth.code}&state=forged-state"):
        with pytest.raises(InvalidRequestError) as mismatch:
            await client.integration.attempt_complete(attempt.attemptID, code=forged)
        assert mismatch.value.field == "code" and "state" in mismatch.value.message
    assert len(auth.exchanges) == exchanged
    assert (await client.integration.attempt_status(attempt.attemptID)).data.status == "pending"
    state = parse_qs(urlsplit(attempt.url).query)["state"][0]
    await client.integration.attempt_complete(attempt.attemptID,
                                              code=f"http://localhost/callback?code={auth.code}&state={state}")
    assert (await client.integration.attempt_status(attempt.attemptID)).data.status == "complete"
    assert auth.exchanges[-1]["client_id"] == "ocs-test-client"
    assert [c.label for c in _credential_connections((await client.integration.get("loop")).data)] == ["oauth"]
    assert await _turn(client) == "session.execution.succeeded"  # the access token is the provider's key now


async def test_attempts_that_cannot_be_started_or_found(connected):
    client, _, _ = connected
    with pytest.raises(InvalidRequestError) as no_oauth:
        await client.integration.connect_oauth("openai", method_id="oauth", inputs={})
    assert no_oauth.value.field == "methodID"
    with pytest.raises(InvalidRequestError):
        await client.integration.connect_oauth("loop", method_id="other", inputs={})
    attempt = (await client.integration.connect_oauth("loop", method_id="oauth", inputs={})).data
    await client.integration.attempt_cancel(attempt.attemptID)
    await client.integration.attempt_cancel(attempt.attemptID)  # cancelling again is a no-op
    for call in (client.integration.attempt_status, client.integration.attempt_complete):
        with pytest.raises(InvalidRequestError) as unknown:
            await call(attempt.attemptID)
        assert unknown.value.field == "attemptID"


@pytest.mark.parametrize(("path", "body", "field"), [
    ("/api/integration/loop/connect/key", {"key": 5}, "key"),
    ("/api/integration/loop/connect/key", {"key": "k", "label": None}, None),  # optional means absent, not null
    ("/api/integration/loop/connect/key", {}, "key"),
    ("/api/integration/loop/connect/oauth", {"methodID": "oauth", "inputs": ["x"]}, "inputs"),
    ("/api/integration/loop/connect/oauth", {"methodID": "oauth"}, "inputs"),
    ("/api/integration/attempt/att_x/complete", {"code": 1}, "code"),
    ("/api/credential/crd_x", {}, "label"),
])
async def test_bad_bodies_are_refused_naming_the_field(connected, path, body, field):
    client, _, _ = connected
    method = "PATCH" if path.startswith("/api/credential") else "POST"
    async with raw_http(client) as http:
        response = await http.request(method, path, json=body)
    assert response.status_code == 400, response.text
    error = response.json()
    assert error["_tag"] == "InvalidRequestError" and error.get("field") == field, error
