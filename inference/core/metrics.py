"""Counters and rolling rates of the engine, read by the live panel and the benchmark.

Written only by the engine thread; readers get an immutable MetricsSnapshot.
"""

from __future__ import annotations

import bisect
import math
import time
from collections import deque
from dataclasses import dataclass, field
from typing import NamedTuple

from inference.core.lanes import Lane

WINDOW_S = 10.0
LATENCY_SAMPLES = 4096
# Upper bounds (seconds) of the TTFT and inter-token latency histograms, as Prometheus
# buckets: fine where tokens come (ms), coarse out to a minute of queueing.
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75,
                   1.0, 2.5, 5.0, 10.0, 30.0, 60.0, math.inf)


def percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0..100); None for no data."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, int(round(q / 100.0 * (len(ordered) - 1)))))
    return ordered[rank]


class StepRecord(NamedTuple):
    end_s: float
    duration_s: float
    prefill_tokens: int
    decode_tokens: int
    seqs: int


@dataclass(frozen=True, slots=True)
class MetricsSnapshot:
    time_s: float
    prefill_tok_s: float  # rolling window
    decode_tok_s: float
    seqs_per_step: float
    tokens_per_step: float
    last_step_seqs: int
    last_step_tokens: int
    max_step_seqs: int
    queued: int
    running: int
    kv_cells_used: int
    kv_cells_total: int
    kv_cells_shared: int
    kv_cells_peak: int
    seqs_active: int
    seqs_idle: int
    seqs_pinned: int
    kv_evictions: int
    prefix_lookups: int
    prefix_hits: int
    prompt_tokens_total: int  # prompt tokens of all admitted requests
    prompt_tokens_saved: int  # of those, reused from the cache
    prompt_tokens_computed: int  # tokens actually run through prefill (incl. recompute)
    generated_tokens: int
    steps: int
    decode_only_tokens: int  # tokens generated in steps that held no prompt tokens
    decode_only_s: float  # time of those steps
    requests_finished: int
    requests_failed: int
    preemptions: int
    ttft_p50_s: float | None
    ttft_p95_s: float | None
    itl_p50_s: float | None
    itl_p95_s: float | None
    # Since the engine started (reset_latency keeps them): cumulative (upper bound in
    # seconds, count of samples <= it), the last bound inf, plus sum and count, as a
    # Prometheus histogram exports them.
    # Decode-only steps, timed over the whole EngineCore.step(): host time is the part
    # outside llama_decode, sampling its part spent in the samplers (None: no such step).
    host_s_mean: float | None = None
    host_s_p50: float | None = None  # the median: what a typical step costs, outliers aside
    host_s_p95: float | None = None
    sample_s_mean: float | None = None
    step_s_mean: float | None = None
    ttft_buckets: tuple[tuple[float, int], ...] = ()
    ttft_sum_s: float = 0.0
    ttft_count: int = 0
    itl_buckets: tuple[tuple[float, int], ...] = ()
    itl_sum_s: float = 0.0
    itl_count: int = 0
    # The disk prompt cache (since the engine started): prompt tokens loaded from disk
    # instead of computed, loads, files found bad, files written.
    prompt_tokens_restored: int = 0
    kv_restores: int = 0
    kv_restore_failures: int = 0
    kv_disk_saves: int = 0
    # The vision projector (since the engine started): images encoded (each distinct image
    # once while it stays in the projector's cache) and the seconds that took.
    images_encoded: int = 0
    image_encode_s: float = 0.0
    images_loaded: int = 0  # rows read from the projector's folder instead (after a restart)
    # Speculative decoding (since the engine started): draft tokens verified, and kept.
    draft_tokens: int = 0
    draft_tokens_accepted: int = 0
    # Who uses the engine: one lane per owner with work in it or tokens in its window
    # (core/lanes.py), the tabs' first.
    lanes: tuple[Lane, ...] = ()

    @property
    def prefix_hit_rate(self) -> float:
        return self.prefix_hits / self.prefix_lookups if self.prefix_lookups else 0.0

    @property
    def decode_only_tok_s(self) -> float:
        return self.decode_only_tokens / self.decode_only_s if self.decode_only_s else 0.0


