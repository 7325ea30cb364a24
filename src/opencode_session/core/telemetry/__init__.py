"""Observability: OpenTelemetry traces and Prometheus metrics, each off (and not imported) until configured; the
instrumentation points core calls (`hooks`) are a no-op check while both are off."""

from __future__ import annotations

from .settings import TracingSettings, tracing_settings
from .state import telemetry

__all__ = ["TracingSettings", "telemetry", "tracing_settings"]
