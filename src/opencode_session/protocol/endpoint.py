"""The Endpoint record: one HTTP operation described as data, plus the query-string codec both sides share."""

from __future__ import annotations

import re
import types
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from pydantic import BaseModel, TypeAdapter, create_model

from opencode_session.schema.base import Struct
from opencode_session.schema.errors import (
    ForbiddenError,
    InvalidRequestError,
    TaggedError,
    TooManyAttemptsError,
    UnauthorizedError,
)
from opencode_session.schema.page import CursorLinks

# How success values go on the wire: JSON types, absent optionals left out, and no value of another shape.
_WIRE: dict[str, Any] = {"mode": "json", "exclude_none": True, "by_alias": True, "warnings": "error"}

SSE_CONTENT_TYPE = "text/event-stream"
JSON_CONTENT_TYPE = "application/json"
BYTES_CONTENT_TYPE = "application/octet-stream"


@dataclass(frozen=True)
class ErrorAt:
    """A declared error answered with a status other than its own, e.g. InvalidRequestError as a 415."""

    error: type[TaggedError]
    status: int


ErrorDeclaration = type[TaggedError] | ErrorAt


@dataclass(frozen=True)
class Refusal:
    """A well-formed request the server refuses for a reason no schema can state: it depends on the configuration,
    the file system, or what the server handed out before. The answer is `error` naming `field` (a dotted path;
    `*` stands for one list index), and the document gives `reason` on the operation."""

    error: type[TaggedError]
    field: str | None
    reason: str

    def matches(self, body: Mapping[str, Any]) -> bool:
        """Whether an error body is this refusal."""
        if body.get("_tag") != self.error.__name__:
            return False
        field = body.get("field")
        if self.field is None or not isinstance(field, str):
            return self.field is None and field is None
        return re.fullmatch(re.escape(self.field).replace(r"\*", "[0-9]+"), field) is not None


# Every route answers these, whatever it declares: request validation, the request guard (Host/Origin 403, body
# media type 415 and size 413, for any request that carries a body) and auth (401, 429 after many wrong passwords)
# run before the handler.
IMPLICIT_ERRORS: tuple[ErrorDeclaration, ...] = (
    InvalidRequestError, UnauthorizedError, ForbiddenError, TooManyAttemptsError,
    ErrorAt(InvalidRequestError, 413), ErrorAt(InvalidRequestError, 415),
)


@dataclass(frozen=True)
class StreamSpec:
    """An SSE response: each frame's `data:` is one JSON item of type `item` (a model or an annotated union)."""

    item: Any
    name: str
    # True: the stream never ends by itself (a client takes its end for a lost connection); the name of a boolean
    # query parameter: endless only when that parameter is true
    endless: bool | str = False
    # each frame's SSE `id:` is the item's sequence number (a reader resumes after it)
    sequenced: bool = False


