"""Restored prompt tokens where the user and an operator see them: the performance panel's
summary line and the server's /metrics (Prometheus) export. No model: snapshots as the
engine reports them."""

from __future__ import annotations

import dataclasses

from app.perf.hardware import HardwareSample
from inference.core.metrics import MetricsSnapshot
from tests.support.metrics import metrics_snapshot, prometheus_text
from ui.widgets.perf.panel import PerfPanel


def snapshot(**fields) -> MetricsSnapshot:
    return metrics_snapshot(**{
        **dict(ttft_p50_s=None, ttft_p95_s=None, itl_p50_s=None, itl_p95_s=None, ttft_buckets=(), itl_buckets=(),
               kv_cells_total=4096, prefix_lookups=3, prefix_hits=2, prompt_tokens_saved=4100),
        **fields})


def test_metrics_exports_the_restored_prompt_tokens_as_a_counter():
    text = prometheus_text(snapshot(prompt_tokens_restored=4069))
    assert "# TYPE chorus_prompt_tokens_restored_total counter" in text
    assert "chorus_prompt_tokens_restored_total 4069.0" in text


def test_a_snapshot_without_the_field_exports_the_rest():
    from types import SimpleNamespace

    fields = {f.name: getattr(snapshot(), f.name) for f in dataclasses.fields(MetricsSnapshot)}
    del fields["prompt_tokens_restored"]  # an engine of another version, a stand-in
    text = prometheus_text(SimpleNamespace(**fields))
    assert "chorus_prompt_tokens_restored" not in text and "chorus_generated_tokens_total" in text


def test_the_panel_says_how_many_prompt_tokens_came_from_disk(qtbot):
    panel = PerfPanel()
    qtbot.addWidget(panel)
    no_gpu = HardwareSample(10.0, 500.0, (), "no GPU")
    panel.add_sample({"model.gguf": snapshot()}, no_gpu)
    assert "4100 prompt tokens saved" in panel.summary.text()
    assert "from disk" not in panel.summary.text()  # nothing restored: no clutter
    panel.add_sample({"model.gguf": snapshot(prompt_tokens_restored=4069)}, no_gpu)
    assert "(4069 restored from disk)" in panel.summary.text()


def test_metrics_and_the_panel_show_the_draft_tokens_verified_and_kept(qtbot):
    text = prometheus_text(snapshot(draft_tokens=120, draft_tokens_accepted=90))
    assert "chorus_draft_tokens_total 120.0" in text and "chorus_draft_tokens_accepted_total 90.0" in text
    panel = PerfPanel()
    qtbot.addWidget(panel)
    no_gpu = HardwareSample(10.0, 500.0, (), "no GPU")
    panel.add_sample({"model.gguf": snapshot()}, no_gpu)
    assert "drafts" not in panel.summary.text()  # speculation off: no clutter
    panel.add_sample({"model.gguf": snapshot(draft_tokens=120, draft_tokens_accepted=90, tokens_per_step=2.5)}, no_gpu)
    assert "drafts 90/120 kept, 2.5 tokens a step" in panel.summary.text()


def test_who_uses_the_engine_is_exported_by_kind_of_owner_never_by_name():
    from inference.core.lanes import Lane

    lanes = (Lane("chat", "My private chat title", 20.0, 2, 0, 300), Lane("chat", "Another", 10.0, 1, 1, 100),
             Lane("api", "OpenAI/Python 1.54.0", 5.0, 1, 0, 50), Lane("job", "3f9c0a1b", 2.5, 4, 12, 400))
    text = prometheus_text(snapshot(lanes=lanes))
    assert 'chorus_owner_tokens_per_second{kind="chat"} 30.0' in text
    assert 'chorus_owner_sequences{kind="job"} 4.0' in text and 'chorus_owner_requests_queued{kind="job"} 12.0' in text
    assert 'chorus_owner_kv_cells{kind="api"} 50.0' in text
    assert "private" not in text and "OpenAI/Python" not in text and "3f9c0a1b" not in text
    assert "chorus_owner_" not in prometheus_text(snapshot())  # an idle engine: no such series
