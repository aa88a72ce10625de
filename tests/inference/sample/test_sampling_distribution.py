"""The numpy sampler draws from the distribution its settings define, and so does
llama.cpp's chain on the same logits (no model needed).

The target distribution is computed here from first principles, in llama.cpp's order:
top-k, top-p on the softmax of the top-k set, min-p relative to the best token, then
temperature. Each check draws N tokens and bounds the total-variation distance between the
empirical and the target distribution: E[TV] <= sum_i sqrt(p_i (1 - p_i) / N) / 2, and TV
of N independent draws moves by at most 1/N per draw, so by McDiarmid's inequality it
exceeds E[TV] + sqrt(ln(1/delta) / 2N) with probability below delta = 1e-12. Each case
also shows that a plausible wrong order (temperature first) is farther from the target
than the bound: a sampler with that mistake would fail.
"""

from __future__ import annotations

import ctypes
import math
from dataclasses import replace

import llama_cpp as ll
import numpy as np
import pytest

from inference.params import SamplingParams
from inference.sample.grammar_chain import SamplerChain, _token_array
from inference.sample.rows import RequestSampler, sample_rows

DELTA = 1e-12
N = 100_000  # draws per case
V = 256
DEFAULT = SamplingParams(seed=0, repeat_penalty=1.0)  # the app's defaults, no history: fixed logits


def target(logits: np.ndarray, p: SamplingParams, temperature_first: bool = False) -> np.ndarray:
    """The chain's distribution over the vocabulary, step by step (exact, float64)."""
    x = logits.astype(np.float64)
    if temperature_first:  # the wrong order, for the power check
        x = x / p.temperature
    order = sorted(range(x.size), key=lambda t: -x[t])
    if 0 < p.top_k < x.size:
        order = order[: p.top_k]
    best = x[order[0]]
    if p.top_p < 1.0:
        weights = [math.exp(x[t] - best) for t in order]
        z, running, kept = sum(weights), 0.0, []
        for t, w in zip(order, weights):
            kept.append(t)
            running += w
            if running >= p.top_p * z:
                break
        order = kept
    if p.min_p > 0.0:
        order = [t for t in order if x[t] >= best + math.log(p.min_p)]
    out = np.zeros(x.size)
    scale = 1.0 if temperature_first else p.temperature
    for t in order:
        out[t] = math.exp((x[t] - best) / scale)
    return out / out.sum()


def bound(p: np.ndarray, n: int) -> float:
    return float(np.sum(np.sqrt(p * (1 - p) / n)) / 2 + math.sqrt(math.log(1 / DELTA) / (2 * n)))