@dataclass(slots=True)
class LatencyHistogram:
    """Counts of latencies per bucket (not cumulative here), their sum and count."""

    bounds: tuple[float, ...] = LATENCY_BUCKETS
    counts: list[int] = field(default_factory=lambda: [0] * len(LATENCY_BUCKETS))
    sum_s: float = 0.0
    count: int = 0

    def observe(self, seconds: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, seconds)] += 1  # le: a bound counts itself
        self.sum_s += seconds
        self.count += 1

    def cumulative(self) -> tuple[tuple[float, int], ...]:
        total = 0
        out = []
        for bound, n in zip(self.bounds, self.counts):
            total += n
            out.append((bound, total))
        return tuple(out)


class EngineMetrics:
    def __init__(self, clock=time.perf_counter) -> None:
        self._clock = clock
        self._steps: deque[StepRecord] = deque()
        self._ttft: deque[float] = deque(maxlen=LATENCY_SAMPLES)
        self._itl: deque[float] = deque(maxlen=LATENCY_SAMPLES)
        self.steps = 0
        self.max_step_seqs = 0
        self.prefix_lookups = 0
        self.prefix_hits = 0
        self.prompt_tokens_total = 0
        self.prompt_tokens_saved = 0
        self.prompt_tokens_computed = 0
        self.generated_tokens = 0
        self.decode_only_tokens = 0
        self.decode_only_s = 0.0
        self.requests_finished = 0
        self.requests_failed = 0
        self.preemptions = 0
        self.draft_tokens = 0
        self.draft_tokens_accepted = 0
        self.kv_cells_peak = 0
        self.host_steps = 0
        self.host_s_sum = 0.0
        self.sample_s_sum = 0.0
        self.step_s_sum = 0.0
        self._host: deque[float] = deque(maxlen=LATENCY_SAMPLES)  # the recent ones, for p95
        self.ttft_histogram = LatencyHistogram()
        self.itl_histogram = LatencyHistogram()

    def reset_latency(self) -> None:
        """Forget latency samples and counters (a benchmark starts its clock); the
        histograms stay: a Prometheus histogram only ever grows."""
        fresh = EngineMetrics(self._clock)
        fresh.kv_cells_peak = 0
        fresh.ttft_histogram, fresh.itl_histogram = self.ttft_histogram, self.itl_histogram
        self.__dict__.update(fresh.__dict__)

    def record_admission(self, prompt_tokens: int, cached_tokens: int) -> None:
        self.prefix_lookups += 1
        self.prompt_tokens_total += prompt_tokens
        self.prompt_tokens_saved += cached_tokens
        if cached_tokens:
            self.prefix_hits += 1

    def record_step(
        self, duration_s: float, prefill_tokens: int, decode_tokens: int, seqs: int, sampled: int
    ) -> None:
        now = self._clock()
        self.steps += 1
        self.max_step_seqs = max(self.max_step_seqs, seqs)
        self.prompt_tokens_computed += prefill_tokens
        self.generated_tokens += sampled
        if prefill_tokens == 0:
            self.decode_only_tokens += sampled
            self.decode_only_s += duration_s
        self._steps.append(StepRecord(now, duration_s, prefill_tokens, decode_tokens, seqs))
        while self._steps and self._steps[0].end_s < now - WINDOW_S:
            self._steps.popleft()

    def record_host(self, step_s: float, decode_s: float, sample_s: float) -> None:
        """One decode-only step: its whole time, llama_decode's part and sampling's part."""
        host = max(0.0, step_s - decode_s)
        self.host_steps += 1
        self.host_s_sum += host
        self.sample_s_sum += sample_s
        self.step_s_sum += step_s
        self._host.append(host)

    def record_ttft(self, seconds: float) -> None:
        self._ttft.append(seconds)
        self.ttft_histogram.observe(seconds)

    def record_itl(self, seconds: float) -> None:
        self._itl.append(seconds)
        self.itl_histogram.observe(seconds)

    def record_itls(self, seconds: list[float]) -> None:
        """A step's inter-token latencies at once (one per request that decoded)."""
        self._itl.extend(seconds)
        observe = self.itl_histogram.observe
        for s in seconds:
            observe(s)

    def record_drafts(self, drafted: int, accepted: int) -> None:
        self.draft_tokens += drafted
        self.draft_tokens_accepted += accepted

    def record_kv(self, cells_used: int) -> None:
        self.kv_cells_peak = max(self.kv_cells_peak, cells_used)

    def snapshot(self, queued: int, running: int, kv, lanes: tuple[Lane, ...] = ()) -> MetricsSnapshot:
        now = self._clock()
        steps = [s for s in self._steps if s.end_s >= now - WINDOW_S]
        span = max(1e-9, min(WINDOW_S, now - steps[0].end_s + steps[0].duration_s)) if steps else 1.0
        n = len(steps)
        last = steps[-1] if steps else None
        ttft, itl = list(self._ttft), list(self._itl)
        return MetricsSnapshot(
            time_s=now,
            prefill_tok_s=sum(s.prefill_tokens for s in steps) / span,
            decode_tok_s=sum(s.decode_tokens for s in steps) / span,
            seqs_per_step=sum(s.seqs for s in steps) / n if n else 0.0,
            tokens_per_step=sum(s.prefill_tokens + s.decode_tokens for s in steps) / n if n else 0.0,
            last_step_seqs=last.seqs if last else 0,
            last_step_tokens=(last.prefill_tokens + last.decode_tokens) if last else 0,
            max_step_seqs=self.max_step_seqs,
            queued=queued,
            running=running,
            kv_cells_used=kv.cells_used,
            kv_cells_total=kv.cells_total,
            kv_cells_shared=kv.cells_shared,
            kv_cells_peak=self.kv_cells_peak,
            seqs_active=kv.seqs_active,
            seqs_idle=kv.seqs_idle,
            seqs_pinned=kv.seqs_pinned,
            kv_evictions=kv.evictions,
            prefix_lookups=self.prefix_lookups,
            prefix_hits=self.prefix_hits,
            prompt_tokens_total=self.prompt_tokens_total,
            prompt_tokens_saved=self.prompt_tokens_saved,
            prompt_tokens_computed=self.prompt_tokens_computed,
            generated_tokens=self.generated_tokens,
            steps=self.steps,
            decode_only_tokens=self.decode_only_tokens,
            decode_only_s=self.decode_only_s,
            requests_finished=self.requests_finished,
            requests_failed=self.requests_failed,
            preemptions=self.preemptions,
            ttft_p50_s=percentile(ttft, 50),
            ttft_p95_s=percentile(ttft, 95),
            itl_p50_s=percentile(itl, 50),
            itl_p95_s=percentile(itl, 95),
            host_s_mean=self.host_s_sum / self.host_steps if self.host_steps else None,
            host_s_p50=percentile(list(self._host), 50),
            host_s_p95=percentile(list(self._host), 95),
            sample_s_mean=self.sample_s_sum / self.host_steps if self.host_steps else None,
            step_s_mean=self.step_s_sum / self.host_steps if self.host_steps else None,
            ttft_buckets=self.ttft_histogram.cumulative(),
            ttft_sum_s=self.ttft_histogram.sum_s,
            ttft_count=self.ttft_histogram.count,
            itl_buckets=self.itl_histogram.cumulative(),
            itl_sum_s=self.itl_histogram.sum_s,
            itl_count=self.itl_histogram.count,
            draft_tokens=self.draft_tokens,
            draft_tokens_accepted=self.draft_tokens_accepted,
            lanes=lanes,
        )
