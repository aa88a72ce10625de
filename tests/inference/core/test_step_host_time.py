"""Host time per decode step: the whole EngineCore.step() less llama_decode, on the fake
runner and its fake clock (decode 1 s, sampling 0.25 s, batch filling 0.125 s per step)."""

from __future__ import annotations

import pytest

from inference.core.metrics import LATENCY_SAMPLES, EngineMetrics
from tests.support.core_driver import make_driver, prompt


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
    assert m.host_s_mean == 0.375 and m.host_s_p50 == 0.375 and m.host_s_p95 == 0.375
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
    for host in (0.2, 0.2, 0.2) * 1000 + (5.0,) * 400:  # a few slow outliers move the mean, not the median
        m.record_host(step_s=host, decode_s=0.0, sample_s=0.0)
    snap = m.snapshot(queued=0, running=0, kv=_NoKv())
    assert snap.host_s_p50 == 0.2 and snap.host_s_p95 == 5.0
    assert snap.sample_s_mean is not None and snap.sample_s_mean < 0.05


class _NoKv:
    cells_used = cells_total = cells_shared = seqs_active = seqs_idle = seqs_pinned = evictions = 0


@pytest.mark.model
def test_metrics_export_host_and_sampling_time_per_decode_step(make_engine) -> None:
    """/metrics on a real server over the real model, after sampled replies: host time
    per decode step, its median and p95, the sampling part of it and the whole step's time."""
    from tests.support.served import client, exchange, request_bytes, serving

    with serving(make_engine(n_ctx=1024, n_seq_max=4)) as server:
        _, _, before = exchange(server, request_bytes("GET", "/metrics"))
        assert b"chorus_step_host_seconds_mean" not in before  # no decode step yet: no value, not a 0
        for seed in range(2):
            client(server).chat.completions.create(
                model="smollm2", messages=[{"role": "user", "content": "Tell me about ships."}],
                max_tokens=12, seed=seed, temperature=0.7, extra_body={"ignore_eos": True})
        status, _, body = exchange(server, request_bytes("GET", "/metrics"))
    assert status == 200
    values = {k: float(v) for k, v in (line.rsplit(" ", 1) for line in body.decode().splitlines()
                                       if line.startswith("chorus_step_"))}
    host, sample, step = (values["chorus_step_host_seconds_mean"], values["chorus_step_sample_seconds_mean"],
                          values["chorus_step_seconds_mean"])
    assert 0 < sample <= host < step
    assert 0 < values["chorus_step_host_seconds_p50"] <= values["chorus_step_host_seconds_p95"]
