"""The disk prompt cache on the real model: after a restart the next turn of a conversation
starts from the saved KV, its greedy reply is the one the engine would have given without
the restart, and a damaged cache file costs nothing but the prefill."""

from __future__ import annotations

from pathlib import Path

import pytest

from inference.core.engine import Engine
from inference.params import ChatRequest, LoadSettings, SamplingParams

pytestmark = pytest.mark.model

STORY = "Tell me about the lighthouse keeper who collected the names of passing ships. " * 24


def settings(model_path: Path, cache: Path | None) -> LoadSettings:
    # Reproducible: a sequence's logits do not depend on what else shares its batch.
    return LoadSettings(model_path=model_path, n_ctx=2048, n_seq_max=4, reproducible=True, kv_cache_dir=cache)


def ask(engine: Engine, messages: list[dict], max_tokens: int = 24) -> str:
    done = engine.submit(ChatRequest(messages=tuple(messages), sampling=SamplingParams.greedy(max_tokens))).result(600)
    assert done.error is None
    return done.text


def next_turn(messages: list[dict], reply: str) -> list[dict]:
    return messages + [{"role": "assistant", "content": reply}, {"role": "user", "content": "And what then?"}]


@pytest.fixture(scope="module")
def story(model_path, tmp_path_factory):
    """One conversation turn on an engine with the cache, then its next turn on the same
    engine (the reply a restart must not change). Returns (cache folder, next turn, reply)."""
    cache = tmp_path_factory.mktemp("kv-cache")
    first = [{"role": "user", "content": STORY}]
    with Engine.start(settings(model_path, cache)) as engine:
        follow = next_turn(first, ask(engine, first))
        unrestarted = ask(engine, follow)
        assert engine.metrics(fresh=True).prompt_tokens_restored == 0
    return cache, follow, unrestarted


def test_after_a_restart_the_next_turn_is_restored_and_replies_the_same(model_path, story, tmp_path):
    cache, follow, unrestarted = story
    assert list(cache.rglob("*.kvs"))
    with Engine.start(settings(model_path, cache)) as engine:
        reply = ask(engine, follow)
        m = engine.metrics(fresh=True)
    assert m.kv_restores >= 1 and m.prompt_tokens_restored > 300
    assert reply == unrestarted


def test_a_full_recompute_gives_the_same_greedy_reply(model_path, story):
    """The saved KV of the first turn's reply was computed one token per step and the
    recompute computes it in one prompt batch: in reproducible mode both give the same."""
    _cache, follow, unrestarted = story
    with Engine.start(settings(model_path, None)) as engine:
        assert ask(engine, follow) == unrestarted


def test_a_damaged_cache_file_never_breaks_a_request(model_path, story, tmp_path):
    cache, follow, unrestarted = story
    copy = tmp_path / "kv-cache"
    for path in cache.rglob("*.kvs"):
        target = copy / path.relative_to(cache)
        target.parent.mkdir(parents=True, exist_ok=True)
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0xFF  # one flipped byte in the KV data
        target.write_bytes(bytes(data))
    damaged = {p: p.read_bytes() for p in copy.rglob("*.kvs")}
    with Engine.start(settings(model_path, copy)) as engine:
        reply = ask(engine, follow)
        m = engine.metrics(fresh=True)
    assert reply == unrestarted and m.prompt_tokens_restored == 0 and m.kv_restore_failures >= 1
    # Deleted; this turn saved its own sequence again (under the same name: same tokens).
    assert all(not p.exists() or p.read_bytes() != data for p, data in damaged.items())


def test_llama_refuses_a_truncated_state_and_leaves_the_sequence_empty(model_path, tmp_path):
    with Engine.start(settings(model_path, None)) as engine:
        ask(engine, [{"role": "user", "content": STORY}], max_tokens=2)

        def probe(core) -> tuple[bool, int, bool, int]:
            seq = next(s for s in range(4) if core.kv.seq_len(s) > 0)
            blob = bytearray(core.runner.state_seq_get(seq))
            free = next(s for s in range(4) if core.kv.seq_len(s) == 0)
            cut = core.runner.state_seq_set(free, bytearray(blob[: len(blob) // 2]))
            cut_end = core.runner.seq_pos_max(free)
            whole = core.runner.state_seq_set(free, blob)
            end = core.runner.seq_pos_max(free)
            core.runner.seq_rm(free, 0, -1)
            return cut, cut_end, whole, end - core.runner.seq_pos_max(seq)

        cut, cut_end, whole, end_diff = engine.call(probe)
    assert not cut and cut_end == -1
    assert whole and end_diff == 0


def test_bench_restart_reports_both_ttfts_and_the_restored_tokens(model_path, tmp_path):
    import json
    import os
    import subprocess
    import sys

    env = {**os.environ, "CHORUS_DATA_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-m", "app", "bench-restart", "--model", str(model_path),
                           "--history-tokens", "300", "--json"], capture_output=True, text=True, env=env,
                          timeout=900)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["ttft_recompute_s"] > 0 and report["ttft_restored_s"] > 0
    assert report["ratio"] == report["ttft_restored_s"] / report["ttft_recompute_s"]
    assert report["restored_tokens"] >= 300 and report["prompt_tokens"] > report["restored_tokens"]
    assert not (tmp_path / "kv-cache").exists()  # the bench's cache lives in a scratch folder


def test_gemma_restores_after_a_restart_too(gemma_path, tmp_path):
    """Gemma 3: another template (no system role), sliding-window attention layers and a
    262k vocabulary. Its saved sequence is restored after a restart and the greedy next
    turn is the one the engine gave without the restart."""
    cache = tmp_path / "kv-cache"
    first = [{"role": "user", "content": STORY}]
    with Engine.start(settings(gemma_path, cache)) as engine:
        follow = next_turn(first, ask(engine, first))
        unrestarted = ask(engine, follow)
    assert list(cache.rglob("*.kvs"))
    with Engine.start(settings(gemma_path, cache)) as engine:
        reply = ask(engine, follow)
        m = engine.metrics(fresh=True)
    assert m.kv_restores >= 1 and m.prompt_tokens_restored > 300
    assert reply == unrestarted
