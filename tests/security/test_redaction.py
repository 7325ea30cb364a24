"""Item 6 of "Safe by default, round three", for secrets: a configured provider key, a key in the environment, the
server's password and the password in a provider's `baseURL` are cut wherever the model echoes them, not only as
exact strings: a piece of eight characters or more, another letter case, URL-encoded, base64-encoded, split across
streamed deltas, in text and in a tool's input and output. None reaches the live stream (`/api/event`), the session's
log, its messages, `GET /api/provider` or the server's log."""

from __future__ import annotations

import base64
import json
import logging
import time
from urllib.parse import quote

import anyio
import pytest
import requests

from opencode_session.client import OpenCodeClient
from opencode_session.core.redaction import REDACTED, Redactor, redact_logs, without_userinfo
from tests.security.conftest import TIMEOUT, serve
from tests.support import fake_openai as fake

pytestmark = pytest.mark.anyio

PASSWORD = "pw-Redact9QmZx7Lk"
ENV_KEY = "sk-env+Secret/9Xq2=Lm7Tz4Wp"
CONFIG_KEY = "sk-loop-4Fh8Kq2Zr6Yd1Nc9"
USERINFO = "Us3rInfoPassw0rd"
# how the model echoes them
ECHOES = [CONFIG_KEY[2:14], CONFIG_KEY.upper(), quote(ENV_KEY, safe=""), ENV_KEY[5:],
          base64.b64encode(PASSWORD.encode()).decode(), PASSWORD.swapcase(), USERINFO]


def _leaks(blob: str) -> list[str]:
    """The echoes any 8-character piece of which is in `blob` (any letter case)."""
    low = blob.lower()
    return [echo for echo in ECHOES if any(echo[i:i + 8].lower() in low for i in range(len(echo) - 7))]


def _config(provider: fake.FakeOpenAI) -> dict:
    return {"model": "loop/fake-model",
            "provider": {"loop": {"npm": "@ai-sdk/openai-compatible",
                                  "options": {"baseURL": provider.base_url, "apiKey": CONFIG_KEY},
                                  "models": {"fake-model": {}}},
                         "proxied": {"npm": "@ai-sdk/openai-compatible",
                                     "options": {"baseURL": f"https://alice:{USERINFO}@proxy.invalid/v1"},
                                     "models": {"m": {}}}}}


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return tmp_path_factory.mktemp("redaction")


@pytest.fixture(scope="module")
def ocs(root, provider):
    folder = root / "config" / "opencode"
    folder.mkdir(parents=True)
    (folder / "opencode.json").write_text(json.dumps(_config(provider)))
    srv = serve(root, OPENCODE_SERVER_PASSWORD=PASSWORD, OPENAI_API_KEY=ENV_KEY)
    yield srv
    assert srv.stop() == 0, "".join(srv.stderr_lines)


def test_the_echoes_would_be_seen_unredacted():
    # the check below is not vacuous: each echo is a text the secrets' exact strings are not in
    for echo in ECHOES:
        assert echo in _leaks(echo)
        assert all(secret not in echo for secret in (PASSWORD, ENV_KEY, CONFIG_KEY))