def _snake(word: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", word).lower()


def _pascal(parts: Iterable[str]) -> str:
    return "".join(p[:1].upper() + p[1:] for part in parts for p in part.split("_"))


def derive_client_name(operation_id: str) -> tuple[str, str]:
    """Drop `v2.`; the first segment is the group, the rest snake_cased and joined by "_".

    `v2.session.switchAgent` -> ("session", "switch_agent"); `v2.session.context.entry.put` ->
    ("session", "context_entry_put").
    """
    segments = operation_id.split(".")
    if segments[0] == "v2":
        segments = segments[1:]
    if len(segments) < 2:
        raise ValueError(f"operation ID needs a group and a name: {operation_id}")
    return segments[0], "_".join(_snake(s) for s in segments[1:])


@dataclass(frozen=True)
class Endpoint:
    operation_id: str
    method: str
    path: str
    summary: str
    description: str = ""
    path_params: type[BaseModel] | None = None
    query: type[BaseModel] | None = None
    body: type[BaseModel] | None = None
    success_status: int = 200
    success: Any = None
    unwrap_data: bool = False
    page: bool = False
    errors: tuple[ErrorDeclaration, ...] = ()
    stream: StreamSpec | None = None
    client_name: tuple[str, ...] = ()
    tag: str = ""
    # the answer comes only once something happens (like a stream's next item): clients set no read timeout for it
    waits: bool = False
    # (path parameter, JSON pointer into the success body): identifiers the answer holds for other operations. The
    # document links it to each operation that takes them all, same name and schema (`/data/0/id`: the first item's)
    provides: tuple[tuple[str, str], ...] = ()
    refusals: tuple[Refusal, ...] = ()
    # the path parameter a trailing `/*` of `path` captures: the rest of the URL path, slashes included (the
    # document shows the `*` as the reference does, with no parameter for it)
    wildcard: str | None = None
    # a WebSocket upgrade (`x-websocket` in the document); a plain request to it is refused
    websocket: bool = False

    def __post_init__(self) -> None:
        if not self.client_name:
            object.__setattr__(self, "client_name", derive_client_name(self.operation_id))
        if not self.tag:
            object.__setattr__(self, "tag", self.client_name[0])
        if self.success_status == 204 and (self.success is not None or self.stream is not None):
            raise ValueError(f"{self.operation_id}: a 204 endpoint has no body")
        if self.unwrap_data and self.page:
            raise ValueError(f"{self.operation_id}: choose one of unwrap_data and page")
        if self.stream is not None and self.success is not None:
            raise ValueError(f"{self.operation_id}: a stream declares its item in StreamSpec, not success")
        names = set(re.findall(r"{([^}]+)}", self.path))
        declared = set(self.path_params.model_fields) if self.path_params else set()
        if self.wildcard is not None:
            if not self.path.endswith("/*") or self.wildcard not in declared:
                raise ValueError(f"{self.operation_id}: a wildcard is a path parameter captured by a trailing /*")
            names.add(self.wildcard)
        if names != declared:
            raise ValueError(f"{self.operation_id}: path {self.path} vs path_params {sorted(declared)}")

    @property
    def declared_errors(self) -> tuple[tuple[type[TaggedError], int], ...]:
        """(error, status) for the declared errors plus the implicit ones, without duplicates, in declaration order."""
        seen: dict[tuple[str, int], tuple[type[TaggedError], int]] = {}
        for decl in (*IMPLICIT_ERRORS, *self.errors, *(r.error for r in self.refusals)):
            err, status = (decl.error, decl.status) if isinstance(decl, ErrorAt) else (decl, decl.status)
            seen.setdefault((err.__name__, status), (err, status))
        return tuple(seen.values())

    @property
    def all_errors(self) -> tuple[type[TaggedError], ...]:
        """Every error type a response may carry, once each, in declaration order."""
        return tuple(dict.fromkeys(err for err, _ in self.declared_errors))

    def errors_for(self, status: int) -> tuple[type[TaggedError], ...]:
        return tuple(err for err, declared in self.declared_errors if declared == status)

    @property
    def result_kind(self) -> str:
        """none | data | page | raw | bytes | stream | websocket: how a client turns the success response into a
        value."""
        if self.websocket:
            return "websocket"
        if self.stream is not None:
            return "stream"
        if self.success is bytes:
            return "bytes"
        if self.success_status == 204:
            return "none"
        if self.page:
            return "page"
        if self.unwrap_data:
            return "data"
        return "raw"

    @cached_property
    def _success_adapter(self) -> TypeAdapter[Any]:
        items: Any = types.GenericAlias(list, (self.success,)) if self.page else self.success
        return TypeAdapter(items)

    def encode(self, result: Any) -> Any:
        """The JSON-ready success body of `result` (a page's result is its items and cursor links), encoded through
        the declared type: a value of another shape is an error, never a body that breaks the contract."""
        kind = self.result_kind
        if kind == "page":
            items, links = result
            return {"data": self._success_adapter.dump_python(items, **_WIRE), "cursor": links.wire()}
        data = self._success_adapter.dump_python(result, **_WIRE)
        return {"data": data} if kind == "data" else data

    @cached_property
    def response_model(self) -> type[BaseModel] | None:
        """The model of the whole JSON success body: the `{data}` or `{data, cursor}` envelope, or the success model."""
        kind = self.result_kind
        name = _pascal(self.client_name) + "Response"
        if kind == "data":
            return create_model(name, __base__=Struct, data=(self.success, ...))
        if kind == "page":
            items: Any = types.GenericAlias(list, (self.success,))  # list[<the success model>], built at run time
            return create_model(name, __base__=Struct, data=(items, ...), cursor=(CursorLinks, ...))
        if kind == "raw":
            if not (isinstance(self.success, type) and issubclass(self.success, BaseModel)):
                raise TypeError(f"{self.operation_id}: a raw success body must be a model")
            return self.success
        return None

    def wire_path(self, values: Mapping[str, str]) -> str:
        """The concrete path with each `{name}` (and the wildcard's `*`) replaced by the already-encoded value."""
        path = re.sub(r"{([^}]+)}", lambda m: values[m.group(1)], self.path)
        return path[:-1] + values[self.wildcard] if self.wildcard is not None else path

    @property
    def route_path(self) -> str:
        """The path as the router matches it: the wildcard's `*` becomes a parameter that takes slashes."""
        return self.path[:-1] + "{" + self.wildcard + ":path}" if self.wildcard is not None else self.path


# --- query strings -------------------------------------------------------------------------------


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def encode_query(values: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Wire-ready query items; None is omitted, booleans are "true"/"false", objects use deepObject (`a[b]=c`)."""
    items: list[tuple[str, str]] = []
    for name, value in values.items():
        if value is None:
            continue
        if isinstance(value, BaseModel):
            value = value.model_dump(mode="json", exclude_none=True, by_alias=True)
        if isinstance(value, Mapping):
            items.extend((f"{name}[{k}]", _scalar(v)) for k, v in value.items() if v is not None)
        elif isinstance(value, (list, tuple)):
            items.extend((name, _scalar(v)) for v in value)
        else:
            items.append((name, _scalar(value)))
    return items


_DEEP = re.compile(r"^([^\[\]]+)\[([^\[\]]+)\]$")


def decode_query(model: type[BaseModel], items: Iterable[tuple[str, str]]) -> BaseModel:
    """Validate raw query items into `model`, folding deepObject keys (`a[b]=c`) into nested objects.

    Raises pydantic.ValidationError for bad or unknown parameters; the last value of a repeated key wins.
    """
    raw: dict[str, Any] = {}
    literal = {info.alias for info in model.model_fields.values() if info.alias}  # a field named `a[b]` itself
    for key, value in items:
        match = None if key in literal else _DEEP.match(key)
        if match:
            nested = raw.setdefault(match.group(1), {})
            if isinstance(nested, dict):
                nested[match.group(2)] = value
                continue
        raw[key] = value
    return model.model_validate(raw)
