"""llama.cpp's own server on `chorus bench --workload edit`'s requests: the peer that
docs/benchmarks.md#speculative-decoding compares Chorus's speculative decoding with.

    python tests/support/peer_speculation.py LLAMA_SERVER MODEL.gguf [--chats 1]
        [--max-tokens 256] [--rounds 3] [--spec-types none,ngram-simple,ngram-mod]

For each speculation type it starts LLAMA_SERVER (a llama.cpp build's `llama-server`, not
part of this repository or its set-up) on loopback with one slot a chat and 2 threads,
sends the edit workload's prompts as the very token ids Chorus's bench sends (rendered by
Chorus's template), greedy, exactly --max-tokens tokens each, all chats at once, --rounds
times, and prints the server's own decode rate (timings.predicted_per_second, summed over
the chats of a round) and its draft tokens. A measuring tool run by hand, not a test.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

from app.bench.workload import edit_messages
from inference import Engine, LoadSettings

PORT = 18093


def edit_prompts(model: Path, chats: int) -> list[list[int]]:
    """The bench's edit prompts, as token ids from Chorus's own rendering."""
    engine = Engine.start(LoadSettings(model_path=model, n_ctx=4096, n_seq_max=2))
    try:
        return [engine.inputs.chat_tokens(edit_messages(i)) for i in range(chats)]
    finally:
        engine.shutdown()


def start_server(binary: str, model: Path, chats: int, spec_type: str) -> subprocess.Popen[bytes]:
    args = [binary, "-m", str(model), "-c", str(4096 * chats), "-np", str(chats), "-t", "2", "-tb", "2",
            "--host", "127.0.0.1", "--port", str(PORT), "-kvu", "--no-webui"]
    if spec_type != "none":
        args += ["--spec-type", spec_type]
    server = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{PORT}/health", timeout=2).status_code == 200:
                return server
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    server.kill()
    raise RuntimeError(f"llama-server did not become ready ({' '.join(args)})")


def complete(prompt: list[int], max_tokens: int) -> dict[str, Any]:
    body = {"prompt": prompt, "n_predict": max_tokens, "temperature": 0, "top_k": 1, "ignore_eos": True,
            "cache_prompt": True}
    response = httpx.post(f"http://127.0.0.1:{PORT}/completion", json=body, timeout=600)
    response.raise_for_status()
    result: dict[str, Any] = response.json()
    return result


def measure(binary: str, model: Path, prompts: list[list[int]], max_tokens: int, rounds: int,
            spec_type: str) -> dict[str, Any]:
    server = start_server(binary, model, len(prompts), spec_type)
    try:
        rates, drafted, accepted = [], 0, 0
        with ThreadPoolExecutor(len(prompts)) as pool:
            for _ in range(rounds):
                results = list(pool.map(lambda p: complete(p, max_tokens), prompts))
                timings = [r["timings"] for r in results]
                rates.append(sum(t["predicted_per_second"] for t in timings))
                drafted += sum(t.get("draft_n", 0) for t in timings)
                accepted += sum(t.get("draft_n_accepted", 0) for t in timings)
        return {"spec_type": spec_type, "decode_tok_s": rates, "median": statistics.median(rates),
                "draft_tokens": drafted, "draft_tokens_accepted": accepted}
    finally:
        server.terminate()
        server.wait(30)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("server")
    parser.add_argument("model", type=Path)
    parser.add_argument("--chats", type=int, default=1)
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--spec-types", default="none,ngram-simple,ngram-mod")
    args = parser.parse_args()
    prompts = edit_prompts(args.model, args.chats)
    for spec_type in args.spec_types.split(","):
        print(json.dumps(measure(args.server, args.model, prompts, args.max_tokens, args.rounds, spec_type)))
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
