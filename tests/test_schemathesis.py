"""Schemathesis against a real `ocs serve` on loopback, for every non-streaming V2 operation.

The schema under test is the OpenAPI document the server itself serves at `/doc`. One server process runs for the
whole module. Each operation gets its own tests, so a failure names one operation and each is bounded by the
per-test timeout:

- `test_fuzzed_cases[<op>-positive|negative]`: Hypothesis-generated cases, a fixed number per test, derandomized so
  every run sends the same requests. Positive cases draw their path parameters half of the time from resources
  created up front (two sessions with messages and instruction entries), so the 200/204 paths run too, not only
  the 404s; every positive test must see at least one 2xx.
- `test_coverage_cases[<op>]`: Schemathesis's deterministic coverage cases (boundary values, missing required
  parameters, wrong types), positive and negative.
- `test_guard_refusals_are_documented[<op>]`: a valid case sent with a foreign Origin or Host (403), and for
  operations with a body, as text/plain (415) and over the size limit (413): each refusal is a documented status
  with a body matching its documented schema.

Every response must: not be a 5xx; if it is a 4xx/5xx, be a JSON object with a string `_tag` and `message`; have a
documented status code and content type; and match the documented schema. A negative case must be rejected with a
4xx, except where the request the server reads is in fact valid (see `_server_reads_a_valid_request`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.core import NOT_SET
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_schema_conformance,
    status_code_conformance,
)

from opencode_session.protocol.openapi import render_openapi
from tests.support.server import ServerProcess, isolated_env, start_server

SSE = "text/event-stream"
MAX_EXAMPLES = 25
REQUEST_TIMEOUT = 10  # seconds; a hung request fails its case instead of eating the whole test's budget
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


def _operations(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {op["operationId"]: op for item in doc["paths"].values() for op in item.values()}


def _streams(op: dict[str, Any]) -> bool:
    return any(SSE in resp.get("content", {}) for status, resp in op["responses"].items() if status.startswith("2"))


# Collection needs the operation IDs before any server runs. The in-process render is the document the server
# serves; test_served_document_is_the_one_parametrized_here checks that they are the same.
_ALL = _operations(render_openapi())
STREAMING = sorted(op_id for op_id, op in _ALL.items() if _streams(op))
OPERATIONS = sorted(op_id for op_id in _ALL if op_id not in STREAMING)
FUZZED = [
    pytest.param(op_id, mode, id=f"{op_id}-{mode.value}")
    for op_id in OPERATIONS
    for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)
    # An operation without parameters or body (health, active) has no input to negate.
    if mode is GenerationMode.POSITIVE or _ALL[op_id]["parameters"] or "requestBody" in _ALL[op_id]
    # Any string names a saved permission (removing an unknown one is a 204), so there is no invalid input to send.
    if not (mode is GenerationMode.NEGATIVE and op_id == "v2.permission.saved.remove")
]


# --- fixtures -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[ServerProcess]:
    root = tmp_path_factory.mktemp("ocs-schemathesis")
    # Fuzzed locations can name real directories: never let a project opencode.json there configure a provider.
    proc = start_server(root, env=isolated_env(root, OPENCODE_DISABLE_PROJECT_CONFIG="1"))
    yield proc
    assert proc.stop() == 0, "".join(proc.stderr_lines)


@pytest.fixture(scope="module")
def http(server) -> Iterator[requests.Session]:
    with requests.Session() as session:
        session.trust_env = False  # loopback only: no proxy from the environment
        yield session


@pytest.fixture(scope="module")
def doc(server, http) -> dict[str, Any]:
    response = http.get(server.url + "/doc", timeout=REQUEST_TIMEOUT)
    assert response.status_code == 200, response.text
    return response.json()


@pytest.fixture(scope="module")
def schema(doc):
    # Loaded from the served document (fetched through the proxy-free session above), with the default
    # configuration rather than whatever schemathesis.toml the working directory might hold.
    return schemathesis.openapi.from_dict(doc, config=schemathesis.Config())


@pytest.fixture(scope="module")
def existing(server, http) -> dict[frozenset[str], list[dict[str, str]]]:
    """Path parameters of real resources, keyed by the set of parameter names they fill."""
    base = server.url + "/api/session"

    def ok(response: requests.Response) -> requests.Response:
        assert response.status_code < 300, response.text
        return response

    sessions, messages, entries = [], [], []
    for n in range(2):
        sid = ok(http.post(base, json={}, timeout=REQUEST_TIMEOUT)).json()["data"]["id"]
        sessions.append({"sessionID": sid})
        # No provider is configured, so the drain fails at once, but it first promotes the input to a user message.
        ok(http.post(f"{base}/{sid}/prompt", json={"prompt": {"text": f"hello {n}"}}, timeout=REQUEST_TIMEOUT))
        ok(http.post(f"{base}/{sid}/wait", timeout=REQUEST_TIMEOUT))
        listed = ok(http.get(f"{base}/{sid}/message", timeout=REQUEST_TIMEOUT)).json()["data"]
        assert listed, "the prompt produced no message"
        messages += [{"sessionID": sid, "messageID": m["id"]} for m in listed]
        for key in ("alpha", "notes.v1"):
            ok(http.put(f"{base}/{sid}/context-entry/{key}", json={"value": {"n": n}}, timeout=REQUEST_TIMEOUT))
            entries.append({"sessionID": sid, "key": key})
    return {
        frozenset({"sessionID"}): sessions,
        frozenset({"sessionID", "messageID"}): messages,
        frozenset({"sessionID", "key"}): entries,
        frozenset({"providerID"}): [{"providerID": "openai"}, {"providerID": "anthropic"}],  # the bundled ones
    }


# --- what every response must satisfy ---------------------------------------------------------------


def _assert_tagged_error(response) -> None:
    if response.status_code < 400:
        return
    try:
        body = response.json()
    except ValueError:
        raise AssertionError(f"{response.status_code} body is not JSON: {response.text[:200]!r}") from None
    assert isinstance(body, dict), f"{response.status_code} body is not an object: {body!r}"
    assert isinstance(body.get("_tag"), str) and body["_tag"], f"untagged {response.status_code} body: {body!r}"
    assert isinstance(body.get("message"), str), f"{response.status_code} body has no message: {body!r}"


def _contains_null(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, dict):
        return any(_contains_null(v) for v in value.values())
    if isinstance(value, list):
        return any(_contains_null(v) for v in value)
    return False


def _server_reads_a_valid_request(case, response) -> bool:
    """True when a negative case may be read by the server as a valid request, so a 2xx is not a failure.

    - A query item was never sent: Schemathesis negates a deepObject parameter by adding a property whose value is
      an empty list, and requests sends nothing for an empty list, so the request on the wire is valid.
    - The body holds a null: the document says an optional property is absent, never null, but the request models
      are pydantic `X | None = None` fields, which read an explicit null as absent. Lenient, not wrong; a null for
      a required property is still a 400, just not asserted here.
    - No body, or only whitespace (a "random bytes" syntax negation can be b"\\x0c"): the server reads a blank body
      as `{}` (app._decode), valid for session.create, whose fields are all optional, though the document marks
      the body itself required.
    """
    sent = {key for key, _ in parse_qsl(urlsplit(response.request.url).query, keep_blank_values=True)}
    if any(key not in sent for key in (case.query or {})):
        return True
    if case.body is NOT_SET:
        return bool(case.operation.body)  # an operation that takes a body was sent none
    if isinstance(case.body, (bytes, str)) and not case.body.strip():
        return True
    return _contains_null(case.body)


def _check(case, response, server: ServerProcess) -> None:
    assert response.status_code < 500, f"{response.status_code}: {response.text[:500]}"
    _assert_tagged_error(response)
    checks = list(CHECKS)
    negative = case.meta is not None and case.meta.generation.mode.is_negative
    if negative and not _server_reads_a_valid_request(case, response):
        checks.append(negative_data_rejection)
    case.validate_response(response, checks=checks, transport_kwargs={"base_url": server.url})


# --- tests ----------------------------------------------------------------------------------------------


def test_served_document_is_the_one_parametrized_here(doc):
    assert _operations(doc) == _ALL
    # Only the SSE operations are left out. `v2.session.wait` returns at once when the session is idle (and within
    # the request timeout when a fuzzed prompt started a drain, which fails fast without a provider), so it stays.
    assert STREAMING == ["v2.event.subscribe", "v2.session.events", "v2.session.log"]
    assert "v2.session.wait" in OPERATIONS


def _fuzzed(operation, mode: GenerationMode, existing) -> st.SearchStrategy:
    generated = operation.as_strategy(generation_mode=mode)
    names = frozenset(p.name for p in operation.path_parameters)
    if not names or mode is GenerationMode.NEGATIVE:
        # Request decoding rejects a negative case before any lookup, so a real ID would change nothing.
        return generated
    real = [operation.as_strategy(generation_mode=mode, path_parameters=values) for values in existing.get(names, [])]
    return st.one_of(generated, st.one_of(real)) if real else generated


# Operations whose success needs a value no generated case names: a model must be declared by the configuration, and
# every generated model is unknown to it (400 is the right answer; the API tests cover the 204).
# Pending permission requests and questions exist only while a tool call waits on one, which takes a provider this
# server does not have: every generated request ID is unknown (404); the API tests cover the successes.
NO_GENERATED_SUCCESS = {"v2.session.switchModel", "v2.session.permission.get", "v2.session.permission.reply",
                        "v2.session.question.reply", "v2.session.question.reject"}


@pytest.mark.parametrize(("operation_id", "mode"), FUZZED)
def test_fuzzed_cases(schema, server, http, existing, operation_id, mode):
    operation = schema.find_operation_by_id(operation_id)
    statuses: set[int] = set()

    # Same requests on every run: derandomize, no example database, no deadline (a loopback server, not a
    # benchmark). too_slow/filter_too_much: Schemathesis strategies are large and filter for valid encodings.
    @settings(max_examples=MAX_EXAMPLES, deadline=None, derandomize=True, database=None,
              phases=[Phase.explicit, Phase.generate, Phase.shrink],
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
    @given(case=_fuzzed(operation, mode, existing))
    def run(case) -> None:
        response = case.call(base_url=server.url, session=http, timeout=REQUEST_TIMEOUT)
        statuses.add(response.status_code)
        _check(case, response, server)

    run()
    if mode is GenerationMode.POSITIVE and operation_id not in NO_GENERATED_SUCCESS:
        assert any(200 <= s < 300 for s in statuses), (
            f"no success among {sorted(statuses)}: does `existing` create a resource for these path parameters?")


@pytest.mark.parametrize("operation_id", OPERATIONS)
def test_coverage_cases(schema, server, http, operation_id):
    operation = schema.find_operation_by_id(operation_id)
    config = schema.config.generation_for(operation=operation, phase="coverage")
    count = 0
    for case in schema.iter_coverage_cases(
        operation, generation_modes=[GenerationMode.POSITIVE, GenerationMode.NEGATIVE], generation_config=config
    ):
        response = case.call(base_url=server.url, session=http, timeout=REQUEST_TIMEOUT)
        _check(case, response, server)
        count += 1
    assert count > 0


BODY_LIMIT = 10 * 1024 * 1024  # the server's default


@pytest.mark.parametrize("operation_id", OPERATIONS)
def test_guard_refusals_are_documented(schema, server, http, operation_id):
    operation = schema.find_operation_by_id(operation_id)
    port = server.url.rsplit(":", 1)[1]
    refusals = [({"Origin": "https://evil.example"}, 403), ({"Host": f"attacker.example:{port}"}, 403)]
    has_body = "requestBody" in _ALL[operation_id]
    if has_body:
        refusals.append(({"Content-Type": "text/plain"}, 415))

    # The guard answers before anything is decoded, so any valid case will do: one, the same on every run.
    @settings(max_examples=1, deadline=None, derandomize=True, database=None, phases=[Phase.generate],
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
    @given(case=operation.as_strategy(generation_mode=GenerationMode.POSITIVE))
    def run(case) -> None:
        for headers, status in refusals:
            response = case.call(base_url=server.url, session=http, headers=headers, timeout=REQUEST_TIMEOUT)
            assert response.status_code == status, (headers, response.text)
            _check(case, response, server)
        if has_body:
            case.body = {"padding": "a" * BODY_LIMIT}  # refused for its size before anyone reads it
            response = case.call(base_url=server.url, session=http, timeout=REQUEST_TIMEOUT)
            assert response.status_code == 413, response.text[:300]
            _assert_tagged_error(response)
            case.validate_response(response, checks=CHECKS, transport_kwargs={"base_url": server.url})

    run()


# Inputs that once made the server answer 500, found by longer random runs of the fuzzing above; pinned here
# because 25 derandomized examples do not necessarily draw them again.
TOO_LONG = "a" * 5000  # ENAMETOOLONG from the file system
REGRESSIONS = [
    pytest.param("GET", "/api/location", {"location[directory]": "", "location[workspace]": ""}, None, 400,
                 id="location-workspace-not-a-workspace-id"),
    pytest.param("GET", "/api/location", {"location[directory]": "\x00"}, None, 400, id="location-nul-byte"),
    pytest.param("GET", "/api/location", {"location[directory]": "~no-such-user-ocs"}, None, 400,
                 id="location-unknown-home"),
    pytest.param("GET", "/api/location", {"location[directory]": TOO_LONG}, None, 400, id="location-name-too-long"),
    pytest.param("GET", "/api/session", {"limit": str(2**63 - 1)}, None, 200, id="list-limit-int64-max"),
    pytest.param("GET", "/api/session", {"limit": "9" * 30}, None, 200, id="list-limit-beyond-int64"),
    pytest.param("GET", "/api/session", {"directory": "\x00"}, None, 400, id="list-directory-nul-byte"),
    pytest.param("POST", "/api/session", None, {"location": {"directory": "\x00"}}, 400, id="create-nul-byte"),
    pytest.param("POST", "/api/session", None, {"location": {"directory": TOO_LONG}}, 400,
                 id="create-name-too-long"),
]


@pytest.mark.parametrize(("method", "path", "params", "body", "status"), REGRESSIONS)
def test_inputs_that_once_failed(schema, server, http, method, path, params, body, status):
    response = http.request(method, server.url + path, params=params, json=body, timeout=REQUEST_TIMEOUT)
    assert response.status_code == status, response.text
    _assert_tagged_error(response)
    if status >= 400:
        assert response.json()["_tag"] == "InvalidRequestError"
    operation = schema.find_operation_by_path(method, path)
    assert operation is not None
    # The same checks as the fuzzed cases, on a case that records what was sent.
    case = operation.Case(query=params, body=body if body is not None else NOT_SET)
    case.validate_response(response, checks=CHECKS, transport_kwargs={"base_url": server.url})
