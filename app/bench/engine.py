"""`chorus bench`: N chats sharing a system prompt, through the engine and through
llama-cpp-python's high-level `Llama` one after another, measured in one process run.

Both sides get the same prompt tokens (rendered by the same template), greedy
sampling, the same thread count, and exactly T new tokens per chat (end-of-generation
ignored).
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from app.cli.engine_args import settings_from_args
from inference import ChatRequest, Engine, SamplingParams, percentile

SENTENCES = (
    "You are Chorus, a careful assistant who answers in plain language.",
    "Prefer short paragraphs, concrete examples and honest uncertainty.",
    "When the user asks about code, explain the idea before showing the snippet.",
    "Never invent citations; say when you do not know something.",
    "Keep units, names and numbers exactly as the user wrote them.",
    "If a question is ambiguous, state the reading you chose in one sentence.",
    "Summaries come first, details after, and a final line with next steps.",
    "Respect the user's time: no filler, no repetition, no flattery.",
)
TOPICS = (
    "why the sky is blue", "how a hash map works", "the rules of chess castling",
    "what causes tides", "how to brew green tea", "the history of the printing press",
    "how vaccines train immunity", "why bridges have expansion joints", "how compilers parse code",
    "what a black hole is", "how bread rises", "why leaves change colour",
    "how GPS finds a position", "what inflation means", "how bees make honey", "why ice floats",
)


class SystemPromptError(RuntimeError):
    """The bench cannot build its shared system prompt with this model's template."""


@dataclass(frozen=True)
class Workload:
    system_prompt: str
    questions: list[str]
    prompts: list[list[int]]  # rendered and tokenized, identical for both runs
    warm_prompt: list[int]
    max_tokens: int


@dataclass
class RunResult:
    wall_s: float
    gen_tok_s: float
    decode_tok_s: float
    ttft_p50_s: float
    ttft_p95_s: float
    itl_p50_s: float
    itl_p95_s: float
    prompt_tokens_computed: int
    kv_cells_peak: int
    max_batch_seqs: int
    # Decode-only steps (engine only; None for the baseline): EngineCore.step() outside
    # llama_decode, and the samplers' part of it, in milliseconds.
    host_ms_per_step: float | None = None
    host_ms_per_step_p50: float | None = None
    host_ms_per_step_p95: float | None = None
    sample_ms_per_step: float | None = None
    step_ms_per_step: float | None = None


def build_workload(engine: Engine, chats: int, system_tokens: int, max_tokens: int) -> Workload:
    system = _system_prompt(engine, system_tokens)
    questions = [f"Question {i + 1}: explain {TOPICS[i % len(TOPICS)]} in a few sentences." for i in range(chats)]
    prompts = [
        engine.inputs.chat_tokens([{"role": "system", "content": system}, {"role": "user", "content": q}])
        for q in questions
    ]
    warm = engine.inputs.chat_tokens(
        [{"role": "system", "content": system}, {"role": "user", "content": "Say hello."}]
    )
    return Workload(system, questions, prompts, warm, max_tokens)


def _system_prompt(engine: Engine, target_tokens: int) -> str:
    """The longest text of rules whose shareable prefix (what pinning caches, derived for
    any template) stays within target_tokens; at least one rule. A template that leaves
    the system text out of that prefix stops the growth at once instead of looping."""
    parts: list[str] = []
    size = 0
    for i in range(max(target_tokens, 1) + 1):  # each rule adds tokens, so this is enough
        rule = f"Rule {i + 1}: {SENTENCES[i % len(SENTENCES)]}"
        grown = _prefix_size(engine, " ".join(parts + [rule]))
        if grown > target_tokens and parts:
            return " ".join(parts)
        if grown <= size:
            raise SystemPromptError(
                "this model's chat template does not put the system prompt into the prefix its "
                "chats share, so a system prompt cannot be sized for the bench"
            )
        parts.append(rule)
        size = grown
    return " ".join(parts)


def _prefix_size(engine: Engine, system_prompt: str) -> int:
    return len(engine.inputs.system_prefix_tokens(system_prompt))


# ----- the engine side ------------------------------------------------------------------