def numpy_draws(logits: np.ndarray, params: SamplingParams, n: int, rows: int = 1000) -> np.ndarray:
    samplers = [RequestSampler(replace(params, seed=i)) for i in range(rows)]
    draws = []
    for _ in range(n // rows):
        draws.extend(sample_rows(np.tile(logits, (rows, 1)), samplers))
    return np.bincount(draws, minlength=logits.size)


def chain_draws(logits: np.ndarray, params: SamplingParams, n: int) -> np.ndarray:
    chain = SamplerChain(params, logits.size, [])
    data = np.zeros(logits.size, dtype=[("id", np.int32), ("logit", np.float32), ("p", np.float32)])
    counts = np.zeros(logits.size, dtype=np.int64)
    try:
        for _ in range(n):
            data["id"] = np.arange(logits.size)
            data["logit"] = logits
            cur = _token_array(data)
            ll.llama_sampler_apply(chain._chain, ctypes.byref(cur))
            counts[data[cur.selected]["id"]] += 1
    finally:
        chain.close()
    return counts


def peaked() -> np.ndarray:
    """A few likely tokens (min-p and top-p cut), a long tail."""
    x = np.full(V, -8.0, dtype=np.float32)
    x[:8] = [4.0, 3.6, 3.1, 2.5, 1.9, 1.2, 0.9, 0.2]
    x[8:60] = np.linspace(0.0, -3.0, 52)
    return x


def flat() -> np.ndarray:
    """More than top_k tokens pass min-p: top-k cuts, then top-p inside the top-k set."""
    x = np.full(V, -10.0, dtype=np.float32)
    x[:60] = np.linspace(2.0, -1.0, 60)
    return x


def heavy_tail() -> np.ndarray:
    """The top-p cut depends on top-k tokens far below the best one (weight 1e-3 each):
    a sampler that normalised top-p over its few candidates only would drop token 1."""
    x = np.full(V, -30.0, dtype=np.float32)
    x[0], x[1] = 0.0, -0.5
    x[2:40] = -7.0
    return x


CASES = {
    "defaults on peaked logits": (peaked(), DEFAULT),
    "defaults, top-k cuts": (flat(), DEFAULT),
    "top-p normalised over the whole top-k set": (heavy_tail(), replace(DEFAULT, top_p=0.62, temperature=1.3)),
    "top_k=0, min_p=0, top_p=1: plain softmax": (flat(), replace(DEFAULT, top_k=0, min_p=0.0, top_p=1.0)),
    "min_p=0 with top-k and top-p": (peaked(), replace(DEFAULT, min_p=0.0, top_p=0.9, temperature=1.0)),
    "top_k=0 with min-p": (flat(), replace(DEFAULT, top_k=0, min_p=0.3, top_p=1.0, temperature=2.0)),
}


@pytest.mark.parametrize("case", list(CASES))
def test_numpy_draws_match_the_settings(case: str) -> None:
    logits, params = CASES[case]
    p = target(logits, params)
    n = N
    counts = numpy_draws(logits, params, n)
    assert counts[p == 0].sum() == 0, "drew a token the settings exclude"
    tv = np.abs(counts / n - p).sum() / 2
    assert tv < bound(p, n), f"TV {tv:.4f} >= {bound(p, n):.4f}"


def test_the_bound_tells_wrong_semantics_apart() -> None:
    """Temperature applied before the cuts, or top-p normalised over the likely tokens
    only, is far outside the bound: a sampler making either mistake fails the test."""
    logits, params = CASES["defaults on peaked logits"]
    p = target(logits, params)
    assert np.abs(target(logits, params, temperature_first=True) - p).sum() / 2 > 2 * bound(p, N)
    logits, params = CASES["top-p normalised over the whole top-k set"]
    p = target(logits, params)
    likely_only = np.where(logits > -7.0, logits, -30.0).astype(np.float32)
    assert np.abs(target(likely_only, params) - p).sum() / 2 > 2 * bound(p, N)


@pytest.mark.parametrize("case", ["defaults on peaked logits", "defaults, top-k cuts",
                                  "top-p normalised over the whole top-k set"])
def test_llama_cpps_chain_draws_the_same_distribution(case: str) -> None:
    logits, params = CASES[case]
    p = target(logits, params)
    n = 60_000
    counts = chain_draws(logits, params, n)
    assert counts[p == 0].sum() == 0
    assert np.abs(counts / n - p).sum() / 2 < bound(p, n)


def test_a_tiny_temperature_is_the_argmax() -> None:
    logits = peaked()
    counts = numpy_draws(logits, replace(DEFAULT, temperature=1e-6), 2_000, rows=100)
    assert counts[0] == 2_000


def real_sized_logits() -> np.ndarray:
    rng = np.random.default_rng(3)
    logits = (rng.standard_normal(49_152) - 6).astype(np.float32)
    logits[:7] = [9.0, 8.2, 7.5, 6.4, 5.0, 4.1, 3.3]
    return logits


def test_vocabulary_sized_rows_with_a_top_k_take_the_kernel_and_match(monkeypatch) -> None:
    """49k-token rows like the real model's, the app's defaults: the C kernel's top-k set,
    never the threshold path; same distribution."""
    import inference.sample.rows as numpy_sampler

    monkeypatch.setattr(numpy_sampler, "_draw", lambda rows, samplers: pytest.fail("threshold path used"))
    logits = real_sized_logits()
    p = target(logits, DEFAULT)
    n = 10_000
    counts = numpy_draws(logits, DEFAULT, n, rows=50)
    assert counts[p == 0].sum() == 0
    assert np.abs(counts / n - p).sum() / 2 < bound(p, n)


def test_vocabulary_sized_rows_without_a_top_k_take_the_threshold_and_match(monkeypatch) -> None:
    """top_k=0: candidates found by one threshold, the rest of the vocabulary never
    sorted (no row takes the exact path); same distribution."""
    import inference.sample.rows as numpy_sampler

    exact = []
    monkeypatch.setattr(numpy_sampler, "_draw_exact", lambda row, sampler: exact.append(1))
    monkeypatch.setattr(numpy_sampler, "draw_rows", lambda *args: pytest.fail("kernel path used"))
    logits = real_sized_logits()
    params = replace(DEFAULT, top_k=0)
    p = target(logits, params)
    n = 10_000
    counts = numpy_draws(logits, params, n, rows=50)
    assert not exact
    assert counts[p == 0].sum() == 0
    assert np.abs(counts / n - p).sum() / 2 < bound(p, n)


def mixed_step_counts(logits: np.ndarray, kinds: list[SamplingParams], rows: int, steps: int = 100) -> list:
    """Draw counts per kind over steps in which row i samples with kinds[i % len(kinds)]."""
    samplers = [RequestSampler(replace(kinds[i % len(kinds)], seed=i)) for i in range(rows)]
    counts = [np.zeros(logits.size, dtype=np.int64) for _ in kinds]
    for _ in range(steps):
        for i, token in enumerate(sample_rows(np.tile(logits, (rows, 1)), samplers)):
            counts[i % len(kinds)][token] += 1
    return counts


def test_kernel_and_threshold_rows_in_one_step_each_draw_their_own_settings() -> None:
    """A step mixing greedy, kernel (top-k) and threshold (no top-k) rows: every row gets
    its own settings' distribution, whatever its neighbours take."""
    logits = flat()
    no_top_k = replace(DEFAULT, top_k=0, min_p=0.3, top_p=1.0, temperature=2.0)
    kinds = [replace(DEFAULT, temperature=0.0), DEFAULT, no_top_k]
    counts = mixed_step_counts(logits, kinds, rows=300)
    n = 100 * 300 // 3
    assert counts[0][0] == n  # greedy: the argmax every time
    for kind, got in zip(kinds[1:], counts[1:]):
        p = target(logits, kind)
        assert got[p == 0].sum() == 0
        assert np.abs(got / n - p).sum() / 2 < bound(p, n)


def test_rows_with_different_top_k_in_one_step_keep_their_own_cut() -> None:
    """One C call for the step, each row with its own k: a row with a small one draws only
    from its own top-k set, whatever k its neighbours have."""
    logits = flat()
    kinds = [replace(DEFAULT, top_k=3, top_p=1.0, min_p=0.0, temperature=1.5), replace(DEFAULT, top_k=50)]
    counts = mixed_step_counts(logits, kinds, rows=200)
    n = 100 * 200 // 2
    for kind, got in zip(kinds, counts):
        p = target(logits, kind)
        assert got[p == 0].sum() == 0
        assert np.abs(got / n - p).sum() / 2 < bound(p, n)


def test_verifying_a_draft_keeps_each_rows_distribution(sampling_path) -> None:
    """Speculative decoding's acceptance test on fixed logits: the first token a draft's
    verification gives follows row 0's distribution, and after it kept the first draft
    token, the next follows row 1's: the output is distributed as without a draft (for a
    draft of fixed tokens, what rejection sampling guarantees), whatever the draft."""
    from inference.sample.rows import verify_draft

    rows = np.stack([peaked(), np.roll(peaked(), 3), np.roll(peaked(), 7)])
    draft = [1, 4]  # likely in their rows, not certain: both outcomes happen
    n = 30_000
    first = np.zeros(V, dtype=np.int64)
    second = np.zeros(V, dtype=np.int64)
    for seed in range(n):
        emitted = verify_draft(rows.copy(), RequestSampler(replace(DEFAULT, seed=seed)), draft)
        first[emitted[0]] += 1
        if emitted[0] == draft[0]:
            second[emitted[1]] += 1
    for counts, row in ((first, rows[0]), (second, rows[1])):
        p = target(row, DEFAULT)
        total = int(counts.sum())
        assert total > 1000
        tv = 0.5 * float(np.abs(counts / total - p).sum())
        assert tv <= bound(p, total), (tv, bound(p, total))
    assert 0.05 < first[draft[0]] / n < 0.95  # the draft was kept and rejected, both many times
