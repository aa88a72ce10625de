"""/metrics through prometheus_client: a registry per server holding the HTTP counters it
counts itself, and a collector that reads the engine's MetricsSnapshot at scrape time
(engine gauges and counters, latency percentiles, host and sampling time per decode step,
and TTFT / inter-token histograms once the snapshot carries their buckets)."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from inference import EngineError, MetricsSnapshot

GAUGES = (  # name, help, snapshot field
    ("chorus_prefill_tokens_per_second", "Prompt tokens computed per second (10 s window)", "prefill_tok_s"),
    ("chorus_decode_tokens_per_second", "Tokens decoded per second (10 s window)", "decode_tok_s"),
    ("chorus_batch_sequences", "Sequences in the last engine step", "last_step_seqs"),
    ("chorus_requests_running", "Engine requests admitted and running", "running"),
    ("chorus_requests_queued", "Engine requests waiting for a sequence", "queued"),
    ("chorus_kv_cells_used", "KV cache cells in use", "kv_cells_used"),
    ("chorus_kv_cells_total", "KV cache cells in all", "kv_cells_total"),
    ("chorus_kv_cells_shared", "KV cache cells shared between sequences", "kv_cells_shared"),
)
COUNTERS = (  # exposed with a _total suffix
    ("chorus_prefix_hits", "Requests that reused a cached prompt prefix", "prefix_hits"),
    ("chorus_prompt_tokens_saved", "Prompt tokens reused from the prefix cache", "prompt_tokens_saved"),
    ("chorus_prompt_tokens_computed", "Prompt tokens run through prefill", "prompt_tokens_computed"),
    ("chorus_generated_tokens", "Tokens generated", "generated_tokens"),
    ("chorus_requests_finished", "Engine requests finished", "requests_finished"),
    ("chorus_requests_failed", "Engine requests that ended in an error", "requests_failed"),
    ("chorus_preemptions", "Requests preempted to make room in the KV cache", "preemptions"),
)
# Counters a snapshot may lack (an engine of another version, a stand-in): exported when present.
OPTIONAL_COUNTERS = (
    ("chorus_prompt_tokens_restored", "Prompt tokens loaded from the disk prompt cache instead of computed",
     "prompt_tokens_restored"),
    ("chorus_draft_tokens", "Speculative draft tokens verified", "draft_tokens"),
    ("chorus_draft_tokens_accepted", "Speculative draft tokens kept after verification", "draft_tokens_accepted"),
    ("chorus_images_encoded", "Images encoded by the vision projector (each distinct image once)", "images_encoded"),
)
PERCENTILES = (
    ("chorus_ttft_seconds_p50", "Time to first token, median of recent requests", "ttft_p50_s"),
    ("chorus_ttft_seconds_p95", "Time to first token, 95th percentile of recent requests", "ttft_p95_s"),
    ("chorus_itl_seconds_p50", "Inter-token latency, median of recent tokens", "itl_p50_s"),
    ("chorus_itl_seconds_p95", "Inter-token latency, 95th percentile of recent tokens", "itl_p95_s"),
)

STEP_TIMES = (  # decode-only steps; absent until there was one (and from engines that do not time them)
    ("chorus_step_host_seconds_mean", "Host time per decode step (the step less llama_decode), mean", "host_s_mean"),
    ("chorus_step_host_seconds_p50", "Host time per decode step, median of recent steps", "host_s_p50"),
    ("chorus_step_host_seconds_p95", "Host time per decode step, 95th percentile of recent steps", "host_s_p95"),
    ("chorus_step_sample_seconds_mean", "Sampling time per decode step (part of the host time), mean",
     "sample_s_mean"),
    ("chorus_step_seconds_mean", "Decode step time, llama_decode included, mean", "step_s_mean"),
)


class EngineCollector(Collector):
    """Reads one snapshot per scrape; an engine still loading (or gone) yields nothing."""

    def __init__(self, snapshot: Callable[[], MetricsSnapshot | None]) -> None:
        self._snapshot = snapshot

    def collect(self) -> Iterator[Metric]:
        try:
            m = self._snapshot()
        except EngineError:
            return
        if m is None:  # a server's engine: its counters are the server's
            return
        for name, doc, field in GAUGES:
            yield GaugeMetricFamily(name, doc, value=float(getattr(m, field)))
        for name, doc, field in COUNTERS:
            yield CounterMetricFamily(name, doc, value=float(getattr(m, field)))
        for name, doc, field in OPTIONAL_COUNTERS:
            if (count := getattr(m, field, None)) is not None:
                yield CounterMetricFamily(name, doc, value=float(count))
        for name, doc, field in PERCENTILES:
            value = getattr(m, field)
            if value is not None:
                yield GaugeMetricFamily(name, doc, value=value)
        for name, doc, field in STEP_TIMES:
            value = getattr(m, field, None)
            if value is not None:
                yield GaugeMetricFamily(name, doc, value=value)
        yield from histograms(m)


def histograms(m: MetricsSnapshot) -> Iterator[Metric]:
    """Prometheus histograms from the snapshot's cumulative buckets (upper bound in
    seconds, count), when the engine reports them."""
    for name, doc, buckets, sum_s in (
        ("chorus_ttft_seconds", "Time to first token since the engine started", m.ttft_buckets, m.ttft_sum_s),
        ("chorus_itl_seconds", "Inter-token latency since the engine started", m.itl_buckets, m.itl_sum_s),
    ):
        if buckets:  # an engine reporting none (a remote one) exports no histogram
            yield HistogramMetricFamily(name, doc, buckets=[(_bound(le), count) for le, count in buckets],
                                        sum_value=sum_s)


def _bound(le: float) -> str:
    return "+Inf" if math.isinf(le) else repr(float(le))


# Any token is a method to HTTP: the label keeps to these (and "other"), so that a client
# cannot grow the registry without bound. Likewise routes: a path no route matched is
# "unmatched", never the path itself.
METHODS = frozenset({"GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"})


class HttpMetrics:
    """The server's own counts: requests by route, method and status; requests in flight."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.requests = Counter("chorus_http_requests", "HTTP requests answered", ["route", "method", "status"],
                                registry=registry)
        self.in_flight = Gauge("chorus_http_requests_in_flight", "HTTP requests being answered", registry=registry)


class HttpMetricsMiddleware:
    """Counts every request, whatever answers it (a route, a refusal, an error)."""

    def __init__(self, app: ASGIApp, metrics: HttpMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500

        async def counting_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        self.metrics.in_flight.inc()
        try:
            await self.app(scope, receive, counting_send)
        finally:
            self.metrics.in_flight.dec()
            route = scope.get("route")
            label = getattr(route, "path", "unmatched")
            method = scope["method"] if scope["method"] in METHODS else "other"
            self.metrics.requests.labels(label, method, str(status)).inc()
