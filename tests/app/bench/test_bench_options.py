"""The benchmarks called as services: an options dataclass (and LoadSettings) in, a report out,
rendered by the bench's own render() into what `chorus bench*` prints. No argparse, no model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.bench import engine, engines, restart, serve, storage
from inference import LoadSettings


def test_the_storage_bench_takes_its_options_and_returns_the_timings() -> None:
    result = storage.run_storage_bench(storage.StorageBenchOptions(messages=300, long=40))
    assert result["long_conversation_messages"] == 40
    assert result["messages_total"] >= 340
    assert result["checkpoint_ms_p50"] > 0 and result["search_common_word_ms_p50"] > 0
    assert json.loads(storage.render(result, as_json=True)) == result
    lines = storage.render(result, as_json=False).splitlines()
    assert len(lines) == len(result)
    assert lines[0] == f"{'messages_total':<34}{result['messages_total']:>12}"
    assert lines[2].startswith("checkpoint_ms_p50") and lines[2].endswith("   (goal < 5 ms)")


def test_the_engine_bench_sizes_its_engine_for_the_workload_unless_told() -> None:
    base = LoadSettings(model_path=Path("m.gguf"), n_threads=3, reproducible=True)
    sized = engine.sized_settings(engine.EngineBenchOptions(chats=8, system_tokens=1000, max_tokens=128), base)
    assert (sized.n_ctx, sized.n_seq_max, sized.n_batch) == (4096, 10, 512)
    assert (sized.n_threads, sized.reproducible) == (3, True)  # the caller's engine options are kept
    big = engine.sized_settings(engine.EngineBenchOptions(chats=40, max_tokens=100), base)
    assert (big.n_ctx, big.n_seq_max, big.n_batch) == (8192, 42, 512)  # 1000 + 40 * 164 + 512, in 256s
    told = engine.sized_settings(engine.EngineBenchOptions(ctx=2048), base)
    assert told.n_ctx == 2048


def _side(**extra: object) -> dict:
    return {"wall_s": 1.5, "gen_tok_s": 20.0, "decode_tok_s": 30.0, "ttft_p50_s": 0.1, "ttft_p95_s": 0.2,
            "itl_p50_s": 0.01, "itl_p95_s": 0.02, "prompt_tokens_computed": 120, "kv_cells_peak": 140,
            "max_batch_seqs": 2, "host_ms_per_step": None, "host_ms_per_step_p50": None,
            "host_ms_per_step_p95": None, "sample_ms_per_step": None, "step_ms_per_step": None, **extra}


def test_the_engine_report_renders_as_the_table_the_docs_show() -> None:
    report = {"config": {"model": "m.gguf", "chats": 2}, "engine": _side(host_ms_per_step=0.5),
              "baseline": _side(), "ratio": {"gen_tok_s": 1.0}, "native_decode_tok_s": 123.45,
              "ideal": {"shared_prefix_tokens": 50}}
    assert json.loads(engine.render(report, as_json=True)) == report
    lines = engine.render(report, as_json=False).splitlines()
    assert lines[0] == 'config: {"model": "m.gguf", "chats": 2}'
    assert lines[1] == " " * 24 + f"{'engine':>12}{'baseline':>12}"
    assert lines[2] == f"{'wall_s':<24}{'1.500':>12}{'1.500':>12}"
    assert lines[10] == f"{'kv_cells_peak':<24}{140:>12}{140:>12}"
    assert lines[12] == f"{'host_ms_per_step':<24}{'0.500':>12}{'-':>12}"
    assert lines[-3:] == [f"ratio {'gen_tok_s':<18}{'1.000':>12}", f"{'native decode tok/s':<24}{'123.5':>12}",
                          'ideal (shared prefix once): {"shared_prefix_tokens": 50}']


def test_the_engines_and_restart_reports_render_their_lines() -> None:
    runs = [engines.Run(4, {"a": 10.0, "b": 30.0}, 2.0), engines.Run(2, {"a": 8.0, "b": 24.0}, 3.0)]
    assert json.loads(engines.render(runs, as_json=True))[1] == {"threads": 2, "tok_s": {"a": 8.0, "b": 24.0},
                                                                 "wall_s": 3.0}
    assert engines.render(runs, as_json=False).splitlines() == [
        "4 thread(s) per engine: a 10.0, b 30.0 tok/s (total 40.0); wall 2.0 s",
        "2 thread(s) per engine: a 8.0, b 24.0 tok/s (total 32.0); wall 3.0 s",
        "split cores / all cores each, total decode tok/s: 0.80x",
    ]
    turn = {"ttft_s": 0.5, "text": "x", "prompt_tokens": 400, "restored_tokens": 0, "cached_tokens": 0}
    report = {"config": {"model": "m.gguf"}, "prompt_tokens": 400, "ratio": 0.05, "restored_tokens": 380,
              "same_output": True, "cache_files": 2, "cache_mb": 1.5,
              "turns": {"recompute": turn, "restored": {**turn, "ttft_s": 0.025}}}
    assert restart.render(report, as_json=False).splitlines() == [
        "model m.gguf, next turn of a 400-token conversation after a restart",
        "  TTFT recompute      0.500 s",
        "  TTFT restored       0.025 s  (380 tokens from disk, 1.5 MiB in 2 file(s))",
        "  ratio               0.050   (goal <= 0.1)",
        "  same greedy reply: True",
    ]


def test_the_serve_bench_passes_only_the_engine_options_it_was_given() -> None:
    start = serve.ServerOptions(base=Path("d"), model=Path("m.gguf"), ctx=2048, gpu_layers=0, reproducible=True)
    assert start.engine_flags() == ["--ctx", "2048", "--gpu-layers", "0", "--reproducible"]
    assert serve.ServerOptions(base=Path("d"), model=Path("m.gguf")).engine_flags() == []


@pytest.mark.model
def test_the_engine_bench_runs_speculation_beside_its_absence_on_fresh_engines(model_path: Path) -> None:
    """--spec-rounds: the edit workload with lookup on and off, alternating, each side's
    rates and their ratio; the first 'on' run is the report's own engine column."""
    options = engine.EngineBenchOptions(chats=1, max_tokens=64, workload="edit", skip_baseline=True, spec_rounds=2,
                                        repeat=2)
    report = engine.run_bench(options, LoadSettings(model_path=model_path, speculative="lookup"))
    spec = report["speculation"]
    assert spec["mode"] == "lookup" and spec["rounds"] == 2
    assert len(spec["runs"]["on"]["decode_tok_s"]) == len(spec["runs"]["off"]["decode_tok_s"]) == 2
    assert spec["runs"]["on"]["decode_tok_s"][0] == report["engine"]["decode_tok_s"]
    assert all(n <= 1.0 for n in spec["runs"]["off"]["generated_per_step"])  # one chat, no drafts: 1 a step
    on, off = spec["median"]["on"]["decode_tok_s"], spec["median"]["off"]["decode_tok_s"]
    assert spec["ratio"]["decode_tok_s"] == pytest.approx(on / off)
    agreement = spec["agreement"]  # greedy: lookup keeps the text (one chat, its own cells)
    assert agreement["chats"] == 1 and agreement["common_prefix_tokens"][0] <= 64
    table = engine.render(report, as_json=False)
    assert "speculation off    decode tok/s" in table and "ratio decode, lookup/off" in table
    # The same chat twice more on that engine: its prompt cached (one step computes its last
    # token), so at least a token a step; whether the planner drafts from the pool within 64
    # tokens depends on the machine's step costs (tests/inference/speculative covers the pool).
    assert len(report["repeats"]) == 2
    assert all(again["generated_per_step"] >= 0.95 for again in report["repeats"])
    assert "again #2 on the same engine" in table
    off_only = engine.run_bench(options, LoadSettings(model_path=model_path))
    assert "speculation" not in off_only  # nothing to compare with speculation off


