"""`chorus bench-jobs` (app/bench/jobs.py): the prefix arithmetic, and one tiny run on the
real model: every phase ran all its items, each job item written exactly once, and the
report's figures and goals are there (the rates themselves are the benchmark's, not a test's)."""

from __future__ import annotations

import math

import pytest

from app.bench import jobs
from app.bench.jobs import _prefix_computations, distinct_prefix_tokens, shared_prefix_computed
from inference import LoadSettings


def test_the_shared_prefix_is_counted_against_what_a_perfect_cache_computes():
    prompts = [[1, 2, 3, 4, 10, 7], [1, 2, 3, 4, 11, 12], [1, 2, 3, 4, 10, 8]]  # 4 shared by all
    ideal = distinct_prefix_tokens(prompts)
    assert ideal == 4 + 1 + 1 + 1 + 2  # the shared 4, then 10 once, 7, 8, and 11 12
    assert _prefix_computations(ideal, ideal, 4) == 1.0
    assert _prefix_computations(ideal + 4, ideal, 4) == 2.0  # the shared prefix a second time


def test_the_shared_prefix_is_counted_request_by_request_from_what_each_found_cached():
    assert shared_prefix_computed([0, 221, 230, 221], 221) == 1.0  # the first computed it, the rest found it
    assert shared_prefix_computed([0, 0, 221], 221) == 2.0  # two computed it whole
    assert shared_prefix_computed([0, 200, 221], 221) == pytest.approx(1 + 21 / 221)  # 21 tokens again


@pytest.mark.model
def test_the_jobs_bench_runs_every_phase_on_the_real_model(model_path):
    options = jobs.JobsBenchOptions(items=32, width=4, max_tokens=4, system_words=40, chat_turns=2,
                                    chat_every_s=0.3, chat_max_tokens=4)
    report = jobs.run_jobs_bench(options, LoadSettings(model_path=model_path))
    engine, job, beside = report["engine"], report["job"], report["job_with_chat"]
    assert engine["generated_tokens"] == 32 * 4 and engine["items_per_s"] > 0
    # ABBA: two runs a side, the ratio of their mean rates, one ratio a round
    assert len(report["engine_runs"]) == len(report["job_runs"]) == report["config"]["rounds"] == 2
    mean_rate = sum(r["items_per_s"] for r in report["job_runs"]) / 2
    assert job["items_per_s"] == pytest.approx(mean_rate)
    assert report["ratio"]["job_vs_engine"] == pytest.approx(mean_rate / engine["items_per_s"])
    assert len(report["ratio"]["job_vs_engine_by_round"]) == 2
    assert len({r["job"] for r in report["job_runs"]}) == 2  # a job of its own each time
    for phase in (*report["job_runs"], beside):  # the chat's job paused twice and resumed: still once each
        assert phase["status"] == "completed"
        assert phase["items"] == phase["done"] == phase["written_once"] == phase["items_with_max_tokens"] == 32
        assert phase["failed"] == phase["written_twice_or_more"] == 0
    assert (job["window"], beside["window"]) == (2 * 4, 4 - 1)  # chorus batch run's, the desktop's
    assert job["max_batch_seqs"] <= 4 and engine["max_batch_seqs"] <= 4
    assert job["prefix_computations"] < 1.5  # the system prompt and instructions once (twice: 2.0)
    for run in report["job_runs"] + report["engine_runs"]:  # counted request by request too
        assert 1.0 <= run["shared_prefix_computed"] < 1.5
    assert report["config"]["shared_prefix_tokens"] > 40
    # Two pairs of turns of one conversation: each beside turn's period shared with the running job
    alone = report["chat_alone"]
    assert beside["job_outlasted_chat"] and alone["turns"] == beside["chat"]["turns"] == 2
    assert all(t > 0 for t in beside["chat"]["ttft_s"] + alone["ttft_s"])
    assert beside["chat_window_s"] >= 2 * 0.3 and beside["job_tokens_during_chat"] > 0
    pairs = beside["pairs"]  # each pair's beside / alone; the goals read their medians
    assert len(pairs["ttft"]) == len(pairs["decode"]) == 2
    assert report["ratio"]["chat_decode_beside_job_vs_alone"] == pytest.approx(sum(pairs["decode"]) / 2)
    assert set(report["goals"]) == {"job_at_least_0.9x_engine", "prefix_computed_once", "chat_ttft_at_most_1.2x",
                                    "chat_decode_at_least_0.95x", "job_keeps_0.5x_during_chat",
                                    "every_item_exactly_once"}
    assert report["goals"]["every_item_exactly_once"] and report["goals"]["prefix_computed_once"]
    assert all(not math.isnan(v) for k, v in report["ratio"].items() if k != "job_vs_engine_by_round")
    text = jobs.render(report, as_json=False)
    assert "32/32 done, 32 written once" in text and "goals:" in text and "the job ended before" not in text
