"""`chorus bench-engines`: two models decoding at the same time in two engine processes,
first with every engine on all the cores, then with the cores split between them (what the
compare view does). Both runs happen here, side by side, so the ratio is what to read.
run_engines_bench() returns both runs; render() is their lines or JSON."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from app.engines.process import EngineProcess
from inference import ChatRequest, LoadSettings, SamplingParams, physical_cores

PROMPT = "Tell me a long story about a lighthouse keeper."


@dataclass(frozen=True)
class EnginesBenchOptions:
    models: tuple[Path, ...]  # the GGUF files, one engine each
    threads: int | None = None  # cores to use; None: the physical cores
    max_tokens: int = 150


@dataclass(frozen=True)
class Run:
    threads: int
    tok_s: dict[str, float]  # per model, decode tokens/s
    wall_s: float

    @property
    def total(self) -> float:
        return sum(self.tok_s.values())


def run_pair(models: list[Path], threads: int, max_tokens: int) -> Run:
    done = {m.name: threading.Event() for m in models}
    rates: dict[str, float] = {}
    clients = []
    for model in models:
        settings = LoadSettings(model_path=model, n_ctx=2048, n_seq_max=2, n_threads=threads, n_threads_batch=threads)
        clients.append(EngineProcess(settings))
    try:
        for client in clients:
            client.start(wait=True)
        sampling = SamplingParams(temperature=0.0, max_tokens=max_tokens, ignore_eos=True)
        start = time.perf_counter()
        for client, model in zip(clients, models):
            def on_delta(delta, name=model.name):
                if delta.finished:
                    rates[name] = (delta.stats.decode_tok_s or 0.0) if delta.stats else 0.0
                    done[name].set()

            client.stream(ChatRequest(messages=({"role": "user", "content": PROMPT},), sampling=sampling), on_delta)
        for event in done.values():
            if not event.wait(600):
                raise TimeoutError("a model did not finish in 10 minutes")
        return Run(threads, rates, time.perf_counter() - start)
    finally:
        for client in clients:
            client.shutdown()


def run_engines_bench(options: EnginesBenchOptions) -> list[Run]:
    """All the cores for every engine, then the cores split between them."""
    models = list(options.models)
    cores = options.threads or physical_cores()
    share = max(1, cores // len(models))
    return [run_pair(models, cores, options.max_tokens), run_pair(models, share, options.max_tokens)]


def render(runs: list[Run], as_json: bool) -> str:
    """Both runs as one JSON list, or a line each and the ratio of their totals."""
    if as_json:
        return json.dumps([{"threads": r.threads, "tok_s": r.tok_s, "wall_s": r.wall_s} for r in runs])
    lines = []
    for r in runs:
        rates = ", ".join(f"{name} {rate:.1f}" for name, rate in r.tok_s.items())
        lines.append(f"{r.threads} thread(s) per engine: {rates} tok/s (total {r.total:.1f}); wall {r.wall_s:.1f} s")
    lines.append(f"split cores / all cores each, total decode tok/s: {runs[1].total / max(runs[0].total, 1e-9):.2f}x")
    return "\n".join(lines)
