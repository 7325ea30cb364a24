"""Every handler is typed by its endpoint's declaration: it takes `Call[Path, Query, Body]` of exactly the endpoint's
path, query and body models and is annotated to return the declared success value, so mypy holds each handler's
body to the contract; and what a handler answers is encoded through that declaration, so a value of another shape
is an UnknownError with a logged reference, never a body the document does not describe."""

from __future__ import annotations

import typing
from collections.abc import AsyncIterator
from types import NoneType

import pytest

from opencode_session.protocol import ENDPOINTS, Endpoint
from opencode_session.protocol.api import HealthStatus
from opencode_session.schema.page import CursorLinks
from opencode_session.server.handlers import HANDLERS
from opencode_session.server.sse import Frames

pytestmark = pytest.mark.timeout(30)


def _declared_result(endpoint: Endpoint) -> tuple[object, ...]:
    kind = endpoint.result_kind
    if kind == "none":
        return (NoneType,)
    if kind == "stream":
        return (AsyncIterator[bytes], Frames)
    if kind == "page":
        return (tuple[list[endpoint.success], CursorLinks], tuple[list[typing.Any], CursorLinks])  # type: ignore[name-defined]
    return (endpoint.success,)


@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=lambda e: e.operation_id)
def test_the_handler_takes_and_returns_what_its_endpoint_declares(endpoint: Endpoint) -> None:
    hints = typing.get_type_hints(HANDLERS[endpoint.operation_id], include_extras=True)
    call = hints["call"]
    declared = tuple(NoneType if m is None else m for m in (endpoint.path_params, endpoint.query, endpoint.body))
    assert typing.get_args(call) == declared, f"{endpoint.operation_id} takes {call}"
    assert hints["return"] in _declared_result(endpoint), f"{endpoint.operation_id} returns {hints['return']}"


def test_every_handler_belongs_to_an_endpoint() -> None:
    assert set(HANDLERS) == {e.operation_id for e in ENDPOINTS}


def test_an_answer_of_another_shape_is_refused_by_the_declaration() -> None:
    health = next(e for e in ENDPOINTS if e.operation_id == "v2.health.get")
    assert health.encode(HealthStatus(healthy=True)) == {"healthy": True}
    with pytest.raises(Exception, match="serializ"):
        health.encode({"healthy": True, "extra": 1})  # a hand-built dict is not the declared model
