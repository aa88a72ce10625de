"""`chorus bench-restart`: the next turn of a long conversation after an engine restart,
with the disk prompt cache and without it, measured side by side in one run.

It builds a conversation of about history_tokens tokens, runs its last turn on an engine
with the prompt cache in a scratch folder (the finished sequence is saved), stops that
engine, then starts a fresh one twice: with the saved cache and without, timing the
first token of the same next turn (greedy, so the two replies can be compared too).
run_restart_bench() returns the report; render() is its lines or JSON.
"""

from __future__ import annotations

import json
import tempfile
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from app.bench.workload import SENTENCES, TOPICS
from inference import ChatRequest, Engine, LoadSettings, SamplingParams

REPLY_TOKENS = 32  # each timed turn's reply (greedy); TTFT is what is compared


@dataclass(frozen=True)
class RestartBenchOptions:
    history_tokens: int = 4000  # tokens of the conversation before the timed turn
    ctx: int | None = None  # context size; None: sized for the history


@dataclass(frozen=True)
class TurnResult:
    ttft_s: float
    text: str
    prompt_tokens: int
    restored_tokens: int
    cached_tokens: int


def build_history(engine: Engine, history_tokens: int) -> list[dict]:
    """A system prompt and alternating user/assistant turns until the rendered
    conversation reaches history_tokens (the assistant turns are written, not generated)."""
    messages: list[dict] = [{"role": "system", "content": " ".join(SENTENCES)}]
    i = 0
    while len(engine.inputs.chat_tokens(messages)) < history_tokens:
        topic = TOPICS[i % len(TOPICS)]
        messages.append({"role": "user", "content": f"Question {i + 1}: tell me about {topic}."})
        answer = " ".join(SENTENCES[(i + k) % len(SENTENCES)] for k in range(6))
        messages.append({"role": "assistant", "content": f"About {topic}: {answer}"})
        i += 1
    messages.append({"role": "user", "content": "Summarize our conversation in one sentence."})
    return messages


def timed_turn(settings: LoadSettings, messages: list[dict]) -> TurnResult:
    """Start an engine, time one greedy turn from submit to its first token, stop it."""
    engine = Engine.start(settings)
    try:
        chat = engine.prepare(ChatRequest(messages=tuple(messages), sampling=SamplingParams.greedy(REPLY_TOKENS)))
        started = time.perf_counter()
        handle = engine.submit(chat)
        ttft = None
        for delta in handle:
            if ttft is None and delta.token_ids:
                ttft = time.perf_counter() - started
        done = handle.result()
        if done.error:
            raise RuntimeError(done.error)
        snap = engine.metrics(fresh=True)
        prompt = len(chat.prompt_tokens or ())
    finally:
        engine.shutdown()  # writes the prompt cache files under way
    return TurnResult(ttft if ttft is not None else float("nan"), done.text, prompt,
                      snap.prompt_tokens_restored, snap.prompt_tokens_saved)


def run_restart_bench(options: RestartBenchOptions, settings: LoadSettings) -> dict[str, Any]:
    """The three timed turns on settings (the model and the caller's engine options, with
    the context, sequences and prompt cache folder set here); the report."""
    n_ctx = options.ctx or max(4096, 256 * ((options.history_tokens + 1024 + 255) // 256))
    with tempfile.TemporaryDirectory(prefix="chorus-bench-restart-") as scratch:
        cached = replace(settings, n_ctx=n_ctx, n_seq_max=4, kv_cache_dir=Path(scratch))
        cold = replace(cached, kv_cache_dir=None)
        probe = Engine.start(cold)
        try:
            history = build_history(probe, options.history_tokens)
        finally:
            probe.shutdown()
        first = timed_turn(cached, history)  # computes the history; its sequence is saved
        follow = history + [{"role": "assistant", "content": first.text},
                            {"role": "user", "content": "Now name the three most useful points."}]
        recompute = timed_turn(cold, follow)
        restored = timed_turn(cached, follow)
        files = list(Path(scratch).rglob("*.kvs"))
        cache_mb = sum(f.stat().st_size for f in files) / 2**20
    return {
        "config": {"model": settings.model_path.name, "history_tokens": options.history_tokens, "n_ctx": n_ctx,
                   "threads": cached.threads(), "reproducible": cached.reproducible},
        "prompt_tokens": restored.prompt_tokens,
        "ttft_first_turn_s": first.ttft_s,
        "ttft_recompute_s": recompute.ttft_s,
        "ttft_restored_s": restored.ttft_s,
        "ratio": restored.ttft_s / recompute.ttft_s,
        "restored_tokens": restored.restored_tokens,
        "same_output": restored.text == recompute.text,
        "cache_files": len(files),
        "cache_mb": round(cache_mb, 1),
        "turns": {"recompute": asdict(recompute), "restored": asdict(restored)},
    }


def render(report: dict[str, Any], as_json: bool) -> str:
    """The report as one JSON object, or as a few lines: both TTFTs and their ratio."""
    if as_json:
        return json.dumps(report, indent=2)
    recompute, restored = report["turns"]["recompute"], report["turns"]["restored"]
    return "\n".join([
        f"model {report['config']['model']}, next turn of a {report['prompt_tokens']}-token conversation "
        "after a restart",
        f"  TTFT recompute   {recompute['ttft_s']:8.3f} s",
        f"  TTFT restored    {restored['ttft_s']:8.3f} s  ({report['restored_tokens']} tokens from disk, "
        f"{report['cache_mb']:.1f} MiB in {report['cache_files']} file(s))",
        f"  ratio            {report['ratio']:8.3f}   (goal <= 0.1)",
        f"  same greedy reply: {report['same_output']}",
    ])
