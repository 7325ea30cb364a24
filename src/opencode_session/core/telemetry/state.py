"""The process's switchboard: whether tracing and metrics are on, and what they record with. Nothing here imports
OpenTelemetry or prometheus_client; `enable_*` import them when something is configured."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .settings import TracingSettings

if TYPE_CHECKING:
    from .metrics import Metrics

log = logging.getLogger(__name__)


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
        self._meters: Any = None  # the OpenTelemetry MeterProvider exporting the metrics over OTLP, when it does
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
            if settings.metrics_endpoint is not None:  # the metrics go the same way, so counting starts now
                from .otlp_metrics import export_metrics

                self._meters = export_metrics(self._metrics(), settings)
            self._update()
            return True

    def flush(self, timeout_ms: int = 5000) -> None:
        """Export the spans ended so far (a host that closes its runtime, say)."""
        if self._provider is not None:
            self._provider.force_flush(timeout_ms)
        if self._meters is not None:
            self._meters.force_flush(timeout_ms)

    def disable_tracing(self) -> None:
        """Export what is left and stop tracing (tests, between configurations)."""
        with self._lock:
            provider, self._provider, self.tracer = self._provider, None, None
            meters, self._meters = self._meters, None
            self.capture_content = False
            self._update()
        if provider is not None:
            provider.shutdown()
        if meters is not None:
            meters.shutdown()

    # --- metrics -----------------------------------------------------------------------------------------------

    def enable_metrics(self) -> Metrics:
        """Start counting (idempotent); imports prometheus_client."""
        with self._lock:
            return self._metrics()

    def _metrics(self) -> Metrics:
        if self.metrics is None:
            from .metrics import Metrics

            self.metrics = Metrics(self.live)
            self._update()
        return self.metrics


telemetry = Telemetry()
