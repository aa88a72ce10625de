"""Models on demand, measured on a real server: `python -m app.bench.models_on_demand
[--max-tokens T] [--rounds R] [--json]`.

`chorus serve --models`'s pool and server in this process on loopback, with the catalog's
SmolLM2 and Gemma 3 270M (fetched if missing). Per round, for each model:
- load: Engine.start alone, timed (the file in the page cache after the first round);
- cold: its first request after an unload (keep_alive 0 unloads it), time to first token,
  which is its load plus its TTFT; then warm: a request of the same length on another topic
  (the template's part of the prompt cached, as on any running server), TTFT;
- solo: T tokens streamed (ignore_eos) with only that model loaded, the decode rate from the
  first token to the last;
then both models loaded and streaming T tokens at once, each one's decode rate, and each
alone with the other loaded but idle (the cores stay split while both are loaded)."""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import httpx

from app.engines.model_pool import LoadedEngine, ModelPool, PoolModel
from app.models import catalog
from app.models.capacity import load_bytes
from app.paths import data_dir, models_dir
from app.server.config import ServerConfig
from app.server.pooled_models import PooledModels
from app.server.uvicorn_server import HttpServer
from inference import Engine, LoadSettings
from inference.gguf import read_gguf_header

MODELS = ("smollm2-135m", "gemma3-270m")
PROMPT = "Write a long story about a lighthouse keeper and the {}."
TOPICS = ("sea", "moon", "storm", "gulls", "ships", "fog", "stars", "tide")


def start_engine(model: PoolModel, threads: int, progress: Callable[[float], None]) -> LoadedEngine:
    assert isinstance(model.load, LoadSettings)
    return Engine.start(replace(model.load, n_threads=threads, n_threads_batch=threads), on_progress=progress)


_asked = iter(range(10**9))


def stream(url: str, model: str, max_tokens: int, keep_alive: float | None = None) -> dict[str, float]:
    """One streamed chat completion: seconds to the first token, the decode rate after it. Each
    asks about another topic: no request finds its whole prompt in the prefix cache."""
    prompt = PROMPT.format(TOPICS[next(_asked) % len(TOPICS)])
    body: dict = {"model": model, "messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens,
                  "temperature": 0, "ignore_eos": True, "stream": True, "stream_options": {"include_usage": True}}
    if keep_alive is not None:
        body["keep_alive"] = keep_alive
    start = time.perf_counter()
    first = last = None
    tokens = 0
    with httpx.stream("POST", f"{url}/v1/chat/completions", json=body, timeout=600) as reply:
        reply.raise_for_status()
        for line in reply.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            if chunk.get("usage"):
                tokens = chunk["usage"]["completion_tokens"]
            elif chunk["choices"] and chunk["choices"][0]["delta"].get("content"):
                last = time.perf_counter()
                first = first or last
    assert first is not None and last is not None
    rate = (tokens - 1) / (last - first) if last > first else 0.0
    return {"ttft_s": first - start, "tok_s": rate}


def state(url: str, model: str) -> str:
    listed = httpx.get(f"{url}/v1/models", timeout=30).json()["data"]
    return next(m["state"] for m in listed if m["id"] == model)


def unload(url: str, model: str) -> None:
    """A one-token request with keep_alive 0: the model is unloaded as soon as it ends."""
    stream(url, model, 1, keep_alive=0)
    deadline = time.monotonic() + 60
    while state(url, model) != "not loaded":
        assert time.monotonic() < deadline, f"{model} was not unloaded"
        time.sleep(0.05)


def together(url: str, max_tokens: int) -> dict[str, dict[str, float]]:
    """Every model streaming max_tokens at once."""
    results: dict[str, dict[str, float]] = {}

    def run(name: str) -> None:
        results[name] = stream(url, name, max_tokens)

    threads = [threading.Thread(target=run, args=(name,)) for name in MODELS]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--max-tokens", type=int, default=128, help="tokens per streamed reply")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    paths = {name: catalog.fetch(catalog.CATALOG[name], models_dir(data_dir())) for name in MODELS}
    settings = {name: LoadSettings(model_path=Path(p), n_ctx=2048, n_seq_max=4) for name, p in paths.items()}
    models = [PoolModel(n, load_bytes(s, read_gguf_header(s.model_path), False), s) for n, s in settings.items()]
    pool = ModelPool(models, start_engine, budget_bytes=sum(m.memory_bytes for m in models), keep_alive_s=300)
    server = HttpServer(None, ServerConfig(port=0), models=PooledModels(pool, MODELS[0])).start()
    url = server.url
    runs: dict[str, list[float]] = {}

    def note(key: str, value: float) -> None:
        runs.setdefault(key, []).append(value)

    try:
        for _ in range(args.rounds):
            for name in MODELS:
                for other in MODELS:
                    if state(url, other) == "loaded":
                        unload(url, other)
                started = time.perf_counter()
                Engine.start(settings[name]).shutdown()
                note(f"{name} load_s", time.perf_counter() - started)
                note(f"{name} cold_ttft_s", stream(url, name, 8)["ttft_s"])
                note(f"{name} warm_ttft_s", stream(url, name, 8)["ttft_s"])
                note(f"{name} solo_tok_s", stream(url, name, args.max_tokens)["tok_s"])
            for name in MODELS:  # both loaded (the last round left one): the other too
                stream(url, name, 1)
            for name in MODELS:
                note(f"{name} beside_idle_tok_s", stream(url, name, args.max_tokens)["tok_s"])
            for name, result in together(url, args.max_tokens).items():
                note(f"{name} together_tok_s", result["tok_s"])
    finally:
        server.stop()
        pool.shutdown()
    summary = {key: {"median": statistics.median(values), "min": min(values), "max": max(values)}
               for key, values in runs.items()}
    if args.json:
        print(json.dumps({"max_tokens": args.max_tokens, "rounds": args.rounds, "results": summary}, indent=2))
    else:
        for key, s in summary.items():
            print(f"{key:<34} median {s['median']:8.3f}  (min {s['min']:.3f}, max {s['max']:.3f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
