"""`chorus bench`: N chats sharing a system prompt, through the engine and through
llama-cpp-python's high-level `Llama` one after another, measured in one process run.

Both sides get the same prompt tokens (rendered by the same template), greedy
sampling, the same thread count, and exactly T new tokens per chat (end-of-generation
ignored). run_bench() measures and returns the report; render() is its table or JSON.
"""

from __future__ import annotations

import json
import statistics
import time
from dataclasses import asdict, dataclass, replace
from typing import Any

from app.bench.baselines import native_decode_tok_s, run_baseline
from app.bench.run_result import RunResult, or_nan, seconds_at
from app.bench.workload import EDIT_PROMPT_TOKENS, Workload, build_edit_workload, build_workload, common_prefix
from inference import ChatRequest, Engine, LoadSettings, SamplingParams
from inference.gguf import estimate_memory, read_gguf_header

MAX_SEQUENCES = 256  # llama.cpp's limit (LoadSettings.validate)


@dataclass(frozen=True)
class EngineBenchOptions:
    chats: int = 8
    system_tokens: int = 1000
    max_tokens: int = 128
    warm: bool = False  # pin the system prompt before the clock starts
    sampling: str = "greedy"  # or "default": the app's own chat settings
    native: bool = False  # also time llama.cpp's raw batched decode
    skip_baseline: bool = False
    n_seq_max: int | None = None  # engine sequences; None: chats + 2
    ctx: int | None = None  # context size; None: sized for the workload
    # "chat": questions under a shared system prompt; "edit": each chat copies a given
    # text (its output copies its prompt: what speculative decoding's lookup serves).
    workload: str = "chat"
    # With speculation on: also run the same workload with it off, alternating on fresh
    # engines this many rounds each, for the ratio (0: no such comparison).
    spec_rounds: int = 0
    # With a KV cache type other than f16: the same against an f16 cache, with the greedy
    # agreement of the two sides' texts.
    kv_rounds: int = 0
    # The same chats this many times more on the same engine once the measured run is done
    # (what a regenerated reply meets: the prefix cache, and with speculation the drafts
    # from what the first run wrote), each run's decode rate and tokens a step reported.
    repeat: int = 0


# ----- the engine side ------------------------------------------------------------------


def bench_sampling(kind: str, max_tokens: int) -> SamplingParams:
    """greedy: what the ratio benchmarks compare; default: the app's own chat settings."""
    if kind == "greedy":
        return SamplingParams.greedy(max_tokens, ignore_eos=True)
    return SamplingParams(max_tokens=max_tokens, ignore_eos=True)


def run_engine(engine: Engine, work: Workload, warm: bool, sampling_kind: str = "greedy",
               outputs: list[tuple[int, ...]] | None = None) -> RunResult:
    """The workload's chats at once; each chat's generated tokens appended to outputs."""
    if warm and work.system_prompt:
        engine.pin_system_prompt(work.system_prompt).result(timeout=600)
    elif warm:  # no system prompt (the edit workload): the prompts' shared text into the cache
        engine.submit(ChatRequest(prompt_tokens=tuple(work.warm_prompt), sampling=SamplingParams.greedy(1))).result(600)
    engine.reset_metrics()
    sampling = bench_sampling(sampling_kind, work.max_tokens)
    t0 = time.perf_counter()
    handles = [
        engine.submit(ChatRequest(prompt_tokens=tuple(p), sampling=sampling)) for p in work.prompts
    ]
    results = [h.result(timeout=1800) for h in handles]
    wall = time.perf_counter() - t0
    if outputs is not None:
        outputs.extend(r.token_ids for r in results)
    m = engine.metrics(fresh=True)
    stats = [r.stats for r in results if not r.error and r.stats is not None]
    bad = len(results) - sum(s.generated_tokens == work.max_tokens for s in stats)
    if bad:
        raise RuntimeError(f"{bad} engine chats did not produce {work.max_tokens} tokens: {results}")
    ttfts = [s.ttft_s for s in stats]
    generated = sum(s.generated_tokens for s in stats)
    return RunResult(
        wall_s=wall,
        gen_tok_s=generated / wall,
        decode_tok_s=m.decode_only_tok_s,
        ttft_p50_s=seconds_at(ttfts, 50),
        ttft_p95_s=seconds_at(ttfts, 95),
        itl_p50_s=or_nan(m.itl_p50_s),
        itl_p95_s=or_nan(m.itl_p95_s),
        prompt_tokens_computed=m.prompt_tokens_computed,
        kv_cells_peak=m.kv_cells_peak,
        max_batch_seqs=m.max_step_seqs,
        host_ms_per_step=_ms(m.host_s_mean),
        host_ms_per_step_p50=_ms(m.host_s_p50),
        host_ms_per_step_p95=_ms(m.host_s_p95),
        sample_ms_per_step=_ms(m.sample_s_mean),
        step_ms_per_step=_ms(m.step_s_mean),
        draft_tokens=m.draft_tokens,
        draft_tokens_accepted=m.draft_tokens_accepted,
        generated_per_step=m.generated_tokens / m.steps if m.steps else None,
    )


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1000.0


