"""A client's directory scope: the `directory` query parameter and `x-opencode-directory` header OpenCode's SDK adds
to every request, folded into the Location of the operations that have one and dropped from the others."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from ..protocol import Endpoint
from ..schema.common import LocationRef
from ..schema.errors import InvalidRequestError

HEADER = "x-opencode-directory"  # percent-encoded by the SDK (`encodeURIComponent`)
QUERY = "directory"
_LOCATION_DIRECTORY = "location[directory]"
_LOCATION_KEYS = (_LOCATION_DIRECTORY, "location[workspace]")

# operations whose body's optional `location` the scope fills when the body names none (a session move's or an
# import's location is the request itself, never a client-wide default)
_BODY_LOCATION = frozenset({"v2.session.create"})


@dataclass(frozen=True)
class Scope:
    """The query items the endpoint's model is given, and the directory the request is scoped to (if any)."""

    items: list[tuple[str, str]]
    directory: str | None

    def fill_body(self, endpoint: Endpoint, body: Any) -> Any:
        if self.directory and endpoint.operation_id in _BODY_LOCATION and getattr(body, "location", None) is None:
            return body.model_copy(update={"location": LocationRef(directory=self.directory)})
        return body


def _query_location_field(endpoint: Endpoint) -> str | None:
    """How the endpoint's 400 names its Location's directory, when its query takes one."""
    fields = endpoint.query.model_fields if endpoint.query else {}
    if "location" in fields:
        return "location.directory"
    if any(info.alias == _LOCATION_DIRECTORY for info in fields.values()):
        return _LOCATION_DIRECTORY
    return None


def scope(endpoint: Endpoint, items: Iterable[tuple[str, str]], headers: Mapping[str, str]) -> Scope:
    """Where the endpoint has a Location, the scope names its directory unless `location[directory]` does, and
    differing values among the three are a 400 naming both; elsewhere the scope's parameters are accepted and
    ignored (an operation's own `directory` parameter, like the session list's filter, stays its own)."""
    fields = endpoint.query.model_fields if endpoint.query else {}
    own_directory = QUERY in fields
    location_field = _query_location_field(endpoint)
    takes_location = location_field is not None or endpoint.operation_id in _BODY_LOCATION
    named: list[tuple[str, str]] = []
    header = headers.get(HEADER)
    if header:
        named.append((HEADER, unquote(header)))
    kept: list[tuple[str, str]] = []
    for key, value in items:
        if key == QUERY and not own_directory:
            if value:
                named.append((QUERY, value))
            continue
        if key in _LOCATION_KEYS and location_field is None:
            if key == _LOCATION_DIRECTORY and value:
                named.append((key, value))
            continue
        if key == _LOCATION_DIRECTORY and value:
            named.append((key, value))
        kept.append((key, value))
    if not takes_location:
        return Scope(kept, None)
    first: dict[str, str] = {}
    for name, value in named:
        first.setdefault(value, name)
    if len(first) > 1:
        (a_value, a_name), (b_value, b_name) = list(first.items())[:2]
        raise InvalidRequestError(
            f"{a_name} ({a_value!r}) and {b_name} ({b_value!r}) name different directories",
            kind="query", field=location_field or "location.directory")
    directory = next(iter(first), None)
    if directory and location_field is not None and not any(k == _LOCATION_DIRECTORY for k, _ in kept):
        kept.append((_LOCATION_DIRECTORY, directory))
    return Scope(kept, directory)
