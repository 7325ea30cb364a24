"""The protocol layer: ENDPOINTS match the reference wire contract and render to a valid OpenAPI 3.1 document."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from typing import Any

import jsonschema
import pytest
import schemathesis
from pydantic import ValidationError

from opencode_session.protocol import ENDPOINTS, decode_query, encode_query, endpoint
from opencode_session.protocol.api import LocationQuery, SessionLogQuery, SessionPromptBody
from opencode_session.protocol.endpoint import derive_client_name
from opencode_session.protocol.openapi import render_openapi
from opencode_session.schema.errors import InvalidRequestError
from tests.support.reference import REFERENCE, load_reference

# Operations we declare that the reference (v1.18.33) also has; the rest come from the spec.
SHARED_WITH_REFERENCE = {
    "v2.health.get",
    "v2.location.get",
    "v2.session.list",
    "v2.session.create",
    "v2.session.active",
    "v2.session.get",
    "v2.session.switchAgent",
    "v2.session.switchModel",
    "v2.session.prompt",
    "v2.session.wait",
    "v2.session.context",
    "v2.session.compact",
    "v2.session.events",
    "v2.session.interrupt",
    "v2.session.message",
    "v2.session.messages",
    "v2.event.subscribe",
    "v2.model.list",
    "v2.provider.list",
    "v2.provider.get",
    "v2.agent.list",
    "v2.permission.request.list",
    "v2.permission.saved.list",
    "v2.permission.saved.remove",
    "v2.session.permission.create",
    "v2.session.permission.list",
    "v2.session.permission.get",
    "v2.session.permission.reply",
    "v2.question.request.list",
    "v2.session.question.list",
    "v2.session.question.reply",
    "v2.session.question.reject",
    "v2.session.revert.stage",
    "v2.session.revert.clear",
    "v2.session.revert.commit",
    "v2.pty.list",
    "v2.pty.create",
    "v2.pty.get",
    "v2.pty.update",
    "v2.pty.remove",
    "v2.pty.connectToken",
    "v2.pty.connect",
    "v2.fs.read",
    "v2.fs.list",
    "v2.fs.find",
    "v2.integration.list",
    "v2.integration.get",
    "v2.integration.connect.key",
    "v2.integration.connect.oauth",
    "v2.integration.attempt.status",
    "v2.integration.attempt.cancel",
    "v2.integration.attempt.complete",
    "v2.credential.update",
    "v2.credential.remove",
    "v2.command.list",
    "v2.skill.list",
    "v2.reference.list",
}
# Statuses we add to a shared operation, with why: the spec's single-writer rule refuses a revert while the
# session executes (SessionBusyError, as OpenCode's later versions answer staging), where 1.18.33 would go ahead.
EXTRA_STATUSES = {
    "v2.session.revert.stage": {"409"},
    "v2.session.revert.clear": {"409"},
    "v2.session.revert.commit": {"409"},
    "v2.session.create": {"404"},  # upstream's later create: an unknown parentID
    "v2.session.wait": {"422"},  # ?outcome=true: the latest execution failed (SessionExecutionFailedError)
}
# What upstream's later session routes add to shared operations (`opencode-v2-session-routes-upstream.md`).
EXTRA_PARAMETERS = {"v2.session.list": {("parentID", "query")}, "v2.session.interrupt": {("resume", "query")},
                    "v2.session.wait": {("outcome", "query")}}  # ours: say how the execution ended
# Upstream's later interrupt answers `{interrupted}` where 1.18.33 answered 204.
UPSTREAM_SUCCESS = {"v2.session.interrupt": {"200"}}
# The client's directory scope OpenCode's SDK sends to every operation (`directory` as OpenCode's own routes declare
# it, and the header); the session list's own `directory` is the reference's.
SCOPE_PARAMETERS = {("directory", "query"), ("x-opencode-directory", "header")}
EXTRA_BODY_FIELDS = {"v2.session.create": {"parentID", "title", "metadata", "permissions"}}


@pytest.fixture(scope="module")
def doc() -> dict[str, Any]:
    return render_openapi()


@pytest.fixture(scope="module")
def reference() -> dict[str, Any]:
    return load_reference(REFERENCE, os.environ)


@pytest.mark.parametrize(("env", "outcome"), [
    ({"CI": "true"}, pytest.fail.Exception), ({"CI": "1"}, pytest.fail.Exception),
    ({"OCS_REQUIRE_REFERENCE": "1"}, pytest.fail.Exception), ({"CI": "false", "OCS_REQUIRE_REFERENCE": "1"},
                                                             pytest.fail.Exception),
    ({}, pytest.skip.Exception), ({"CI": ""}, pytest.skip.Exception), ({"CI": "false"}, pytest.skip.Exception),
    ({"OCS_REQUIRE_REFERENCE": "0"}, pytest.skip.Exception)])
def test_a_missing_reference_fails_under_ci_and_is_skipped_elsewhere(tmp_path, env, outcome):
    missing = tmp_path / "missing.json"
    with pytest.raises(outcome, match=f"reference document not found at {re.escape(str(missing))}"):
        load_reference(missing, env)


def _operations(document: dict[str, Any]) -> dict[str, tuple[str, str, dict[str, Any]]]:
    out = {}
    for path, methods in document["paths"].items():
        for method, op in methods.items():
            out[op["operationId"]] = (method.upper(), path, op)
    return out


def _resolve(document: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        node: Any = document
        for part in schema["$ref"].removeprefix("#/").split("/"):
            node = node[part]
        schema = node
    return schema


def _body(document: dict[str, Any], op: dict[str, Any]) -> tuple[set[str], set[str]] | None:
    body = op.get("requestBody")
    if body is None:
        return None
    schema = _resolve(document, body["content"]["application/json"]["schema"])
    return set(schema.get("properties", {})), set(schema.get("required", []))


def _statuses(op: dict[str, Any]) -> tuple[set[str], set[str]]:
    responses = set(op["responses"])
    success = {s for s in responses if s.startswith("2")}
    return success, responses - success


# Our request guard answers these on every route (a foreign Host or Origin, a body that is not JSON or too large, a
# client locked out after many wrong passwords); the reference server has no such guard, so its document does not
# declare them.
GUARD_STATUSES = {"403", "413", "415", "429"}


def _all_refs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref":
                yield value
            elif key == "mapping" and isinstance(value, dict):
                yield from (v for v in value.values() if isinstance(v, str))
            else:
                yield from _all_refs(value)
    elif isinstance(node, list):
        for item in node:
            yield from _all_refs(item)


def _schemas_in_operations(document: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for methods in document["paths"].values():
        for op in methods.values():
            for param in op.get("parameters", []):
                yield param["schema"]
            for media in op.get("requestBody", {}).get("content", {}).values():
                yield media["schema"]
            for response in op["responses"].values():
                for media in response.get("content", {}).values():
                    yield media.get("schema") or media["itemSchema"]


# --- the table ------------------------------------------------------------------------------------


# upstream's later session routes (`opencode-v2-session-routes-upstream.md`), not in the 1.18.33 document
UPSTREAM_SESSION_MANAGEMENT = {
    "v2.session.remove",
    "v2.session.update",
    "v2.session.inbox.list",
    "v2.session.inbox.cancel",
    "v2.session.inbox.update",
    "v2.experimental.session.export",
    "v2.experimental.session.import",
    "v2.session.diff",
    "v2.experimental.session.stats",
    "v2.session.synthetic",
    "v2.session.shell",
    "v2.session.resume",
    "v2.session.environment",
    "v2.session.generate",
    "v2.session.view",
}


def test_every_requested_operation_is_declared_once():
    ids = [e.operation_id for e in ENDPOINTS]
    assert len(ids) == len(set(ids))
    assert SHARED_WITH_REFERENCE | {
        "v2.session.log",
        "v2.session.context.entry.list",
        "v2.session.context.entry.put",
        "v2.session.context.entry.remove",
        "v2.session.fork",
        "v2.session.move",
        "v2.session.owner",
        "v2.mcp.status",
        "v2.mcp.connect",
        "v2.experimental.trust.get",
        "v2.experimental.trust.grant",
        "v2.session.message.context",
    } | UPSTREAM_SESSION_MANAGEMENT == set(ids)
    assert endpoint("v2.session.get").path == "/api/session/{sessionID}"
    with pytest.raises(KeyError):
        endpoint("v2.session.nope")


def test_client_names_derive_from_operation_ids():
    assert derive_client_name("v2.session.switchAgent") == ("session", "switch_agent")
    assert derive_client_name("v2.session.context.entry.put") == ("session", "context_entry_put")
    assert endpoint("v2.event.subscribe").client_name == ("event", "subscribe")


def test_every_endpoint_declares_the_guard_and_auth_errors():
    for ep in ENDPOINTS:
        declared = {(e.__name__, status) for e, status in ep.declared_errors}
        assert declared >= {("InvalidRequestError", 400), ("UnauthorizedError", 401), ("ForbiddenError", 403),
                            ("InvalidRequestError", 413), ("InvalidRequestError", 415)}, ep.operation_id
        assert ep.errors_for(415) == (InvalidRequestError,), ep.operation_id


def test_request_models_reject_unknown_fields_and_bad_ids():
    with pytest.raises(ValidationError):
        SessionPromptBody.model_validate({"prompt": {"text": "hi"}, "surprise": 1})
    with pytest.raises(ValidationError):
        SessionPromptBody.model_validate({"id": "ses_wrong_prefix", "prompt": {"text": "hi"}})
    with pytest.raises(ValidationError):
        endpoint("v2.session.get").path_params.model_validate({"sessionID": "msg_1"})
    with pytest.raises(ValidationError):
        endpoint("v2.session.context.entry.put").path_params.model_validate({"sessionID": "ses_1", "key": "a/b"})


def test_query_codec_round_trips_deep_objects_booleans_and_sequences():
    items = encode_query({"location": {"directory": "/w", "workspace": None}})
    assert items == [("location[directory]", "/w")]
    assert decode_query(LocationQuery, items) == LocationQuery.model_validate({"location": {"directory": "/w"}})

    items = encode_query({"after": 7, "follow": True})
    assert items == [("after", "7"), ("follow", "true")]
    parsed = decode_query(SessionLogQuery, items)
    assert (parsed.after, parsed.follow) == (7, True)
    for bad in ([("follow", "yes")], [("after", "-1")], [("after", "1.5")], [("unknown", "1")]):
        with pytest.raises(ValidationError):
            decode_query(SessionLogQuery, bad)


def test_list_limits_default_and_bounds():
    list_query = endpoint("v2.session.list").query
    messages_query = endpoint("v2.session.messages").query
    assert decode_query(list_query, []).limit == 50
    assert decode_query(messages_query, [("limit", "200")]).limit == 200
    with pytest.raises(ValidationError):
        decode_query(messages_query, [("limit", "201")])
    with pytest.raises(ValidationError):
        decode_query(list_query, [("limit", "0")])


# --- against the reference ------------------------------------------------------------------------


def test_shared_operations_match_the_reference(doc, reference):
    ours, theirs = _operations(doc), _operations(reference)
    for op_id in sorted(SHARED_WITH_REFERENCE):
        assert op_id in theirs, f"{op_id} is not in the reference"
        our_method, our_path, our_op = ours[op_id]
        ref_method, ref_path, ref_op = theirs[op_id]
        assert (our_method, our_path) == (ref_method, ref_path), op_id
        assert {(p["name"], p["in"]) for p in our_op["parameters"]} == {
            (p["name"], p["in"]) for p in ref_op["parameters"]
        } | EXTRA_PARAMETERS.get(op_id, set()) | SCOPE_PARAMETERS, op_id
        ref_success, ref_errors = _statuses(ref_op)
        ref_success = UPSTREAM_SUCCESS.get(op_id, ref_success)
        assert _statuses(our_op) == (ref_success, ref_errors | GUARD_STATUSES | EXTRA_STATUSES.get(op_id, set())), \
            op_id
        ref_body = _body(reference, ref_op)
        if ref_body is not None and op_id in EXTRA_BODY_FIELDS:
            ref_body = (ref_body[0] | EXTRA_BODY_FIELDS[op_id], ref_body[1])
        assert _body(doc, our_op) == ref_body, op_id


def _resolved(document: dict[str, Any], schema: Any) -> Any:
    """The schema with every `$ref` replaced by what it names (the shapes here have no cycles)."""
    if isinstance(schema, dict):
        ref = schema.get("$ref")
        if ref is not None:
            return _resolved(document, document["components"]["schemas"][ref.rsplit("/", 1)[1]])
        return {k: _resolved(document, v) for k, v in schema.items() if k not in ("description", "title")}
    if isinstance(schema, list):
        return [_resolved(document, v) for v in schema]
    return schema


def _shape(schema: Any) -> Any:
    """Property names, required sets and types, recursively: what a client decoding the answer depends on."""
    if isinstance(schema, dict):
        if "anyOf" in schema:
            return sorted((_shape(s) for s in schema["anyOf"]), key=repr)
        out: dict[str, Any] = {"type": schema.get("type"), "required": sorted(schema.get("required", []))}
        if "properties" in schema:
            out["properties"] = {k: _shape(v) for k, v in schema["properties"].items()}
        if "items" in schema:
            out["items"] = _shape(schema["items"])
        if "enum" in schema or "const" in schema:  # a one-value enum and a const say the same
            out["enum"] = sorted(schema.get("enum") or [schema["const"]])
        return out
    return schema


@pytest.mark.parametrize("op_id", ["v2.model.list", "v2.provider.list", "v2.provider.get"])
def test_catalog_answers_have_the_reference_shape(doc, reference, op_id):
    def success(document: dict[str, Any]) -> Any:
        op = _operations(document)[op_id][2]
        return _shape(_resolved(document, op["responses"]["200"]["content"]["application/json"]["schema"]))

    assert success(doc) == success(reference)


# The new operations' answers, as a client decodes them (the attempt answers differ only in that the reference
# encodes epoch numbers as Effect does, also admitting "NaN" and "Infinity" strings).
@pytest.mark.parametrize("op_id", ["v2.pty.list", "v2.pty.create", "v2.pty.get", "v2.pty.update", "v2.pty.connectToken",
                                   "v2.fs.list", "v2.fs.find", "v2.integration.list", "v2.integration.get",
                                   "v2.command.list", "v2.skill.list", "v2.reference.list"])
def test_workspace_answers_have_the_reference_shape(doc, reference, op_id):
    test_catalog_answers_have_the_reference_shape(doc, reference, op_id)


def test_byte_and_websocket_operations_render_as_the_reference_does(doc, reference):
    for op_id in ("v2.fs.read", "v2.pty.connect"):
        ours, theirs = _operations(doc)[op_id][2], _operations(reference)[op_id][2]
        assert ours["responses"]["200"]["content"] == theirs["responses"]["200"]["content"], op_id
    assert _operations(doc)["v2.pty.connect"][2]["x-websocket"] is True


def test_deep_object_parameter_matches_the_reference(doc, reference):
    ours = _operations(doc)["v2.location.get"][2]["parameters"][0]
    assert ours["name"] == "location"
    theirs = _operations(reference)["v2.location.get"][2]["parameters"][0]
    for key in ("name", "in", "style", "explode", "required"):
        assert ours[key] == theirs[key]
    assert set(ours["schema"]["properties"]) == set(theirs["schema"]["properties"])


def test_spec_only_operations_have_their_wire_shape(doc):
    ops = _operations(doc)
    method, path, log = ops["v2.session.log"]
    assert (method, path) == ("GET", "/api/session/{sessionID}/log")
    assert {p["name"] for p in log["parameters"]} == {"sessionID", "after", "follow", "directory",
                                                      "x-opencode-directory"}
    assert "text/event-stream" in log["responses"]["200"]["content"]
    assert _statuses(log) == ({"200"}, {"400", "401", "404"} | GUARD_STATUSES)
    method, path, put = ops["v2.session.context.entry.put"]
    assert (method, path) == ("PUT", "/api/session/{sessionID}/context-entry/{key}")
    assert _statuses(put) == ({"204"}, {"400", "401", "404"} | GUARD_STATUSES)
    assert _body(doc, put) == ({"value"}, {"value"})


# --- document hygiene -----------------------------------------------------------------------------


def test_every_reference_resolves(doc):
    refs = set(_all_refs(doc))
    assert refs
    for ref in refs:
        assert ref.startswith("#/components/schemas/")
        assert ref.removeprefix("#/components/schemas/") in doc["components"]["schemas"], ref


def test_schemas_are_valid_json_schema_2020_12(doc):
    assert doc["openapi"] == "3.1.0"
    for schema in doc["components"]["schemas"].values():
        jsonschema.Draft202012Validator.check_schema(schema)
    for schema in _schemas_in_operations(doc):
        jsonschema.Draft202012Validator.check_schema(schema)


def test_reference_style_optionals_and_error_bodies(doc):
    text = json.dumps(doc)
    assert '"type": "null"' not in text
    assert '"default": null' not in text
    schemas = doc["components"]["schemas"]
    for name in ("SessionNotFoundError", "InvalidRequestError", "UnauthorizedError", "ConflictError"):
        body = schemas[name]
        assert body["required"][0] == "_tag"
        assert body["properties"]["_tag"] == {"type": "string", "enum": [name]}
        assert body["additionalProperties"] is False
    assert schemas["SessionV2Info"]["additionalProperties"] is False
    assert "parentID" not in schemas["SessionV2Info"]["required"]
    assert schemas["SessionV2Info"]["properties"]["parentID"]["pattern"] == "^ses"


def test_several_errors_on_one_status_become_any_of(doc):
    responses = _operations(doc)["v2.session.message"][2]["responses"]
    refs = {r["$ref"] for r in responses["404"]["content"]["application/json"]["schema"]["anyOf"]}
    assert refs == {"#/components/schemas/SessionNotFoundError", "#/components/schemas/MessageNotFoundError"}
    assert responses["404"]["description"] == "SessionNotFoundError | MessageNotFoundError"


def test_instances_validate_against_the_rendered_schemas(doc):
    registry_doc = {"$defs": doc["components"]["schemas"]}
    text = json.dumps(registry_doc).replace("#/components/schemas/", "#/$defs/")
    defs = json.loads(text)

    def validator(name: str) -> jsonschema.Draft202012Validator:
        return jsonschema.Draft202012Validator({"$ref": f"#/$defs/{name}", **defs})

    session = {
        "id": "ses_1",
        "projectID": "p",
        "cost": 0,
        "tokens": {"input": 0, "output": 0, "reasoning": 0, "cache": {"read": 0, "write": 0}},
        "time": {"created": 1, "updated": 2},
        "title": "t",
        "location": {"directory": "/w"},
    }
    validator("SessionV2Info").validate(session)
    assert not validator("SessionV2Info").is_valid({**session, "parentID": None})
    validator("SessionNotFoundError").validate({"_tag": "SessionNotFoundError", "sessionID": "ses_1", "message": "m"})
    assert not validator("SessionNotFoundError").is_valid({"sessionID": "ses_1", "message": "m"})
    validator("SessionLogItem").validate({"type": "log.synced", "aggregateID": "ses_1", "seq": 3})


def test_schemathesis_loads_every_operation(doc):
    schema = schemathesis.openapi.from_dict(doc)
    labels = {result.ok().label for result in schema.get_all_operations()}
    assert len(labels) == len(ENDPOINTS)
    assert "POST /api/session/{sessionID}/prompt" in labels


# --- what the document promises beyond shapes -------------------------------------------------------------


def _param(op: dict[str, Any], name: str) -> dict[str, Any]:
    return next(p for p in op["parameters"] if p["name"] == name)


def test_rules_the_decoder_enforces_are_in_the_document(doc):
    ops = _operations(doc)
    after = _param(ops["v2.session.events"][2], "after")["schema"]
    assert after == {"type": "integer", "minimum": 0, "maximum": 2**63 - 1}
    decode_query(SessionLogQuery, [("after", str(2**63 - 1))])
    with pytest.raises(ValidationError):
        decode_query(SessionLogQuery, [("after", str(2**63))])
    workspace = _param(ops["v2.location.get"][2], "location")["schema"]["properties"]["workspace"]
    assert workspace["pattern"] == "^wrk"
    with pytest.raises(ValidationError):
        decode_query(LocationQuery, [("location[workspace]", "not-a-workspace")])
    attachment = doc["components"]["schemas"]["PromptInputFileAttachment"]["properties"]["uri"]
    pattern = re.compile(attachment["pattern"])
    for uri, accepted in (("file:///a", True), ("https://x", True), ("data:,x", True), ("notes.md", True),
                          ("/abs/path", True), ("ftp://x", False), ("mailto:x", False), (" gopher:x", False)):
        assert bool(pattern.search(uri)) is accepted, uri
        prompt = {"prompt": {"text": "t", "files": [{"uri": uri}]}}
        if accepted:
            SessionPromptBody.model_validate(prompt)
        else:
            with pytest.raises(ValidationError):
                SessionPromptBody.model_validate(prompt)


def test_a_body_without_required_fields_may_be_left_out(doc):
    bodies = {op_id: op["requestBody"]["required"] for op_id, (_, _, op) in _operations(doc).items()
              if "requestBody" in op}
    assert bodies["v2.session.create"] is False  # a blank body reads as {}
    assert bodies["v2.session.prompt"] is True and bodies["v2.session.switchAgent"] is True


def test_refusals_no_schema_states_are_named_on_their_status(doc):
    ops = _operations(doc)
    for ep in ENDPOINTS:
        for refusal in ep.refusals:
            response = ops[ep.operation_id][2]["responses"][str(refusal.error.status)]
            assert refusal.error.__name__ in response["description"].split(".")[0], ep.operation_id
            assert refusal.reason in response["description"], ep.operation_id
    listing = ops["v2.session.list"][2]["responses"]["400"]["description"]
    assert "cursor" in listing and "InvalidCursorError" in listing


def test_event_streams_describe_each_frame_and_its_json_data(doc):
    ops = _operations(doc)
    for op_id, component, sequenced in (("v2.event.subscribe", "InstanceEvent", False),
                                        ("v2.session.events", "SessionDurableEvent", True),
                                        ("v2.session.log", "SessionLogItem", True)):
        media = ops[op_id][2]["responses"]["200"]["content"]["text/event-stream"]
        assert set(media) == {"itemSchema"}  # 3.2's form: `schema` would have to cover the whole stream
        frame = media["itemSchema"]
        assert frame["required"] == ["data"]
        assert frame["properties"]["data"] == {"type": "string", "contentMediaType": "application/json",
                                               "contentSchema": {"$ref": f"#/components/schemas/{component}"}}
        assert ("id" in frame["properties"]) is sequenced, op_id


def _links(doc: dict[str, Any], op_id: str) -> dict[str, Any]:
    _, _, op = _operations(doc)[op_id]
    success = next(r for status, r in op["responses"].items() if status.startswith("2"))
    links: dict[str, Any] = success.get("links", {})
    return links


def test_links_lead_from_each_identifier_to_the_operations_that_take_it(doc):
    ops = _operations(doc)
    takes_only_a_session = {op_id for op_id, (_, path, _) in ops.items()
                            if re.findall(r"{(\w+)}", path) == ["sessionID"]}
    created = _links(doc, "v2.session.create")
    assert set(created) == takes_only_a_session and len(created) > 10
    assert {link["parameters"]["sessionID"] for link in created.values()} == {"$response.body#/data/id"}
    assert _links(doc, "v2.session.prompt") == {"v2.session.message": {
        "operationId": "v2.session.message",
        "parameters": {"sessionID": "$request.path.sessionID", "messageID": "$response.body#/data/id"}}}
    assert set(_links(doc, "v2.session.permission.list")) == {"v2.session.permission.get",
                                                              "v2.session.permission.reply"}
    assert set(_links(doc, "v2.session.question.list")) == {"v2.session.question.reply",
                                                            "v2.session.question.reject"}
    # a request ID (^per) never goes to the question operations' requestID (^que), nor one that names no request
    assert set(_links(doc, "v2.permission.request.list")) == {"v2.session.permission.get",
                                                              "v2.session.permission.reply"}
    assert _links(doc, "v2.session.permission.create") == {}
    for op_id in ops:
        for link in _links(doc, op_id).values():
            target = ops[link["operationId"]]
            assert set(link["parameters"]) == set(re.findall(r"{(\w+)}", target[1])), (op_id, link)
