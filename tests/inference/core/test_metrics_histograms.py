"""TTFT and inter-token latency histograms in MetricsSnapshot, on a fake clock."""

from __future__ import annotations

import math

from inference.core.metrics import LATENCY_BUCKETS, EngineMetrics
from tests.support.core_driver import make_driver, prompt


def counts_at(buckets: tuple[tuple[float, int], ...], bound: float) -> int:
    return dict(buckets)[bound]


def test_histograms_count_each_latency_cumulatively_on_the_fake_clock() -> None:
    d = make_driver(step_s=0.5)  # every step takes half a second of fake time
    d.add("a", prompt(1, 10), max_tokens=4)
    d.add("b", prompt(2, 10), max_tokens=4)
    d.run(lambda: not d.core.has_work())
    s = d.core.snapshot()
    assert s.ttft_count == 2 and s.itl_count == 6  # 2 first tokens, 3 gaps each
    assert [b for b, _ in s.ttft_buckets] == list(LATENCY_BUCKETS) and s.ttft_buckets[-1][0] == math.inf
    ttfts = [d.final(n).stats.ttft_s for n in ("a", "b")]
    assert math.isclose(s.ttft_sum_s, sum(ttfts)) and math.isclose(s.itl_sum_s, 6 * 0.5)
    assert counts_at(s.itl_buckets, 0.3) == 0 and counts_at(s.itl_buckets, 0.5) == 6  # le: 0.5 counts
    assert counts_at(s.ttft_buckets, math.inf) == 2
    assert all(a[1] <= b[1] for a, b in zip(s.ttft_buckets, s.ttft_buckets[1:]))  # cumulative


def test_reset_latency_keeps_the_histograms() -> None:
    clock = iter(range(1000))
    m = EngineMetrics(clock=lambda: float(next(clock)))
    m.record_ttft(0.004)
    m.record_itl(70.0)
    m.reset_latency()
    m.record_ttft(2.0)

    class Kv:
        cells_used = cells_total = cells_shared = seqs_active = seqs_idle = seqs_pinned = evictions = 0

    s = m.snapshot(queued=0, running=0, kv=Kv())
    assert s.ttft_p50_s == 2.0  # the percentiles did reset
    assert s.ttft_count == 2 and counts_at(s.ttft_buckets, 0.005) == 1 and counts_at(s.ttft_buckets, 2.5) == 2
    assert s.itl_count == 1 and counts_at(s.itl_buckets, 60.0) == 0 and counts_at(s.itl_buckets, math.inf) == 1
    assert math.isclose(s.ttft_sum_s, 2.004)
