"""The process's switchboard: whether tracing and metrics are on, and what they record with. Nothing here imports
OpenTelemetry or prometheus_client; `enable_*` import them when something is configured."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .metrics import Metrics

log = logging.getLogger(__name__)

DEFAULT_SERVICE_NAME = "opencode-session"
_TRUE = ("true", "1", "yes", "on")


@dataclass(frozen=True)
class TracingSettings:
    """What the standard OTEL_* variables (and opencode.json's `experimental.openTelemetry`) ask of tracing."""

    endpoint: str          # the OTLP/HTTP traces URL
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
    return TracingSettings(
        endpoint=endpoint,
        service_name=env.get("OTEL_SERVICE_NAME", "").strip() or DEFAULT_SERVICE_NAME,
        sampler=env.get("OTEL_TRACES_SAMPLER", "").strip().lower() or "parentbased_always_on",
        sampler_arg=env.get("OTEL_TRACES_SAMPLER_ARG"),
        headers=env.get("OTEL_EXPORTER_OTLP_TRACES_HEADERS") or env.get("OTEL_EXPORTER_OTLP_HEADERS"),
        capture_content=env.get("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "").strip().lower() in _TRUE)


class Telemetry:
    """`tracer` is an OpenTelemetry tracer while tracing is on (else None); `metrics` the Prometheus metrics once
    counting started (at start-up when configured, else at the first scrape of GET /metrics). `on` is either."""

    def __init__(self) -> None:
        self.tracer: Any = None
        self.metrics: Metrics | None = None
        self.on = False
        self.capture_content = False
        self.settings: TracingSettings | None = None  # what tracing was enabled with
        self._provider: Any = None
        self._lock = threading.Lock()
        self.live: dict[str, list[Callable[[], float]]] = {}  # gauges read at scrape time, by metric name

    def watch(self, name: str, source: Callable[[], float]) -> Callable[[], None]:
        """Report `source()` as (a share of) the gauge `name` while metrics are scraped; returns its removal."""
        sources = self.live.setdefault(name, [])
        sources.append(source)
        return lambda: sources.remove(source) if source in sources else None

    def _update(self) -> None:
        self.on = self.tracer is not None or self.metrics is not None

    # --- tracing -----------------------------------------------------------------------------------------------

    def enable_tracing(self, settings: TracingSettings) -> bool:
        """Start exporting spans (once per process: a later call keeps the first settings). False when the SDK is
        not installed (the `otel` extra)."""
        with self._lock:
            if self.tracer is not None:
                return True
            try:
                from .tracing import tracer_provider
            except ImportError as missing:
                log.warning("tracing is configured but OpenTelemetry is not installed (opencode-session[otel]): %s",
                            missing)
                return False
            self._provider = tracer_provider(settings)
            self.tracer = self._provider.get_tracer("opencode_session")
            self.capture_content = settings.capture_content
            self.settings = settings
            self._update()
            return True

    def flush(self, timeout_ms: int = 5000) -> None:
        """Export the spans ended so far (a host that closes its runtime, say)."""
        if self._provider is not None:
            self._provider.force_flush(timeout_ms)

    def disable_tracing(self) -> None:
        """Export what is left and stop tracing (tests, between configurations)."""
        with self._lock:
            provider, self._provider, self.tracer = self._provider, None, None
            self.capture_content = False
            self._update()
        if provider is not None:
            provider.shutdown()

    # --- metrics -----------------------------------------------------------------------------------------------

    def enable_metrics(self) -> Metrics:
        """Start counting (idempotent); imports prometheus_client."""
        with self._lock:
            if self.metrics is None:
                from .metrics import Metrics

                self.metrics = Metrics(self.live)
                self._update()
            return self.metrics


telemetry = Telemetry()