def test_the_sides_alternate_in_abba_order_after_the_reports_own_run() -> None:
    assert engine.abba_order(1) == ["off"]
    assert engine.abba_order(2) == ["off", "off", "on"]
    assert engine.abba_order(3) == ["off", "off", "on", "on", "off"]  # on, off, off, on, on, off


def test_greedy_agreement_counts_the_tokens_alike_before_the_first_difference() -> None:
    figures = engine.greedy_agreement([(1, 2, 3, 4), (5, 6, 7), (9, 9)], [(1, 2, 0, 4), (5, 6, 7), (8, 9)])
    assert figures == {"chats": 3, "identical_chats": 1, "common_prefix_tokens": [2, 3, 0],
                       "common_prefix_mean": pytest.approx(5 / 3)}


@pytest.mark.model
def test_the_engine_bench_runs_a_quantized_kv_cache_beside_f16(model_path: Path) -> None:
    options = engine.EngineBenchOptions(chats=2, max_tokens=16, system_tokens=200, skip_baseline=True, kv_rounds=1)
    report = engine.run_bench(options, LoadSettings(model_path=model_path, kv_type="q8_0"))
    kv = report["kv_type"]
    assert kv["type"] == "q8_0"
    assert kv["kv_bytes_per_cell"] == pytest.approx(kv["f16_kv_bytes_per_cell"] * 34 / 64)  # q8_0: 34 bytes a 32
    assert len(kv["runs"]["on"]["decode_tok_s"]) == len(kv["runs"]["off"]["decode_tok_s"]) == 1
    assert kv["agreement"]["chats"] == 2 and all(0 <= n <= 16 for n in kv["agreement"]["common_prefix_tokens"])
    assert "kv bytes per cell" in engine.render(report, as_json=False)
