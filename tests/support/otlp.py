"""A loopback OTLP/HTTP collector for tests: it accepts `POST /v1/traces` and `/v1/metrics` (protobuf, optionally
gzipped), decodes each export with opentelemetry-proto, and keeps every span and metric point for tests to wait on."""

from __future__ import annotations

import gzip
import threading
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)


def _value(any_value: Any) -> Any:
    kind = any_value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in any_value.array_value.values]
    return getattr(any_value, kind) if kind else None


@dataclass
class ReceivedSpan:
    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    kind: int
    attributes: dict[str, Any]
    events: list[tuple[str, dict[str, Any]]]
    status_code: int
    resource: dict[str, Any]


class OtlpReceiver:
    def __init__(self) -> None:
        self.spans: list[ReceivedSpan] = []
        # metric name -> its latest data points as (attributes, value): sums and gauges as they are, a histogram's
        # count
        self.metrics: dict[str, list[tuple[dict[str, Any], float]]] = {}
        self.changed = threading.Condition()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                if self.path == "/v1/traces":
                    receiver._received(ExportTraceServiceRequest.FromString(body))
                    answer = ExportTraceServiceResponse().SerializeToString()
                elif self.path == "/v1/metrics":
                    receiver._measured(ExportMetricsServiceRequest.FromString(body))
                    answer = ExportMetricsServiceResponse().SerializeToString()
                else:
                    self.send_response(404)
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *_args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def _received(self, request: ExportTraceServiceRequest) -> None:
        spans = []
        for resource_spans in request.resource_spans:
            resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
            for scope in resource_spans.scope_spans:
                for s in scope.spans:
                    spans.append(ReceivedSpan(
                        name=s.name, trace_id=s.trace_id.hex(), span_id=s.span_id.hex(),
                        parent_span_id=s.parent_span_id.hex(), kind=s.kind,
                        attributes={a.key: _value(a.value) for a in s.attributes},
                        events=[(e.name, {a.key: _value(a.value) for a in e.attributes}) for e in s.events],
                        status_code=s.status.code, resource=resource))
        with self.changed:
            self.spans.extend(spans)
            self.changed.notify_all()

    def _measured(self, request: ExportMetricsServiceRequest) -> None:
        latest: dict[str, list[tuple[dict[str, Any], float]]] = {}
        for resource_metrics in request.resource_metrics:
            for scope in resource_metrics.scope_metrics:
                for metric in scope.metrics:
                    kind = metric.WhichOneof("data")
                    points = getattr(metric, kind).data_points if kind else []
                    latest[metric.name] = [
                        ({a.key: _value(a.value) for a in p.attributes},
                         float(p.count if kind == "histogram" else (p.as_double or p.as_int)))
                        for p in points]
        with self.changed:
            self.metrics.update(latest)
            self.changed.notify_all()

    def wait_for_metrics(self, done: Callable[[dict[str, list[tuple[dict[str, Any], float]]]], bool],
                         timeout: float = 20) -> dict[str, list[tuple[dict[str, Any], float]]]:
        with self.changed:
            if not self.changed.wait_for(lambda: done(self.metrics), timeout):
                raise AssertionError(f"metrics never arrived; got {sorted(self.metrics)}")
            return dict(self.metrics)

    def wait_for(self, done: Callable[[list[ReceivedSpan]], bool], timeout: float = 20) -> list[ReceivedSpan]:
        """The spans received so far, once `done(spans)` holds (AssertionError after `timeout` seconds)."""
        with self.changed:
            if not self.changed.wait_for(lambda: done(self.spans), timeout):
                raise AssertionError(f"spans never arrived; got {[s.name for s in self.spans]}")
            return list(self.spans)

    def __enter__(self) -> OtlpReceiver:
        self.thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
