"""Item 4 of "Safe by default", for requests: bodies are bounded while they stream in (10 MiB by default,
configurable, 413), and forged cursors, sequences beyond 2^63 and absurdly deep JSON are 400s, never a 500 or a
silently empty stream."""

from __future__ import annotations

import base64
import json

import pytest
import requests

from tests.security.conftest import TIMEOUT, peak_rss_mb, serve

MIB = 1024 * 1024


@pytest.fixture(scope="module")
def ocs(tmp_path_factory):
    # Buffering a 500 MB body (as the server once did, peaking at 1.9 GB) fails against this limit.
    srv = serve(tmp_path_factory.mktemp("request-limits"), memory_mb=1024)
    yield srv
    assert srv.stop() == 0, "".join(srv.stderr_lines)


@pytest.fixture(scope="module")
def session_id(ocs):
    with requests.Session() as http:
        http.trust_env = False
        return http.post(ocs.url + "/api/session", json={}, timeout=TIMEOUT).json()["data"]["id"]


def _assert_tagged(response, status: int, tag: str = "InvalidRequestError") -> None:
    assert response.status_code == status, response.text[:500]
    assert response.json()["_tag"] == tag


def test_an_oversized_prompt_or_entry_is_refused_and_not_stored(ocs, http, session_id):
    text = "a" * (10 * MIB + 1)
    response = http.post(f"{ocs.url}/api/session/{session_id}/prompt", json={"prompt": {"text": text}},
                         timeout=TIMEOUT)
    _assert_tagged(response, 413)
    response = http.put(f"{ocs.url}/api/session/{session_id}/context-entry/big", json={"value": text},
                        timeout=TIMEOUT)
    _assert_tagged(response, 413)
    assert http.get(f"{ocs.url}/api/session/{session_id}/context-entry", timeout=TIMEOUT).json()["data"] == []
    assert http.get(f"{ocs.url}/api/session/{session_id}/message", timeout=TIMEOUT).json()["data"] == []
    # Just under the bound is fine.
    response = http.put(f"{ocs.url}/api/session/{session_id}/context-entry/fits", json={"value": "a" * MIB},
                        timeout=TIMEOUT)
    assert response.status_code == 204, response.text


@pytest.mark.timeout(180)
def test_a_huge_streamed_body_is_cut_off_at_the_limit(ocs, http):
    def body():
        yield b'{"id": "ses_streamed", "x": "'
        block = b"a" * MIB
        for _ in range(500):
            yield block
        yield b'"}'

    response = http.post(ocs.url + "/api/session", data=body(), headers={"Content-Type": "application/json"},
                         timeout=120)
    _assert_tagged(response, 413)
    assert peak_rss_mb(ocs.proc.pid) < 250, peak_rss_mb(ocs.proc.pid)
    assert http.get(ocs.url + "/api/health", timeout=TIMEOUT).status_code == 200


def test_the_body_limit_is_configurable(tmp_path, http):
    srv = serve(tmp_path, "--max-body-bytes", "2048")
    try:
        _assert_tagged(http.post(srv.url + "/api/session", json={"id": "ses_" + "a" * 3000}, timeout=TIMEOUT), 413)
        assert http.post(srv.url + "/api/session", json={}, timeout=TIMEOUT).status_code == 200
    finally:
        assert srv.stop() == 0, "".join(srv.stderr_lines)


def _cursor(payload: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(payload).encode()).decode().rstrip("=")


@pytest.mark.parametrize("payload", [
    {"kind": "sessions", "q": {"limit": 1, "order": "desc", "directory": "\x00"}, "a": [1, 1], "d": "next"},
    {"kind": "sessions", "q": {"limit": 1, "order": "desc", "directory": "~no-such-user-ocs/x"}, "a": [1, 1],
     "d": "next"},
    {"kind": "sessions", "q": {"limit": 1, "order": "desc", "directory": "a" * 5000}, "a": [1, 1], "d": "next"},
    {"kind": "sessions", "q": {"limit": 1, "order": "desc"}, "a": [10**30, 1], "d": "next"},
    {"kind": "sessions", "q": {"limit": 1, "order": "desc"}, "a": [1, -(10**30)], "d": "previous"},
    {"kind": "sessions", "q": {"limit": 10**30, "order": "desc"}, "a": [1, 1], "d": "next"},
], ids=["nul-directory", "unknown-user-directory", "name-too-long", "huge-anchor", "huge-negative-anchor",
        "huge-limit"])
def test_forged_session_cursors_are_400(ocs, http, payload):
    response = http.get(ocs.url + "/api/session", params={"cursor": _cursor(payload)}, timeout=TIMEOUT)
    _assert_tagged(response, 400, "InvalidCursorError")


def test_forged_message_cursors_are_400(ocs, http, session_id):
    for anchor in (10**30, -(10**30)):
        payload = {"kind": "messages", "s": session_id, "o": "asc", "l": 10, "a": anchor, "d": "next"}
        response = http.get(f"{ocs.url}/api/session/{session_id}/message", params={"cursor": _cursor(payload)},
                            timeout=TIMEOUT)
        _assert_tagged(response, 400, "InvalidCursorError")


@pytest.mark.parametrize("after", [str(2**63), "99999999999999999999", "9" * 400])
@pytest.mark.parametrize("route", ["log", "event"])
def test_a_sequence_beyond_int64_is_400_not_an_empty_stream(ocs, http, session_id, after, route):
    response = http.get(f"{ocs.url}/api/session/{session_id}/{route}", params={"after": after}, timeout=TIMEOUT)
    _assert_tagged(response, 400)


def test_the_largest_sequence_still_streams(ocs, http, session_id):
    response = http.get(f"{ocs.url}/api/session/{session_id}/log", params={"after": str(2**63 - 1)}, timeout=TIMEOUT)
    assert response.status_code == 200 and "log.synced" in response.text


@pytest.mark.parametrize("depth", [100_000, 5_000, 900, 300])
def test_deeply_nested_json_is_400(ocs, http, session_id, depth):
    nested = "[" * depth + "]" * depth
    for method, path, body in (("POST", "/api/session", nested),
                               ("PUT", f"/api/session/{session_id}/context-entry/deep", '{"value": ' + nested + "}")):
        response = http.request(method, ocs.url + path, data=body, headers={"Content-Type": "application/json"},
                                timeout=TIMEOUT)
        _assert_tagged(response, 400)


def test_nested_values_that_are_accepted_can_be_read_back(ocs, http, session_id):
    # 300 levels once went in and then made every listing of the entries a plain-text 500.
    nested = "[" * 100 + "]" * 100
    response = http.put(f"{ocs.url}/api/session/{session_id}/context-entry/nested", data='{"value": ' + nested + "}",
                        headers={"Content-Type": "application/json"}, timeout=TIMEOUT)
    assert response.status_code == 204, response.text
    listed = http.get(f"{ocs.url}/api/session/{session_id}/context-entry", timeout=TIMEOUT)
    assert listed.status_code == 200 and "nested" in {e["key"] for e in listed.json()["data"]}