# ----- the benchmark ------------------------------------------------------------------------


def sized_settings(options: EngineBenchOptions, settings: LoadSettings) -> LoadSettings:
    """settings (the model and the caller's engine options) with the context, sequences and
    batch this workload needs: every chat in one batch, with room for all of their tokens."""
    n_seq = options.n_seq_max or min(MAX_SEQUENCES, options.chats + 2)
    prompt = options.system_tokens if options.workload == "chat" else EDIT_PROMPT_TOKENS
    need = prompt + options.chats * (64 + options.max_tokens) + 512
    n_ctx = options.ctx or max(4096, 256 * ((need + 255) // 256))
    return replace(settings, n_ctx=n_ctx, n_seq_max=n_seq, n_batch=max(512, n_seq))


def run_bench(options: EngineBenchOptions, settings: LoadSettings) -> dict[str, Any]:
    """The engine on settings (sized by sized_settings), then the references the options ask
    for; the report: config, engine, baseline, ratio, native_decode_tok_s, ideal, and with
    spec_rounds the same workload without speculation side by side (speculation)."""
    settings = sized_settings(options, settings)
    model = settings.model_path
    first_outputs: list[tuple[int, ...]] = []
    repeats: list[RunResult] = []
    eng, work, threads, layers = _run_engine_once(options, settings, first_outputs, repeats)
    report: dict[str, Any] = {
        "config": {
            "model": model.name, "chats": options.chats, "system_tokens": options.system_tokens,
            "max_tokens": options.max_tokens, "warm": options.warm, "sampling": options.sampling,
            "workload": options.workload, "speculative": settings.speculative,
            "threads": threads, "n_ctx": settings.n_ctx,
            "n_seq_max": settings.n_seq_max, "reproducible": settings.reproducible,
            "prompt_tokens_each": [len(p) for p in work.prompts],
        },
        "engine": asdict(eng),
    }
    if repeats:
        report["repeats"] = [{"decode_tok_s": r.decode_tok_s, "generated_per_step": r.generated_per_step,
                              "draft_tokens": r.draft_tokens, "draft_tokens_accepted": r.draft_tokens_accepted}
                             for r in repeats]
    if options.spec_rounds > 0 and settings.speculative != "off":
        off = replace(settings, speculative="off")
        report["speculation"] = {"mode": settings.speculative,
                                 **_alternating(options, settings, off, options.spec_rounds, eng, first_outputs)}
    if options.kv_rounds > 0 and settings.cache_type() != "f16":
        f16 = replace(settings, kv_type="f16", reproducible=False, flash_attn=settings.uses_flash_attn())
        report["kv_type"] = {"type": settings.cache_type(), "kv_bytes_per_cell": _kv_bytes_per_cell(settings),
                             "f16_kv_bytes_per_cell": _kv_bytes_per_cell(f16),
                             **_alternating(options, settings, f16, options.kv_rounds, eng, first_outputs)}
    if not options.skip_baseline:
        per_chat_ctx = max(len(p) for p in work.prompts) + options.max_tokens + 64
        base = run_baseline(model, per_chat_ctx, threads, layers, work, options.warm)
        report["baseline"] = asdict(base)
        report["ratio"] = {
            "gen_tok_s": eng.gen_tok_s / base.gen_tok_s,
            "ttft_p95_s": eng.ttft_p95_s / base.ttft_p95_s,
        }
    if options.native:
        native = native_decode_tok_s(
            model, min(options.chats, settings.n_seq_max), common_prefix(work.prompts) + 20, options.max_tokens,
            threads, layers, settings.reproducible,
        )
        report["native_decode_tok_s"] = native
        ratio = report.setdefault("ratio", {})
        ratio["decode_vs_native"] = eng.decode_tok_s / native
        if "baseline" in report:
            ratio["gen_tok_s_native_ceiling"] = _native_ceiling(eng, native, work) / base.gen_tok_s
    report["ideal"] = _ideal(work)
    report["memory"] = _memory(settings, eng, options.chats)
    return report


def _run_engine_once(options: EngineBenchOptions, settings: LoadSettings,
                     outputs: list[tuple[int, ...]] | None = None,
                     repeats: list[RunResult] | None = None) -> tuple[RunResult, Workload, int, int]:
    """The workload through a fresh engine on settings: its result, the workload, the
    threads and the GPU layers it ran with; with `repeats`, options.repeat more runs of it
    on the same engine appended there."""
    engine = Engine.start(settings)
    try:
        work = (build_workload(engine, options.chats, options.system_tokens, options.max_tokens)
                if options.workload == "chat" else build_edit_workload(engine, options.chats, options.max_tokens))
        threads, layers = settings.threads(), engine.info.n_gpu_layers if engine.info else 0
        result = run_engine(engine, work, options.warm, options.sampling, outputs)
        if repeats is not None:
            repeats.extend(run_engine(engine, work, False, options.sampling) for _ in range(options.repeat))
        return result, work, threads, layers
    finally:
        engine.shutdown()


def _alternating(options: EngineBenchOptions, settings: LoadSettings, reference: LoadSettings, rounds: int,
                 first: RunResult, first_outputs: list[tuple[int, ...]]) -> dict[str, Any]:
    """The workload on reference ("off") and settings ("on"), alternating on fresh engines,
    rounds runs a side (the first "on" run is the report's own): each side's decode and
    generation rates, their medians and ratios, and how far the two sides' first runs wrote
    the same tokens (greedy agreement). Alternating in ABBA order keeps a machine whose
    speed drifts (a shared VM) from favouring one side."""
    runs: dict[str, list[RunResult]] = {"off": [], "on": [first]}
    reference_outputs: list[tuple[int, ...]] = []
    for side in abba_order(rounds):
        if side == "off":
            outputs = reference_outputs if not runs["off"] else None
            runs["off"].append(_run_engine_once(options, reference, outputs)[0])
        else:
            runs["on"].append(_run_engine_once(options, settings)[0])
    sides: dict[str, dict[str, list[float | None]]] = {
        side: {"decode_tok_s": [r.decode_tok_s for r in rs], "gen_tok_s": [r.gen_tok_s for r in rs],
               "generated_per_step": [r.generated_per_step for r in rs]}
        for side, rs in runs.items()
    }
    medians = {side: {k: statistics.median(x for x in v if x is not None) for k, v in d.items() if None not in v}
               for side, d in sides.items()}
    return {
        "rounds": rounds, "runs": sides, "median": medians,
        "ratio": {k: medians["on"][k] / medians["off"][k] for k in ("decode_tok_s", "gen_tok_s")},
        "agreement": greedy_agreement(first_outputs, reference_outputs),
    }


def abba_order(rounds: int) -> list[str]:
    """The runs after the report's own "on" run: off, off, on, on, off, off, ... until each
    side has `rounds` runs, so each side runs as often early as late."""
    order: list[str] = []
    counts = {"on": 1, "off": 0}
    side = "off"
    while counts["on"] < rounds or counts["off"] < rounds:
        for _ in range(2):
            if counts[side] < rounds:
                order.append(side)
                counts[side] += 1
        side = "on" if side == "off" else "off"
    return order


def greedy_agreement(ours: list[tuple[int, ...]], reference: list[tuple[int, ...]]) -> dict[str, Any]:
    """How alike two sides' texts are, chat by chat: the tokens each wrote alike before the
    first difference, their mean, and the chats written identically."""
    common = [next((i for i, (a, b) in enumerate(zip(x, y)) if a != b), min(len(x), len(y)))
              for x, y in zip(ours, reference)]
    identical = sum(1 for c, x, y in zip(common, ours, reference) if c == len(x) == len(y))
    return {"chats": len(common), "identical_chats": identical,
            "common_prefix_tokens": common, "common_prefix_mean": statistics.mean(common) if common else 0.0}


def _kv_bytes_per_cell(settings: LoadSettings) -> float:
    estimate = estimate_memory(read_gguf_header(settings.model_path), settings.n_ctx, 0, False, settings.cache_type())
    return estimate.kv_bytes / estimate.n_ctx


def _memory(settings: LoadSettings, eng: RunResult, chats: int) -> dict[str, Any]:
    """The KV cache's bytes per cell (the model's layers and KV width, the cache type) and
    what the run's peak of cells cost per chat: the memory a chat holds."""
    estimate = estimate_memory(read_gguf_header(settings.model_path), settings.n_ctx, 0, False, settings.cache_type())
    per_cell = _kv_bytes_per_cell(settings)
    return {"kv_type": settings.cache_type(), "kv_bytes_per_cell": per_cell,
            "kv_bytes_total": estimate.kv_bytes, "kv_bytes_per_chat_at_peak": per_cell * eng.kv_cells_peak / chats}


def _native_ceiling(eng: RunResult, native_tok_s: float, work: Workload) -> float:
    """gen_tok_s an engine would reach if, after the same time to first token, every
    decode step ran at llama.cpp's raw batched rate: the most batching can give here."""
    n = len(work.prompts)
    decode_s = (work.max_tokens - 1) * n / native_tok_s
    return n * work.max_tokens / (eng.ttft_p95_s + decode_s)


def _ideal(work: Workload) -> dict[str, int]:
    """Prompt tokens and cells if the shared prefix were computed and stored once."""
    shared = common_prefix(work.prompts)
    own = sum(len(p) - shared for p in work.prompts)
    return {
        "shared_prefix_tokens": shared,
        "prompt_tokens": shared + own,
        "kv_cells": shared + own + len(work.prompts) * work.max_tokens,
    }


# ----- the report, as printed ----------------------------------------------------------------


def render(report: dict[str, Any], as_json: bool) -> str:
    """The report as one JSON object, or as the table (one column per side measured)."""
    return json.dumps(report, indent=2) if as_json else _table(report)


def _table(report: dict[str, Any]) -> str:
    rows = ["wall_s", "gen_tok_s", "decode_tok_s", "ttft_p50_s", "ttft_p95_s", "itl_p50_s",
            "itl_p95_s", "prompt_tokens_computed", "kv_cells_peak", "max_batch_seqs",
            "host_ms_per_step", "host_ms_per_step_p50", "host_ms_per_step_p95", "sample_ms_per_step",
            "step_ms_per_step", "draft_tokens", "draft_tokens_accepted", "generated_per_step"]
    cols = [c for c in ("engine", "baseline") if c in report]
    lines = [f"config: {json.dumps(report['config'])}", f"{'':<24}" + "".join(f"{c:>12}" for c in cols)]
    for r in rows:
        lines.append(f"{r:<24}" + "".join(_fmt(report[c].get(r)) for c in cols))
    for k, v in report.get("ratio", {}).items():
        lines.append(f"ratio {k:<18}{v:>12.3f}")
    if "native_decode_tok_s" in report:
        lines.append(f"{'native decode tok/s':<24}{report['native_decode_tok_s']:>12.1f}")
    lines.append(f"ideal (shared prefix once): {json.dumps(report['ideal'])}")
    if "memory" in report:
        lines.append(f"memory: {json.dumps(report['memory'])}")
    for i, again in enumerate(report.get("repeats", [])):
        lines.append(f"again #{i + 1} on the same engine: decode tok/s {again['decode_tok_s']:.1f}, "
                     f"{again['generated_per_step']:.2f} tokens a step")
    if "speculation" in report:
        lines += _alternating_lines("speculation", ("off", report["speculation"]["mode"]), report["speculation"])
    if "kv_type" in report:
        kv = report["kv_type"]
        lines += _alternating_lines("kv", ("f16", kv["type"]), kv)
        lines.append(f"kv bytes per cell {kv['kv_bytes_per_cell']:.0f} against f16's {kv['f16_kv_bytes_per_cell']:.0f}")
    return "\n".join(lines)


def _alternating_lines(what: str, names: tuple[str, str], figures: dict[str, Any]) -> list[str]:
    """A side-by-side comparison's lines: each side's decode rates, their ratio, agreement."""
    lines = []
    for side, name in zip(("off", "on"), names):
        rates = ", ".join(f"{x:.1f}" for x in figures["runs"][side]["decode_tok_s"])
        lines.append(f"{what} {name:<6} decode tok/s {rates} (median {figures['median'][side]['decode_tok_s']:.1f})")
    agree = figures["agreement"]
    lines.append(f"ratio decode, {names[1]}/{names[0]} {figures['ratio']['decode_tok_s']:>8.3f}")
    lines.append(f"greedy agreement: {agree['identical_chats']} of {agree['chats']} chats identical, "
                 f"{agree['common_prefix_mean']:.1f} tokens alike on average before the first difference")
    return lines


def _fmt(v: Any) -> str:
    if v is None:
        return f"{'-':>12}"
    return f"{v:>12.3f}" if isinstance(v, float) else f"{v:>12}"
