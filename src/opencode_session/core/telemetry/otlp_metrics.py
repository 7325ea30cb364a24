"""The Prometheus metrics exported over OTLP/HTTP as well: OpenTelemetry observable instruments read the registry
at each export (counters as counters, gauges as gauges, a histogram as its `_count` and `_sum` counters), sent by
the SDK's periodic reader (OTEL_METRIC_EXPORT_INTERVAL) to the OTLP metrics endpoint."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.metrics import CallbackOptions, Observation
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.resources import SERVICE_NAME, Resource

from .metrics import Metrics
from .settings import TracingSettings
from .tracing import headers_of


def _reading(metrics: Metrics, family: str, sample: str) -> Callable[[CallbackOptions], Iterable[Observation]]:
    def observe(_options: CallbackOptions) -> Iterable[Observation]:
        for collected in metrics.registry.collect():
            if collected.name == family:
                return [Observation(s.value, dict(s.labels)) for s in collected.samples if s.name == sample]
        return []

    return observe


def export_metrics(metrics: Metrics, settings: TracingSettings) -> MeterProvider:
    reader = PeriodicExportingMetricReader(OTLPMetricExporter(endpoint=settings.metrics_endpoint,
                                                              headers=headers_of(settings.headers)))
    provider = MeterProvider(resource=Resource.create({SERVICE_NAME: settings.service_name}), metric_readers=[reader])
    meter = provider.get_meter("opencode_session")
    for family in metrics.registry.collect():
        name, text = family.name, family.documentation
        if family.type == "counter":
            meter.create_observable_counter(name, [_reading(metrics, name, name + "_total")], description=text)
        elif family.type == "gauge":
            meter.create_observable_gauge(name, [_reading(metrics, name, name)], description=text)
        elif family.type == "histogram":
            for part in ("_count", "_sum"):
                meter.create_observable_counter(name + part, [_reading(metrics, name, name + part)],
                                                description=text)
    return provider