def bench_sampling(kind: str, max_tokens: int) -> SamplingParams:
    """greedy: what the ratio benchmarks compare; default: the app's own chat settings."""
    if kind == "greedy":
        return SamplingParams.greedy(max_tokens, ignore_eos=True)
    return SamplingParams(max_tokens=max_tokens, ignore_eos=True)


def run_engine(engine: Engine, work: Workload, warm: bool, sampling_kind: str = "greedy") -> RunResult:
    if warm:
        engine.pin_system_prompt(work.system_prompt).result(timeout=600)
    engine.reset_metrics()
    sampling = bench_sampling(sampling_kind, work.max_tokens)
    t0 = time.perf_counter()
    handles = [
        engine.submit(ChatRequest(prompt_tokens=tuple(p), sampling=sampling)) for p in work.prompts
    ]
    results = [h.result(timeout=1800) for h in handles]
    wall = time.perf_counter() - t0
    m = engine.metrics(fresh=True)
    bad = [r for r in results if r.error or r.stats.generated_tokens != work.max_tokens]
    if bad:
        raise RuntimeError(f"{len(bad)} engine chats did not produce {work.max_tokens} tokens: {bad[0]}")
    ttfts = [r.stats.ttft_s for r in results]
    generated = sum(r.stats.generated_tokens for r in results)
    return RunResult(
        wall_s=wall,
        gen_tok_s=generated / wall,
        decode_tok_s=m.decode_only_tok_s,
        ttft_p50_s=percentile(ttfts, 50),
        ttft_p95_s=percentile(ttfts, 95),
        itl_p50_s=m.itl_p50_s,
        itl_p95_s=m.itl_p95_s,
        prompt_tokens_computed=m.prompt_tokens_computed,
        kv_cells_peak=m.kv_cells_peak,
        max_batch_seqs=m.max_step_seqs,
        host_ms_per_step=_ms(m.host_s_mean),
        host_ms_per_step_p50=_ms(m.host_s_p50),
        host_ms_per_step_p95=_ms(m.host_s_p95),
        sample_ms_per_step=_ms(m.sample_s_mean),
        step_ms_per_step=_ms(m.step_s_mean),
    )


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1000.0


# ----- the baseline: llama-cpp-python's Llama, one chat after another ----------------


def _load_llama(**kwargs: Any) -> Any:
    """llama-cpp-python's Llama with the engine's CPU repacking choice: Llama has no option
    for it, so its module's default model parameters are wrapped while it loads."""
    import llama_cpp.llama as llama_module

    from inference import backend

    module_api = llama_module.llama_cpp
    defaults = module_api.llama_model_default_params

    def engine_defaults() -> Any:
        params = defaults()
        params.use_extra_bufts = backend.cpu_repack_enabled()
        return params

    module_api.llama_model_default_params = engine_defaults
    try:
        return llama_module.Llama(**kwargs)
    finally:
        module_api.llama_model_default_params = defaults


def run_baseline(model: Path, n_ctx: int, threads: int, gpu_layers: int, work: Workload, warm: bool) -> RunResult:
    llm = _load_llama(
        model_path=str(model), n_ctx=n_ctx, n_batch=512, n_threads=threads,
        n_threads_batch=threads, n_gpu_layers=gpu_layers, verbose=False,
    )
    computed = [0]
    original_eval = llm.eval

    def counting_eval(tokens):
        computed[0] += len(tokens)
        return original_eval(tokens)

    llm.eval = counting_eval
    if warm:
        _generate(llm, work.warm_prompt, 1)
    computed[0] = 0
    t0 = time.perf_counter()
    ttfts, itls, peak = [], [], 0
    prompt_computed = 0
    for prompt in work.prompts:
        before = computed[0]
        times = _generate(llm, prompt, work.max_tokens)
        prompt_computed += computed[0] - before - (work.max_tokens - 1)
        ttfts.append(times[0] - t0)
        itls += [b - a for a, b in zip(times, times[1:])]
        peak = max(peak, llm.n_tokens)
    wall = time.perf_counter() - t0
    n = len(work.prompts) * work.max_tokens
    return RunResult(
        wall_s=wall,
        gen_tok_s=n / wall,
        decode_tok_s=len(itls) / sum(itls),
        ttft_p50_s=percentile(ttfts, 50),
        ttft_p95_s=percentile(ttfts, 95),
        itl_p50_s=percentile(itls, 50),
        itl_p95_s=percentile(itls, 95),
        prompt_tokens_computed=prompt_computed,
        kv_cells_peak=peak,
        max_batch_seqs=1,
    )


