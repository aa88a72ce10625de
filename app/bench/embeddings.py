"""Throughput of POST /v1/embeddings and the memory its context adds, on a real server:
`python -m app.bench.embeddings [--model PATH] [--seconds S]`.

Starts `chorus serve`'s engine and server in this process on loopback, notes the process's
memory (Rss, Pss), sends one embeddings request (the worker loads then), notes it again,
then for 1 and 64 inputs a request sends requests back to back for S seconds each and
prints inputs per second. Inputs are distinct sentences of about 16 tokens."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import httpx

from app.models import catalog
from app.paths import data_dir, models_dir
from app.server.config import ServerConfig
from app.server.uvicorn_server import HttpServer
from inference import Engine, LoadSettings


def memory_mib() -> dict[str, float]:
    """The process's Rss and Pss (Linux): Rss counts a file page once per mapping of it, Pss
    once in all, so Pss is what a second mapping of the same model file really adds."""
    with open("/proc/self/smaps_rollup") as f:
        fields = dict(line.split(":", 1) for line in f if line.startswith(("Rss:", "Pss:")))
    return {k: int(v.split()[0]) / 1024 for k, v in fields.items()}


def sentences(n: int, offset: int) -> list[str]:
    return [f"Note {offset + i}: the tide at the lighthouse comes in at {(offset + i) % 12 + 1} o'clock."
            for i in range(n)]


def rate(url: str, per_request: int, seconds: float) -> tuple[float, int]:
    """Inputs per second over back-to-back requests of per_request inputs."""
    done, start = 0, time.perf_counter()
    with httpx.Client(timeout=120) as http:
        while time.perf_counter() - start < seconds:
            reply = http.post(url, json={"input": sentences(per_request, done), "encoding_format": "base64"})
            reply.raise_for_status()
            done += per_request
    return done / (time.perf_counter() - start), done


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=None, help="a GGUF file (default: the default model)")
    parser.add_argument("--seconds", type=float, default=10.0, help="seconds of requests per size")
    args = parser.parse_args(argv)
    model = args.model or catalog.fetch(catalog.CATALOG[catalog.DEFAULT_MODEL], models_dir(data_dir()))
    engine = Engine.start(LoadSettings(model_path=model, n_ctx=4096, n_seq_max=8))
    server = HttpServer(engine, ServerConfig(port=0)).start()
    try:
        url = f"{server.url}/v1/embeddings"
        before = memory_mib()
        httpx.post(url, json={"input": "warm up"}, timeout=120).raise_for_status()
        after = memory_mib()
        print(f"model {model.name}; " + ", ".join(
            f"{k} {before[k]:.0f} MiB with the engine, {after[k]:.0f} once the embedding context loaded "
            f"(+{after[k] - before[k]:.0f})" for k in ("Rss", "Pss")))
        for per_request in (1, 64):
            per_s, n = rate(url, per_request, args.seconds)
            print(f"{per_request:>3} inputs a request: {per_s:7.1f} inputs/s ({n} inputs)")
    finally:
        server.stop()
        engine.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
