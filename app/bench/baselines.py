"""What `chorus bench` measures the engine against, straight on llama.cpp: llama-cpp-python's
high-level `Llama` running the chats one after another, and llama.cpp's raw batched decode.

The one module of the bench that imports llama_cpp (pyproject.toml's `llama` contract lets it):
the rest reaches the engine through its door, `inference`.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from app.bench.run_result import RunResult, seconds_at
from app.bench.workload import Workload

# ----- llama-cpp-python's Llama, one chat after another --------------------------------


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
        ttft_p50_s=seconds_at(ttfts, 50),
        ttft_p95_s=seconds_at(ttfts, 95),
        itl_p50_s=seconds_at(itls, 50),
        itl_p95_s=seconds_at(itls, 95),
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
