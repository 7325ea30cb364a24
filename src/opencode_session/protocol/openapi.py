"""Renders ENDPOINTS as an OpenAPI 3.1 document whose schemas come from the same pydantic models."""

from __future__ import annotations

import copy
from collections.abc import Iterable, Iterator
from importlib import metadata
from typing import Any

from pydantic import BaseModel, RootModel
from pydantic.json_schema import models_json_schema

from .api import ENDPOINTS
from .endpoint import BYTES_CONTENT_TYPE, JSON_CONTENT_TYPE, SSE_CONTENT_TYPE, Endpoint, StreamSpec

REF_PREFIX = "#/components/schemas/"

# JSON Schema keywords whose value is one subschema, a list of them, or a name -> subschema map.
_ONE = ("items", "additionalProperties", "not", "if", "then", "else", "contains", "propertyNames",
        "unevaluatedProperties", "unevaluatedItems", "contentSchema")
_MANY = ("anyOf", "oneOf", "allOf", "prefixItems")
_MAP = ("properties", "patternProperties", "$defs", "dependentSchemas")

_stream_models: dict[str, type[BaseModel]] = {}


def stream_item_model(spec: StreamSpec) -> type[BaseModel]:
    """A named root model for a stream's item union, so it gets one component schema."""
    model = _stream_models.get(spec.name)
    if model is None:
        # a RootModel parametrized at run time by the stream's item union, which no static checker can name
        model = type(spec.name, (RootModel[spec.item],), {"__module__": __name__})  # type: ignore[name-defined]
        _stream_models[spec.name] = model
    return model


def _default_version() -> str:
    try:
        return metadata.version("opencode-session")
    except metadata.PackageNotFoundError:
        return "0.0.0"


def _subschemas(schema: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for key in _ONE:
        sub = schema.get(key)
        if isinstance(sub, dict):
            yield sub
    for key in _MANY:
        for sub in schema.get(key) or ():
            if isinstance(sub, dict):
                yield sub
    for key in _MAP:
        for sub in (schema.get(key) or {}).values():
            if isinstance(sub, dict):
                yield sub


def _is_null(schema: Any) -> bool:
    return isinstance(schema, dict) and schema.get("type") == "null" and len(schema) == 1


def _literal(schema: dict[str, Any]) -> Any:
    if "const" in schema:
        return schema["const"]
    enum = schema.get("enum")
    if isinstance(enum, list) and len(enum) == 1:
        return enum[0]
    return _NO_LITERAL


_NO_LITERAL = object()


def _tidy(schema: dict[str, Any]) -> None:
    """Reference style, in place: optional means absent (never null), no generated titles, tags required."""
    for sub in list(_subschemas(schema)):
        _tidy(sub)
    schema.pop("title", None)
    if "default" in schema and schema["default"] is None:
        del schema["default"]
    for key in ("anyOf", "oneOf"):
        branches = schema.get(key)
        if not branches or not any(_is_null(b) for b in branches):
            continue
        rest = [b for b in branches if not _is_null(b)]
        del schema[key]
        if len(rest) == 1:
            for k, v in rest[0].items():
                schema.setdefault(k, v)
        elif rest:
            schema[key] = rest
    props = schema.get("properties")
    if isinstance(props, dict):
        # A literal tag with its own value as default is always on the wire: it is a discriminator, not an option.
        required = list(schema.get("required", []))
        for name, prop in props.items():
            if "default" in prop and prop["default"] == _literal(prop):
                del prop["default"]
                if name not in required:
                    required.append(name)
        if required:
            schema["required"] = required


def _refs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str):
            yield ref
        for key, value in node.items():
            if key == "discriminator" and isinstance(value, dict):
                yield from (v for v in (value.get("mapping") or {}).values() if isinstance(v, str))
            else:
                yield from _refs(value)
    elif isinstance(node, list):
        for item in node:
            yield from _refs(item)


def _name(ref: dict[str, Any]) -> str:
    target: str = ref["$ref"]
    return target[len(REF_PREFIX):]



_SCOPE_DESCRIPTION = ("The directory the client is scoped to: where the operation has a Location, its directory"
                      " unless `location[directory]` names it (differing values are refused); elsewhere ignored.")
_SCOPE_PARAMETERS: tuple[dict[str, Any], ...] = (
    {"name": "directory", "in": "query", "schema": {"type": "string"}, "required": False,
     "description": _SCOPE_DESCRIPTION},
    {"name": "x-opencode-directory", "in": "header", "schema": {"type": "string"}, "required": False,
     "description": _SCOPE_DESCRIPTION + " Percent-encoded."},
)

