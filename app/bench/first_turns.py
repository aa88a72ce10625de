"""Many chats' first turns at once, on a cold cache: how often the prompt's part they share
(a system prompt, the tool list of the servers they use) is computed. The engine should
compute it once and give its KV cells to every chat; the chats' own questions once each."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from inference import ChatRequest, Engine, SamplingParams


def shared_prefix_length(prompts: Sequence[Sequence[int]]) -> int:
    """The number of leading tokens every prompt has alike."""
    first = prompts[0]
    length = min(len(p) for p in prompts)
    for i in range(length):
        if any(p[i] != first[i] for p in prompts):
            return i
    return length


def first_turns_at_once(engine: Engine, prompts: Sequence[Sequence[int]]) -> dict[str, Any]:
    """Submit every prompt at once (one token each: the prompt is what is measured) and count
    the prompt tokens the engine computed against what computing the shared part once and
    each chat's own part once would be. shared_computed_times: how many times the shared part
    was computed (1.0: once; below 1: the cache held part of it already)."""
    sampling = SamplingParams.greedy(1)
    handles = [engine.submit(ChatRequest(prompt_tokens=tuple(p), sampling=sampling)) for p in prompts]
    results = [h.result(timeout=1800) for h in handles]
    failed = [r.error for r in results if r.error]
    if failed:
        raise RuntimeError(f"a first turn failed: {failed[0]}")
    shared = shared_prefix_length(prompts)
    own = sum(len(p) - shared for p in prompts)
    computed = sum(r.stats.prompt_tokens - r.stats.cached_tokens for r in results if r.stats is not None)
    return {"chats": len(prompts), "prompt_tokens": sum(len(p) for p in prompts), "shared_tokens": shared,
            "own_tokens": own, "computed_tokens": computed, "computed_if_shared_once": shared + own,
            "shared_computed_times": max(0, computed - own) / shared if shared else float("nan")}
