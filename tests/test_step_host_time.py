"""Host time per decode step: the whole EngineCore.step() less llama_decode, on the fake
runner and its fake clock (decode 1 s, sampling 0.25 s, batch filling 0.125 s per step)."""

from __future__ import annotations

from inference.metrics import LATENCY_SAMPLES, EngineMetrics
from tests.core_driver import make_driver, prompt


def test_decode_only_steps_split_into_the_models_time_and_the_hosts() -> None:
    d = make_driver(n_batch=64, step_s=1.0)
    d.runner.sample_s = 0.25

    def fill_batch(_plan) -> None:  # host work before llama_decode
        d.clock.now += 0.125

    d.runner.on_execute = fill_batch
    d.add("a", prompt(1, 8), max_tokens=4)
    d.run(lambda: not d.core.has_work())
    m = d.core.snapshot()
    assert d.core.metrics.host_steps == 3  # the first token came from the prefill step
    assert m.host_s_mean == 0.375 and m.host_s_p95 == 0.375
    assert m.sample_s_mean == 0.25
    assert m.step_s_mean == 1.375


def test_a_step_that_holds_prompt_tokens_is_not_counted() -> None:
    d = make_driver(n_batch=64, step_s=1.0)
    d.runner.sample_s = 0.5
    d.add("a", prompt(1, 8), max_tokens=1)
    d.run(lambda: not d.core.has_work())
    m = d.core.snapshot()
    assert d.core.metrics.host_steps == 0
    assert m.host_s_mean is None and m.host_s_p95 is None and m.sample_s_mean is None


def test_host_time_is_never_negative_and_p95_looks_at_recent_steps() -> None:
    m = EngineMetrics(clock=lambda: 0.0)
    m.record_host(step_s=1.0, decode_s=1.5, sample_s=0.0)  # clocks disagree: clamp, not < 0
    for _ in range(LATENCY_SAMPLES):
        m.record_host(step_s=1.0, decode_s=0.9, sample_s=0.05)
    snap = m.snapshot(queued=0, running=0, kv=_NoKv())
    assert snap.host_s_p95 is not None and abs(snap.host_s_p95 - 0.1) < 1e-9
    assert snap.sample_s_mean is not None and snap.sample_s_mean < 0.05


class _NoKv:
    cells_used = cells_total = cells_shared = seqs_active = seqs_idle = seqs_pinned = evictions = 0
