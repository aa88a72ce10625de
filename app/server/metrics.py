"""/metrics through prometheus_client: a registry per server holding the HTTP counters it
counts itself, and a collector that reads the engine's MetricsSnapshot at scrape time
(engine gauges and counters, latency percentiles, host and sampling time per decode step,
TTFT / inter-token histograms once the snapshot carries their buckets, and who uses the
engine by kind of owner)."""

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


# One engine's metrics in a scrape: the model's name (None: the server's one model, whose
# families carry no label, as always) and its snapshot.
Lane = tuple[str | None, MetricsSnapshot]


class EngineCollector(Collector):
    """Reads each engine's snapshot per scrape: one engine's unlabelled, or, for a server of
    several models (`chorus serve --models`), one sample per loaded model labelled
    model="name" in the same families. An engine still loading (or gone) yields nothing."""

    def __init__(self, snapshot: Callable[[], MetricsSnapshot | None] | None = None,
                 lanes: Callable[[], list[Lane]] | None = None) -> None:
        if lanes is None:
            assert snapshot is not None, "an engine's snapshot, or the lanes of several"

            def one() -> list[Lane]:
                m = snapshot()
                return [] if m is None else [(None, m)]  # None: a server's engine, whose counters are the server's

            lanes = one
        self._lanes = lanes

    def collect(self) -> Iterator[Metric]:
        try:
            lanes = self._lanes()
        except EngineError:
            return
        if not lanes:
            return
        labels = [] if all(name is None for name, _ in lanes) else ["model"]
        samples = [([] if name is None else [name], m) for name, m in lanes]

        def family(kind, name: str, doc: str, field: str) -> Iterator[Metric]:
            metric = kind(name, doc, labels=labels)
            for values, m in samples:
                if (value := getattr(m, field, None)) is not None:
                    metric.add_metric(values, float(value))
            if metric.samples:  # a value no engine has yet (no request: no percentile) is left out
                yield metric

        for name, doc, field in GAUGES + PERCENTILES + STEP_TIMES:
            yield from family(GaugeMetricFamily, name, doc, field)
        for name, doc, field in COUNTERS + OPTIONAL_COUNTERS:
            yield from family(CounterMetricFamily, name, doc, field)
        yield from histograms(samples, labels)
        yield from owner_kinds(samples, labels)


# Who uses the engine (its lanes, inference/core/lanes.py), summed by kind of owner: chat
# (the desktop's tabs), api, job, title, other. By kind only: a lane's name is a chat's title
# or a client's user agent, which an API key holder has no business reading, and a label per
# title would grow the series without bound.
OWNER_GAUGES = (  # name, help, Lane field
    ("chorus_owner_tokens_per_second", "Tokens generated per second (5 s window), by kind of owner", "tok_s"),
    ("chorus_owner_sequences", "Sequences in the batch, by kind of owner", "rows"),
    ("chorus_owner_requests_queued", "Requests waiting for a sequence, by kind of owner", "queued"),
    ("chorus_owner_kv_cells", "KV cells held (a shared prefix counts for each), by kind of owner", "kv_cells"),
)


def owner_kinds(samples: list[tuple[list[str], MetricsSnapshot]], labels: list[str]) -> Iterator[Metric]:
    for name, doc, field in OWNER_GAUGES:
        metric = GaugeMetricFamily(name, doc, labels=[*labels, "kind"])
        for values, m in samples:
            totals: dict[str, float] = {}
            for lane in getattr(m, "lanes", ()) or ():
                totals[lane.kind] = totals.get(lane.kind, 0.0) + float(getattr(lane, field))
            for kind, value in totals.items():
                metric.add_metric([*values, kind], value)
        if metric.samples:
            yield metric


def histograms(samples: list[tuple[list[str], MetricsSnapshot]], labels: list[str]) -> Iterator[Metric]:
    """Prometheus histograms from the snapshots' cumulative buckets (upper bound in
    seconds, count), when the engines report them."""
    for name, doc, buckets_of, sum_of in (
        ("chorus_ttft_seconds", "Time to first token since the engine started", "ttft_buckets", "ttft_sum_s"),
        ("chorus_itl_seconds", "Inter-token latency since the engine started", "itl_buckets", "itl_sum_s"),
    ):
        metric = HistogramMetricFamily(name, doc, labels=labels)
        for values, m in samples:
            buckets = getattr(m, buckets_of)
            if buckets:  # an engine reporting none (a remote one) exports no histogram
                metric.add_metric(values, [(_bound(le), count) for le, count in buckets], getattr(m, sum_of))
        if metric.samples:
            yield metric


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