class _Builder:
    def __init__(self, endpoints: Iterable[Endpoint]) -> None:
        self.endpoints = tuple(endpoints)
        models: dict[type[BaseModel], None] = {}
        for ep in self.endpoints:
            for model in (ep.path_params, ep.query, ep.body, ep.response_model):
                if model is not None:
                    models[model] = None
            if ep.stream is not None:
                models[stream_item_model(ep.stream)] = None
            for err in ep.all_errors:
                models[err.body_model] = None
        mapping, top = models_json_schema([(m, "validation") for m in models], ref_template=REF_PREFIX + "{model}")
        self.refs = {model: mapping[(model, "validation")] for model in models}
        self.defs: dict[str, Any] = top.get("$defs", {})
        for schema in self.defs.values():
            _tidy(schema)
        for ep in self.endpoints:
            for err in ep.all_errors:
                self._fix_error_body(err.__name__, self.defs[_name(self.refs[err.body_model])])

    @staticmethod
    def _fix_error_body(tag: str, schema: dict[str, Any]) -> None:
        schema["properties"]["_tag"] = {"type": "string", "enum": [tag]}
        schema["required"] = ["_tag", *[r for r in schema.get("required", []) if r != "_tag"]]
        schema["additionalProperties"] = False

    def definition(self, model: type[BaseModel]) -> dict[str, Any]:
        schema: dict[str, Any] = self.defs[_name(self.refs[model])]
        return schema

    def resolve(self, schema: dict[str, Any]) -> dict[str, Any]:
        while "$ref" in schema:
            schema = self.defs[_name(schema)]
        return schema

    def parameters(self, ep: Endpoint) -> list[dict[str, Any]]:
        params: list[dict[str, Any]] = []
        for where, model in (("path", ep.path_params), ("query", ep.query)):
            if model is None:
                continue
            schema = self.definition(model)
            required = set(schema.get("required", []))
            for name, prop in schema["properties"].items():
                if where == "path" and name == ep.wildcard:
                    continue  # the path's trailing `*` stands for it
                param: dict[str, Any] = {"name": name, "in": where}
                target = self.resolve(prop)
                if where == "query" and target.get("type") == "object":
                    param["schema"] = copy.deepcopy(target)
                    param["style"] = "deepObject"
                    param["explode"] = True
                else:
                    param["schema"] = copy.deepcopy(prop)
                param["required"] = where == "path" or name in required
                params.append(param)
        names = {p["name"] for p in params}
        # the client's directory scope (what OpenCode's SDK adds to every request), declared as OpenCode declares
        # `directory` on its routes; where the operation has a Location it is that Location's directory
        params += [copy.deepcopy(p) for p in _SCOPE_PARAMETERS if p["name"] not in names]
        return params

    def responses(self, ep: Endpoint) -> dict[str, Any]:
        out: dict[str, Any] = {}
        kind = ep.result_kind
        if kind == "none":
            out["204"] = {"description": "<No Content>"}
        elif kind == "bytes":
            out[str(ep.success_status)] = {
                "description": "Success",
                "content": {BYTES_CONTENT_TYPE: {"schema": {"type": "string", "format": "binary"}}},
            }
        elif kind == "websocket":
            # what the reference declares for its upgrade; the connection itself is the WebSocket
            out[str(ep.success_status)] = {"description": "Success",
                                           "content": {JSON_CONTENT_TYPE: {"schema": {"type": "boolean"}}}}
        elif kind == "stream":
            assert ep.stream is not None
            out[str(ep.success_status)] = {
                "description": "Event stream",
                "content": {SSE_CONTENT_TYPE: {"itemSchema": self.frame(ep.stream)}},
            }
        else:
            assert ep.response_model is not None
            ref = self.refs[ep.response_model]
            # `{data}` envelopes are inlined like the reference; pages and records stay named.
            schema = copy.deepcopy(self.definition(ep.response_model)) if kind == "data" else dict(ref)
            out[str(ep.success_status)] = {"description": "Success", "content": {JSON_CONTENT_TYPE: {"schema": schema}}}
        for status in sorted({status for _, status in ep.declared_errors}):
            errors = ep.errors_for(status)
            refs = [dict(self.refs[e.body_model]) for e in errors]
            description = " | ".join(e.__name__ for e in errors)
            reasons = [r.reason for r in ep.refusals if r.error.status == status]
            if reasons:
                description += ". Also the answer to a well-formed request when " + "; or when ".join(reasons) + "."
            out[str(status)] = {
                "description": description,
                "content": {JSON_CONTENT_TYPE: {"schema": refs[0] if len(refs) == 1 else {"anyOf": refs}}},
            }
        return out

    def frame(self, stream: StreamSpec) -> dict[str, Any]:
        """One SSE frame as a reader parses it (OpenAPI 3.2's `itemSchema` of `text/event-stream`): its `data` is
        the JSON text of one stream item."""
        properties: dict[str, Any] = {
            "data": {"type": "string", "contentMediaType": JSON_CONTENT_TYPE,
                     "contentSchema": dict(self.refs[stream_item_model(stream)])},
        }
        if stream.sequenced:
            properties["id"] = {"type": "string", "pattern": "^[0-9]+$"}
        return {"type": "object", "properties": properties, "required": ["data"]}

    def at_pointer(self, schema: dict[str, Any], pointer: str) -> dict[str, Any]:
        """The schema of the value at a JSON pointer into instances of `schema` (a number steps into an array; in a
        union, every branch must agree)."""
        schema = self.resolve(schema)
        if not pointer:
            return schema
        part, _, rest = pointer.lstrip("/").partition("/")
        branches = schema.get("oneOf") or schema.get("anyOf")
        if branches:
            found = [self.at_pointer(branch, pointer) for branch in branches]
            if any(f != found[0] for f in found):
                raise ValueError(f"the union's branches disagree at {pointer}")
            return found[0]
        return self.at_pointer(schema["items"] if part.isdigit() else schema["properties"][part], rest)

    def links(self, ep: Endpoint, operations: dict[str, dict[str, Any]]) -> dict[str, Any]:
        """Links from `ep`'s answer to every operation that takes all the identifiers it provides (as path parameters
        of the same name and schema) and whose other path parameters `ep`'s own path fills."""
        source = operations[ep.operation_id]
        own = {p["name"]: self.resolve(p["schema"]) for p in source["parameters"] if p["in"] == "path"}
        body = source["responses"][str(ep.success_status)]["content"][JSON_CONTENT_TYPE]["schema"]
        provided = {name: ("$response.body#" + pointer, self.at_pointer(body, pointer))
                    for name, pointer in ep.provides}
        links: dict[str, Any] = {}
        for target, op in operations.items():
            path = {p["name"]: self.resolve(p["schema"]) for p in op["parameters"] if p["in"] == "path"}
            fills = {}
            for name, schema in path.items():
                if name in provided and provided[name][1] == schema:
                    fills[name] = provided[name][0]
                elif own.get(name) == schema:
                    fills[name] = "$request.path." + name
            if len(fills) == len(path) and all(name in fills for name in provided):
                links[target] = {"operationId": target, "parameters": fills}
        return links

    def operation(self, ep: Endpoint) -> dict[str, Any]:
        op: dict[str, Any] = {
            "tags": [ep.tag],
            "operationId": ep.operation_id,
            "summary": ep.summary,
        }
        if ep.description:
            op["description"] = ep.description
        op["parameters"] = self.parameters(ep)
        if ep.body is not None:
            op["requestBody"] = {
                # a blank body reads as `{}`: optional when the body has no required field
                "required": any(f.is_required() for f in ep.body.model_fields.values()),
                "content": {JSON_CONTENT_TYPE: {"schema": copy.deepcopy(self.definition(ep.body))}},
            }
        op["responses"] = self.responses(ep)
        if ep.websocket:
            op["x-websocket"] = True
        return op

    def document(self, title: str, version: str) -> dict[str, Any]:
        paths: dict[str, dict[str, Any]] = {}
        operations: dict[str, dict[str, Any]] = {}
        for ep in self.endpoints:
            methods = paths.setdefault(ep.path, {})
            if ep.method.lower() in methods:
                raise ValueError(f"two endpoints on {ep.method} {ep.path}")
            methods[ep.method.lower()] = operations[ep.operation_id] = self.operation(ep)
        for ep in self.endpoints:
            links = self.links(ep, operations) if ep.provides else {}
            if links:
                operations[ep.operation_id]["responses"][str(ep.success_status)]["links"] = links
        components = self._reachable(paths)
        return {
            "openapi": "3.1.0",
            "info": {"title": title, "version": version},
            "paths": paths,
            "components": {"schemas": components},
        }

    def _reachable(self, paths: dict[str, Any]) -> dict[str, Any]:
        """Only the components the paths use; request containers that were inlined drop out."""
        keep: dict[str, Any] = {}
        pending = [r for r in _refs(paths)]
        while pending:
            ref = pending.pop()
            if not ref.startswith(REF_PREFIX):
                raise ValueError(f"unsupported reference {ref}")
            name = ref[len(REF_PREFIX):]
            if name in keep:
                continue
            if name not in self.defs:
                raise ValueError(f"dangling reference {ref}")
            keep[name] = self.defs[name]
            pending.extend(_refs(keep[name]))
        return {name: keep[name] for name in sorted(keep)}


def render_openapi(
    endpoints: Iterable[Endpoint] = ENDPOINTS,
    *,
    title: str = "opencode-session V2 API",
    version: str | None = None,
) -> dict[str, Any]:
    """An OpenAPI 3.1 document for `endpoints`: every model in components, every reference resolvable."""
    return _Builder(endpoints).document(title, version or _default_version())
