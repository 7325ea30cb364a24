"""The OpenTelemetry SDK set up from TracingSettings: a tracer provider of its own (the global one is left to the
embedding application), batching spans to the OTLP/HTTP exporter, sampled as OTEL_TRACES_SAMPLER says."""

from __future__ import annotations

import logging

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.sampling import (
    ALWAYS_OFF,
    ALWAYS_ON,
    ParentBased,
    Sampler,
    TraceIdRatioBased,
)

from .settings import TracingSettings

log = logging.getLogger(__name__)


def _ratio(arg: str | None) -> float:
    try:
        ratio = float(arg) if arg is not None else 1.0
    except ValueError:
        log.warning("OTEL_TRACES_SAMPLER_ARG %r is not a ratio: sampling everything", arg)
        return 1.0
    return min(max(ratio, 0.0), 1.0)


def sampler_of(name: str, arg: str | None) -> Sampler:
    """The SDK's sampler OTEL_TRACES_SAMPLER names (an unknown name: the default, parent-based always-on)."""
    samplers: dict[str, Sampler] = {
        "always_on": ALWAYS_ON, "always_off": ALWAYS_OFF,
        "parentbased_always_on": ParentBased(ALWAYS_ON), "parentbased_always_off": ParentBased(ALWAYS_OFF)}
    if name in samplers:
        return samplers[name]
    if name == "traceidratio":
        return TraceIdRatioBased(_ratio(arg))
    if name == "parentbased_traceidratio":
        return ParentBased(TraceIdRatioBased(_ratio(arg)))
    log.warning("unknown OTEL_TRACES_SAMPLER %r: using parentbased_always_on", name)
    return ParentBased(ALWAYS_ON)


def headers_of(spec: str | None) -> dict[str, str] | None:
    if not spec:
        return None
    from opentelemetry.util.re import parse_env_headers

    return dict(parse_env_headers(spec, liberal=True))


def tracer_provider(settings: TracingSettings) -> TracerProvider:
    resource = Resource.create({SERVICE_NAME: settings.service_name})
    provider = TracerProvider(resource=resource, sampler=sampler_of(settings.sampler, settings.sampler_arg))
    exporter = OTLPSpanExporter(endpoint=settings.endpoint, headers=headers_of(settings.headers))
    provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider
