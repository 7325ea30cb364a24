"""The Prometheus metrics (prometheus_client, in a registry of their own) and their text at GET /metrics. Labels are
bounded: provider, model, tool, outcome and reason names, never session or message IDs."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

# seconds: provider latency spans sub-second fakes to minutes-long generations; commits are milliseconds
_PROVIDER_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
_TOOL_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30, 120, 600)
_COMMIT_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1)


class _Live(Collector):
    """Gauges read when scraped from what the hosts in this process report (`Metrics.live`): summed over them."""

    def __init__(self, sources: dict[str, list[Callable[[], float]]]) -> None:
        self.sources = sources

    def collect(self) -> Iterator[Metric]:
        for name, (help_text, _) in LIVE_GAUGES.items():
            gauge = GaugeMetricFamily(name, help_text)
            gauge.add_metric([], sum(source() for source in self.sources.get(name, ())))
            yield gauge


LIVE_GAUGES = {
    "ocs_active_executions": ("Sessions executing now", None),
    "ocs_sse_subscribers": ("Open event streams (SSE readers)", None),
}


class Metrics:
    def __init__(self, sources: dict[str, list[Callable[[], float]]] | None = None) -> None:
        r = self.registry = CollectorRegistry(auto_describe=True)
        self.prompts_admitted = Counter("ocs_prompts_admitted", "Prompts admitted (new ones, not retries)",
                                        ["delivery"], registry=r)
        self.steps = Counter("ocs_steps", "Steps by outcome (ended, failed, retry, overflow)", ["outcome"],
                             registry=r)
        self.provider_requests = Counter("ocs_provider_requests", "Provider requests (Physical Attempts)",
                                         ["provider", "model", "outcome"], registry=r)
        self.provider_duration = Histogram("ocs_provider_request_duration_seconds",
                                           "A provider request, from sending it to its stream's end",
                                           ["provider", "model"], buckets=_PROVIDER_BUCKETS, registry=r)
        self.provider_ttft = Histogram("ocs_provider_time_to_first_token_seconds",
                                       "From sending a provider request to its first output",
                                       ["provider", "model"], buckets=_PROVIDER_BUCKETS, registry=r)
        self.retries = Counter("ocs_provider_retries", "Provider retries scheduled, by the failure's type",
                               ["reason"], registry=r)
        self.tokens = Counter("ocs_tokens", "Tokens by model and kind (input, output, reasoning, cache_read, "
                              "cache_write)", ["model", "kind"], registry=r)
        self.cost = Counter("ocs_cost_usd", "Cost in US dollars by model", ["model"], registry=r)
        self.tool_calls = Counter("ocs_tool_calls", "Local tool calls by tool and outcome (success, error)",
                                  ["tool", "outcome"], registry=r)
        self.tool_duration = Histogram("ocs_tool_call_duration_seconds", "A local tool call's run",
                                       ["tool", "outcome"], buckets=_TOOL_BUCKETS, registry=r)
        self.sse_dropped = Counter("ocs_sse_dropped_readers", "Event streams cut off because the reader stalled",
                                   registry=r)
        self.store_commit = Histogram("ocs_store_commit_duration_seconds", "One store commit (a batch of writes)",
                                      buckets=_COMMIT_BUCKETS, registry=r)
        self.lease_takeovers = Counter("ocs_lease_takeovers", "Session leases this host took over from another",
                                       registry=r)
        self.fenced_writes = Counter("ocs_fenced_writes", "Writes refused because their execution lost its lease",
                                     registry=r)
        self.live = sources if sources is not None else {}
        r.register(_Live(self.live))

    def text(self) -> bytes:
        """The Prometheus text exposition of every metric."""
        return generate_latest(self.registry)