def _generate(llm, prompt: list[int], n: int) -> list[float]:
    """Greedy, exactly n tokens (generate() never stops at end-of-generation by itself)."""
    times = []
    for _token in llm.generate(prompt, temp=0.0, repeat_penalty=1.0, top_k=1):
        times.append(time.perf_counter())
        if len(times) == n:
            break
    return times


# ----- llama.cpp's own batched decode, for the decode-rate reference --------------------


def native_decode_tok_s(
    model: Path, n_seqs: int, shared_prompt: int, steps: int, threads: int, gpu_layers: int,
    reproducible: bool = False,
) -> float:
    """What `llama-batched-bench -pps -kvu` times in its generation phase: a prompt of
    shared_prompt tokens computed once and shared by n_seqs sequences, then one token per
    sequence per llama_decode, no sampling. Same llama.cpp build, same threads."""
    import llama_cpp as ll

    from inference import backend

    backend.init_backend()  # llama.cpp's log goes through Python logging, as in the engine
    mp = ll.llama_model_default_params()
    mp.n_gpu_layers = gpu_layers
    mp.use_extra_bufts = backend.cpu_repack_enabled()  # as the engine loads it (inference/worker/runner.py)
    model_ptr = ll.llama_model_load_from_file(str(model).encode(), mp)
    cp = ll.llama_context_default_params()
    cp.n_ctx = shared_prompt + n_seqs * steps + 512
    cp.n_batch = cp.n_ubatch = 512
    cp.n_seq_max = n_seqs
    cp.n_threads = cp.n_threads_batch = threads
    cp.kv_unified = True
    if reproducible:  # the same KV cache settings as the engine's reproducible mode
        cp.flash_attn_type = ll.LLAMA_FLASH_ATTN_TYPE_ENABLED
        cp.type_k = cp.type_v = backend.GGML_TYPE_Q8_0
    ctx = ll.llama_init_from_model(model_ptr, cp)
    batch = ll.llama_batch_init(512, 0, n_seqs)

    def decode(entries: list[tuple[int, int, int]]) -> None:
        for i, (token, pos, seq) in enumerate(entries):
            batch.token[i], batch.pos[i], batch.n_seq_id[i] = token, pos, 1
            batch.seq_id[i][0] = seq
            batch.logits[i] = True
        batch.n_tokens = len(entries)
        if ll.llama_decode(ctx, batch) != 0:
            raise RuntimeError("native decode failed")

    try:
        for start in range(0, shared_prompt, 512):  # the shared prompt, once (not timed)
            decode([(100 + k % 1000, k, 0) for k in range(start, min(start + 512, shared_prompt))])
        mem = ll.llama_get_memory(ctx)
        for s in range(1, n_seqs):
            ll.llama_memory_seq_cp(mem, 0, s, -1, -1)
        t0 = time.perf_counter()
        for step in range(steps):
            decode([((s * 31 + step * 7) % 1000 + 100, shared_prompt + step, s) for s in range(n_seqs)])
        ll.llama_synchronize(ctx)
        return n_seqs * steps / (time.perf_counter() - t0)
    finally:
        ll.llama_batch_free(batch)
        ll.llama_free(ctx)
        ll.llama_model_free(model_ptr)


# ----- the command ------------------------------------------------------------------------


