"""What the standard OTEL_* variables (and opencode.json's `experimental.openTelemetry`) ask of tracing."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

log = logging.getLogger(__name__)

DEFAULT_SERVICE_NAME = "opencode-session"
_TRUE = ("true", "1", "yes", "on")


@dataclass(frozen=True)
class TracingSettings:
    """What the standard OTEL_* variables (and opencode.json's `experimental.openTelemetry`) ask of tracing."""

    endpoint: str          # the OTLP/HTTP traces URL
    metrics_endpoint: str | None  # the OTLP/HTTP metrics URL; None: metrics are not exported (OTEL_METRICS_EXPORTER)
    service_name: str
    sampler: str           # OTEL_TRACES_SAMPLER's value (the SDK's names)
    sampler_arg: str | None
    headers: str | None    # OTEL_EXPORTER_OTLP_(TRACES_)HEADERS, as the SDK parses it
    capture_content: bool  # OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT


def tracing_settings(env: Mapping[str, str], configured: bool = False) -> TracingSettings | None:
    """Tracing's settings when the environment (or `configured`, opencode.json's switch) turns it on; None when off.
    On: an OTLP endpoint is set, or OTEL_TRACES_EXPORTER names `otlp`, or the config asks; OTEL_SDK_DISABLED=true or
    OTEL_TRACES_EXPORTER=none keeps it off whatever else is set."""
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    exporters = [e.strip().lower() for e in env.get("OTEL_TRACES_EXPORTER", "").split(",") if e.strip()]
    if "none" in exporters:
        return None
    traces_endpoint = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
    base = env.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
    if not (traces_endpoint or base or "otlp" in exporters or configured):
        return None
    protocol = (env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or env.get("OTEL_EXPORTER_OTLP_PROTOCOL")
                or "http/protobuf").strip()
    if protocol != "http/protobuf":
        log.warning("OTLP protocol %r is not supported here: traces are sent as http/protobuf", protocol)
    endpoint = traces_endpoint or (base or "http://localhost:4318").rstrip("/") + "/v1/traces"
    metrics_exporters = [e.strip().lower() for e in env.get("OTEL_METRICS_EXPORTER", "otlp").split(",")]
    metrics_endpoint = None
    if "otlp" in metrics_exporters:
        metrics_endpoint = env.get("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "").strip() or \
            (base or "http://localhost:4318").rstrip("/") + "/v1/metrics"
    return TracingSettings(
        endpoint=endpoint, metrics_endpoint=metrics_endpoint,
        service_name=env.get("OTEL_SERVICE_NAME", "").strip() or DEFAULT_SERVICE_NAME,
        sampler=env.get("OTEL_TRACES_SAMPLER", "").strip().lower() or "parentbased_always_on",
        sampler_arg=env.get("OTEL_TRACES_SAMPLER_ARG"),
        headers=env.get("OTEL_EXPORTER_OTLP_TRACES_HEADERS") or env.get("OTEL_EXPORTER_OTLP_HEADERS"),
        capture_content=env.get("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "").strip().lower() in _TRUE)