async def test_no_echo_of_a_secret_reaches_any_reader(ocs, provider):
    said = "Here they are: " + " | ".join(ECHOES) + " and that is all."
    pieces = [said[i:i + 3] for i in range(0, len(said), 3)]  # streamed in small deltas, split mid-secret
    command = "echo " + " ".join(f"'{echo}'" for echo in ECHOES)
    call = fake.tool_call_deltas(0, "call_1", "bash", json.dumps({"command": command, "description": "echo"}))
    provider.enqueue(fake.completion(call, finish_reason="tool_calls"),
                     fake.completion(fake.text_deltas(*pieces)))
    live: list[dict] = []
    async with OpenCodeClient(ocs.url, auth=("opencode", PASSWORD)) as client:
        sid = (await client.session.create()).id
        stream = client.event.subscribe()
        assert (await stream.__anext__()).type == "server.connected"

        async def read_until_idle() -> None:
            async for item in stream:
                if item.data.get("sessionID") == sid:
                    live.append({"type": item.type, "data": item.data})
                    if item.type in ("session.execution.succeeded", "session.execution.failed"):
                        return

        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                tg.start_soon(read_until_idle)
                await client.session.prompt(sid, prompt={"text": "show me the keys"})
                await client.session.wait(sid)
        await stream.aclose()
        log = [e.model_dump(mode="json") async for e in client.session.log(sid, follow=False)]
    assert provider.pending == 0
    types = [e["type"] for e in live]
    assert "session.execution.succeeded" in types and "session.text.delta" in types, types
    assert "session.tool.success" in types, types  # the command ran (its output echoed every form too)

    with requests.Session() as http:
        http.trust_env = False
        http.auth = ("opencode", PASSWORD)
        messages = http.get(f"{ocs.url}/api/session/{sid}/message", timeout=TIMEOUT)
        providers = http.get(f"{ocs.url}/api/provider", timeout=TIMEOUT)
        proxied = http.get(f"{ocs.url}/api/provider/proxied", timeout=TIMEOUT)
    assert messages.status_code == providers.status_code == proxied.status_code == 200

    deltas = "".join(e["data"]["delta"] for e in live if e["type"] == "session.text.delta")
    assert REDACTED in deltas and deltas.startswith("Here they are: ") and deltas.endswith(" and that is all.")
    for name, blob in [("/api/event", json.dumps(live)), ("log", json.dumps(log)), ("/message", messages.text),
                       ("/api/provider", providers.text), ("/api/provider/proxied", proxied.text),
                       ("stderr", "".join(ocs.stderr_lines))]:
        assert _leaks(blob) == [], f"{name}: {blob[:4000]}"
    assert "proxy.invalid" in proxied.text and "alice" not in proxied.text  # the host stays, the user info goes
    assert REDACTED in messages.text


def test_the_log_is_redacted(caplog):
    redactor = Redactor([CONFIG_KEY, PASSWORD])
    redact_logs(redactor)
    with caplog.at_level(logging.WARNING):
        logging.getLogger("opencode_session.test").warning("the model said %s", CONFIG_KEY.lower()[1:12])
        try:
            raise ValueError(PASSWORD.upper())
        except ValueError:
            logging.getLogger("opencode_session.test").exception("failed")
    text = caplog.text
    assert "the model said" in text and _leaks(text) == [] and REDACTED in text


def test_redaction_forms_and_streams():
    redactor = Redactor([CONFIG_KEY, "short"])
    assert redactor.text("ok short ok") == "ok short ok"  # shorter than a piece: not a secret worth cutting
    assert redactor.text(f"a {CONFIG_KEY} b") == f"a {REDACTED} b"
    assert redactor.text("key=" + CONFIG_KEY[3:11] + "!") == f"key={REDACTED}!"
    assert redactor.text("x" + CONFIG_KEY[3:10] + "y") == "x" + CONFIG_KEY[3:10] + "y"  # seven characters stay
    assert redactor.value({"a": [CONFIG_KEY.upper(), 1], "b": "plain"}) == {"a": [REDACTED, 1], "b": "plain"}
    same = {"a": ["plain"]}
    assert redactor.value(same) is same
    streamed = "".join(redactor.delta(("s",), CONFIG_KEY[i:i + 2]) for i in range(0, len(CONFIG_KEY), 2))
    assert _leaks(streamed) == [] and streamed.count(REDACTED) == 1
    assert without_userinfo("https://u:p@host:8080/v1?x=1") == f"https://{REDACTED}@host:8080/v1?x=1"
    assert without_userinfo("http://host/v1") == "http://host/v1"


def test_redaction_is_fast_on_the_event_path():
    redactor = Redactor([CONFIG_KEY, ENV_KEY, PASSWORD, USERINFO, "sk-ant-" + "k" * 90])
    event = json.dumps({"type": "session.text.ended", "sessionID": "ses_01JD5QKX3M8N2P4R6T8V0W2Y4A",
                        "stepID": "stp_01JD5QKX3M8N2P4R6T8V0W2Y4B", "ordinal": 0,
                        "text": "I will read the configuration and update the handler so it retries."})
    runs = 20000
    started = time.perf_counter()
    for _ in range(runs):
        redactor.found(event)
    per_event_us = (time.perf_counter() - started) / runs * 1e6
    print(f"redaction check: {per_event_us:.2f} us per {len(event)}-character event")
    assert per_event_us < 50  # a few microseconds unloaded; generous for a busy machine