def run_bench(args: argparse.Namespace, model: Path) -> int:
    n_seq = args.n_seq_max or args.chats + 2
    need = args.system_tokens + args.chats * (64 + args.max_tokens) + 512
    n_ctx = args.ctx or max(4096, 256 * ((need + 255) // 256))
    settings = settings_from_args(args, model, n_ctx=n_ctx, n_seq_max=n_seq, n_batch=max(512, n_seq))
    engine = Engine.start(settings)
    try:
        work = build_workload(engine, args.chats, args.system_tokens, args.max_tokens)
        threads, layers = settings.threads(), engine.info.n_gpu_layers
        eng = run_engine(engine, work, args.warm, args.sampling)
    finally:
        engine.shutdown()
    report: dict = {
        "config": {
            "model": model.name, "chats": args.chats, "system_tokens": args.system_tokens,
            "max_tokens": args.max_tokens, "warm": args.warm, "sampling": args.sampling, "threads": threads,
            "n_ctx": n_ctx,
            "n_seq_max": n_seq, "reproducible": settings.reproducible,
            "prompt_tokens_each": [len(p) for p in work.prompts],
        },
        "engine": asdict(eng),
    }
    if not args.skip_baseline:
        per_chat_ctx = max(len(p) for p in work.prompts) + args.max_tokens + 64
        base = run_baseline(model, per_chat_ctx, threads, layers, work, args.warm)
        report["baseline"] = asdict(base)
        report["ratio"] = {
            "gen_tok_s": eng.gen_tok_s / base.gen_tok_s,
            "ttft_p95_s": eng.ttft_p95_s / base.ttft_p95_s,
        }
    if args.native:
        native = native_decode_tok_s(
            model, min(args.chats, n_seq), _common_prefix(work.prompts) + 20, args.max_tokens, threads, layers,
            settings.reproducible,
        )
        report["native_decode_tok_s"] = native
        ratio = report.setdefault("ratio", {})
        ratio["decode_vs_native"] = eng.decode_tok_s / native
        if "baseline" in report:
            ratio["gen_tok_s_native_ceiling"] = _native_ceiling(eng, native, work) / base.gen_tok_s
    report["ideal"] = _ideal(work)
    print(json.dumps(report, indent=2) if args.json else _table(report))
    return 0


def _native_ceiling(eng: RunResult, native_tok_s: float, work: Workload) -> float:
    """gen_tok_s an engine would reach if, after the same time to first token, every
    decode step ran at llama.cpp's raw batched rate: the most batching can give here."""
    n = len(work.prompts)
    decode_s = (work.max_tokens - 1) * n / native_tok_s
    return n * work.max_tokens / (eng.ttft_p95_s + decode_s)


def _common_prefix(prompts: list[list[int]]) -> int:
    first = prompts[0]
    n = len(first)
    for p in prompts[1:]:
        n = min(n, next((i for i, (a, b) in enumerate(zip(first, p)) if a != b), min(len(first), len(p))))
    return n


def _ideal(work: Workload) -> dict:
    """Prompt tokens and cells if the shared prefix were computed and stored once."""
    shared = _common_prefix(work.prompts)
    own = sum(len(p) - shared for p in work.prompts)
    return {
        "shared_prefix_tokens": shared,
        "prompt_tokens": shared + own,
        "kv_cells": shared + own + len(work.prompts) * work.max_tokens,
    }


def _table(report: dict) -> str:
    rows = ["wall_s", "gen_tok_s", "decode_tok_s", "ttft_p50_s", "ttft_p95_s", "itl_p50_s",
            "itl_p95_s", "prompt_tokens_computed", "kv_cells_peak", "max_batch_seqs",
            "host_ms_per_step", "host_ms_per_step_p50", "host_ms_per_step_p95", "sample_ms_per_step",
            "step_ms_per_step"]
    cols = [c for c in ("engine", "baseline") if c in report]
    lines = [f"config: {json.dumps(report['config'])}", f"{'':<24}" + "".join(f"{c:>12}" for c in cols)]
    for r in rows:
        lines.append(f"{r:<24}" + "".join(_fmt(report[c][r]) for c in cols))
    for k, v in report.get("ratio", {}).items():
        lines.append(f"ratio {k:<18}{v:>12.3f}")
    if "native_decode_tok_s" in report:
        lines.append(f"{'native decode tok/s':<24}{report['native_decode_tok_s']:>12.1f}")
    lines.append(f"ideal (shared prefix once): {json.dumps(report['ideal'])}")
    return "\n".join(lines)


def _fmt(v) -> str:
    if v is None:
        return f"{'-':>12}"
    return f"{v:>12.3f}" if isinstance(v, float) else f"{v:>12}"
