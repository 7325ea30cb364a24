"""Schemathesis hooks (schemathesis.toml loads them): a well-formed request is refused only for a reason its operation
documents, the refusals of protocol's endpoint table; a request schemathesis calls invalid but never sent is not held
against the server; a message the body names (not the session the link gave) may be not found.

(No patch of `ast.parse` here: pytest loads this module into every test process, where a lock around it deadlocked a
worker whose parse ran a finalizer that logged a traceback, which parses again. The thread race it guarded against,
CPython 3.11's shared AST recursion depth, is avoided by running schemathesis with one worker.)"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import schemathesis
from schemathesis.core.failures import AcceptedNegativeData
from schemathesis.core.parameters import ParameterLocation
from schemathesis.openapi.checks import EnsureResourceAvailability
from schemathesis.specs.openapi.checks import is_unexpected_http_status_case

from opencode_session.protocol import endpoint


@schemathesis.check
def refusal_is_documented(ctx: Any, response: Any, case: Any) -> bool | None:
    """A 400 to a request the document calls valid must be one of the operation's refusals (schemathesis.toml lets
    positive_data_acceptance take a 400 from those operations, and only this holds it to the reasons)."""
    meta = case.meta
    if meta is None or not meta.generation.mode.is_positive or response.status_code != 400:
        return None
    if is_unexpected_http_status_case(case):  # a coverage probe of the request's shape, not a valid request
        return None
    refusals = endpoint(case.operation.definition.raw["operationId"]).refusals
    if not refusals:
        return None  # positive_data_acceptance reports it
    try:
        body = json.loads(response.content)
    except ValueError:
        body = None
    if isinstance(body, dict) and any(r.matches(body) for r in refusals):
        return None
    documented = "; ".join(f"{r.error.__name__} at {r.field or '-'}: {r.reason}" for r in refusals)
    raise AssertionError(f"A valid request was refused for a reason the operation does not document.\n"
                         f"Documented: {documented}")


def _declared_query_keys(operation: dict[str, Any]) -> set[str]:
    """The query keys the document lets a request send: each parameter, a deepObject one as `name[property]`."""
    keys = set()
    for param in operation.get("parameters", []):
        if param["in"] != "query":
            continue
        properties = param["schema"].get("properties") if param.get("style") == "deepObject" else None
        keys |= {f"{param['name']}[{p}]" for p in properties} if properties else {param["name"]}
    return keys


@schemathesis.hook
def filter_failure(ctx: Any, failure: Any, case: Any, response: Any) -> bool:
    """Every failure counts but two. "Invalid request accepted" for a query negated only by an undeclared property
    that never reached the server: schemathesis adds it with an empty list as its value, which is not sent, so the
    request on the wire is the valid one the server answered. And "created resource not found" when the 404 is a
    MessageNotFoundError: the link supplied the session just created, which exists; the missing message is one the
    generated body named (revert/stage, fork)."""
    if isinstance(failure, EnsureResourceAvailability):
        try:
            return json.loads(response.content).get("_tag") != "MessageNotFoundError"
        except (ValueError, AttributeError):
            return True
    if not isinstance(failure, AcceptedNegativeData) or case.meta is None:
        return True
    mutations = getattr(case.meta.phase.data, "mutations", ())
    if len(mutations) != 1 or mutations[0].keywords != ("additionalProperties",) \
            or mutations[0].parameter_location != ParameterLocation.QUERY:
        return True
    sent = {key for key, _ in parse_qsl(urlsplit(response.request.url).query, keep_blank_values=True)}
    return not sent <= _declared_query_keys(case.operation.definition.raw)
