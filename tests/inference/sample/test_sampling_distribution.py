"""The numpy sampler draws from the distribution its settings define, and so does
llama.cpp's chain on the same logits (no model needed).

The target distribution is computed here from first principles, stage by stage in the
order of params.CHAIN (the chain spec llama_chain.py builds llama.cpp's chain from), each
stage's reference in STAGES below: a stage added to CHAIN without one fails here. Each
check draws N tokens and bounds the total-variation distance between the empirical and the
target distribution: E[TV] <= sum_i sqrt(p_i (1 - p_i) / N) / 2, and TV of N independent
draws moves by at most 1/N per draw, so by McDiarmid's inequality it exceeds
E[TV] + sqrt(ln(1/delta) / 2N) with probability below delta = 1e-12. Each case also shows
that a plausible wrong order (temperature first) is farther from the target than the
bound: a sampler with that mistake would fail.
"""

from __future__ import annotations

import ctypes
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import llama_cpp as ll
import numpy as np
import pytest

from inference.params import CHAIN, GREEDY, SamplingParams
from inference.sample.llama_chain import SamplerChain, _token_array
from inference.sample.rows import RequestSampler, sample_rows

DELTA = 1e-12
N = 100_000  # draws per case
V = 256
DEFAULT = SamplingParams(seed=0, repeat_penalty=1.0)  # the app's defaults, no history: fixed logits


@dataclass(frozen=True)
class Row:
    """What a stage's reference sees: the settings, the tokens before this one (the
    penalties' history), the end-of-generation tokens."""

    params: SamplingParams
    history: Sequence[int] = ()
    eog: Sequence[int] = ()


def _penalties(x: np.ndarray, row: Row) -> np.ndarray:
    """llama.cpp's: each distinct token of the window once, the repeat penalty dividing a
    positive logit and multiplying any other, then frequency × its count and presence."""
    p, n = row.params, row.params.repeat_last_n
    window = list(row.history) if n < 0 else list(row.history)[-n:] if n else []
    x = x.copy()
    for token in set(window):
        count = window.count(token)
        x[token] = x[token] / p.repeat_penalty if x[token] > 0 else x[token] * p.repeat_penalty
        x[token] -= count * p.frequency_penalty + p.presence_penalty
    return x


def _top_k(x: np.ndarray, row: Row) -> np.ndarray:
    order = np.argsort(-x, kind="stable")
    out = np.full_like(x, -np.inf)
    keep = order[: row.params.top_k] if 0 < row.params.top_k < x.size else order
    out[keep] = x[keep]
    return out


def _top_p(x: np.ndarray, row: Row) -> np.ndarray:
    """The best tokens until their softmax mass reaches top_p (the one reaching it kept)."""
    order = [t for t in np.argsort(-x, kind="stable") if x[t] > -np.inf]
    weights = [math.exp(x[t] - x[order[0]]) for t in order]
    out, running, z = np.full_like(x, -np.inf), 0.0, sum(weights)
    for t, w in zip(order, weights):
        out[t] = x[t]
        running += w
        if running >= row.params.top_p * z:
            break
    return out


def _min_p(x: np.ndarray, row: Row) -> np.ndarray:
    return np.where(x >= x.max() + math.log(row.params.min_p), x, -np.inf)


def _dist(x: np.ndarray, row: Row) -> np.ndarray:
    w = np.exp(x - x.max())
    return w / w.sum()


def _greedy(x: np.ndarray, row: Row) -> np.ndarray:
    return np.eye(x.size)[int(np.argmax(x))]


# Each stage of CHAIN (and GREEDY) on the logits so far (float64, -inf for a token cut);
# the last one returns the distribution.
STAGES: dict[str, Callable[[np.ndarray, Row], np.ndarray]] = {
    "ignore_eos": lambda x, row: np.where(np.isin(np.arange(x.size), row.eog), -np.inf, x),
    "penalties": _penalties,
    "top_k": _top_k,
    "top_p": _top_p,
    "min_p": _min_p,
    "temperature": lambda x, row: x / row.params.temperature,
    "dist": _dist,
    GREEDY: _greedy,
}


def test_every_stage_of_the_chain_spec_has_a_reference_here() -> None:
    assert set(STAGES) == {*CHAIN, GREEDY}


def test_a_field_of_a_stage_the_numpy_path_lacks_sends_its_requests_to_the_chain() -> None:
    """rows.py and the C kernel sample rows.STAGES; a field of another stage must be
    kernel=False in the table, so that a request using it samples on llama.cpp's chain."""
    from inference.params import SAMPLING_FIELDS
    from inference.sample import rows

    assert rows.STAGES <= {*CHAIN, GREEDY}
    assert all(not f.kernel for f in SAMPLING_FIELDS if f.stage is not None and f.stage not in rows.STAGES)


def target(logits: np.ndarray, p: SamplingParams, temperature_first: bool = False,
           history: Sequence[int] = (), eog: Sequence[int] = ()) -> np.ndarray:
    """The chain's distribution over the vocabulary, stage by stage (exact, float64)."""
    stages = list(p.stages())
    if temperature_first:  # the wrong order, for the power check
        stages.remove("temperature")
        stages.insert(0, "temperature")
    x, row = logits.astype(np.float64), Row(p, history, eog)
    for stage in stages:
        x = STAGES[stage](x, row)
    return x


def bound(p: np.ndarray, n: int) -> float:
    return float(np.sum(np.sqrt(p * (1 - p) / n)) / 2 + math.sqrt(math.log(1 / DELTA) / (2 * n)))


def numpy_draws(logits: np.ndarray, params: SamplingParams, n: int, rows: int = 1000,
                history: Sequence[int] = (), eog: Sequence[int] = ()) -> np.ndarray:
    """Draws of the numpy path (C kernel or not); with a history, each draw is a new
    request's first, its penalty window that history."""
    samplers: list[RequestSampler] = []
    draws = []
    for batch in range(n // rows):
        if not samplers or history:
            samplers = [RequestSampler(replace(params, seed=batch * rows + i), eog) for i in range(rows)]
            for sampler in samplers:
                sampler.accept_prompt(list(history))
        draws.extend(sample_rows(np.tile(logits, (rows, 1)), samplers))
    return np.bincount(draws, minlength=logits.size)


def chain_draws(logits: np.ndarray, params: SamplingParams, n: int, history: Sequence[int] = (),
                eog: Sequence[int] = ()) -> np.ndarray:
    """Draws of llama.cpp's chain, applied to the same candidates each time (it accepts
    no token: the penalties' window stays the history)."""
    chain = SamplerChain(params, logits.size, list(eog))
    chain.accept_prompt(list(history))
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


# Cases with a history and end-of-generation tokens: every stage of the chain at work.
# token 0, the best, is end-of-generation; 1 and 3 were said (3 three times).
HISTORY = (1, 3, 9, 3, 3)
WITH_HISTORY = {
    "a banned token and the repeat penalty": (peaked(), replace(DEFAULT, ignore_eos=True, repeat_penalty=1.6)),
    "the whole history, a penalty below one": (peaked(), replace(DEFAULT, repeat_last_n=-1, repeat_penalty=0.7,
                                                                 top_k=0, temperature=1.4)),
}
# With a history too, for settings only llama.cpp's chain samples (kernel=False fields).
CHAIN_ONLY = {
    "OpenAI's penalties": (peaked(), replace(DEFAULT, ignore_eos=True, repeat_penalty=1.2, frequency_penalty=0.6,
                                             presence_penalty=0.4, repeat_last_n=4)),
}


@pytest.mark.parametrize("case", list(WITH_HISTORY))
def test_numpy_draws_follow_every_stage_with_a_history(case: str, sampling_path) -> None:
    logits, params = WITH_HISTORY[case]
    p = target(logits, params, history=HISTORY, eog=[0])
    assert p[0] == 0 or not params.ignore_eos
    assert np.abs(p - target(logits, params)).sum() / 2 > 0.05  # the history really counts
    n = 12_000  # the bound (~0.04) far below what the history moves (0.3-0.6)
    counts = numpy_draws(logits, params, n, history=HISTORY, eog=[0])
    assert counts[p == 0].sum() == 0
    assert np.abs(counts / n - p).sum() / 2 < bound(p, n)


@pytest.mark.parametrize("case", [*CASES, *WITH_HISTORY, *CHAIN_ONLY])
def test_llama_cpps_chain_draws_the_same_distribution(case: str) -> None:
    """The chain llama_chain.py builds from the spec against the same target: what the
    numpy path is checked against above is llama.cpp's own sampling."""
    logits, params = {**CASES, **WITH_HISTORY, **CHAIN_ONLY}[case]
    history, eog = (HISTORY, [0]) if case not in CASES else ((), ())
    p = target(logits, params, history=history, eog=eog)
    n = 40_000
    counts = chain_draws(logits, params, n, history, eog)
    assert counts[p == 0].sum() == 0
    assert np.abs(counts / n - p).sum() / 2 < bound(p, n)


# llama.cpp's name of the sampler each stage is (llama_sampler_name).
LLAMA_NAMES = {"ignore_eos": "logit-bias", "penalties": "penalties", "top_k": "top-k", "top_p": "top-p",
               "min_p": "min-p", "temperature": "temp", "dist": "dist", GREEDY: "greedy"}


# The settings whose chain is read back: every case's above, and greedy ones.
READ_BACK = {**{case: params for case, (_, params) in {**CASES, **WITH_HISTORY, **CHAIN_ONLY}.items()},
             "greedy": SamplingParams.greedy(), "greedy banning": SamplingParams(temperature=0.0, ignore_eos=True),
             "penalties over no window": SamplingParams(repeat_last_n=0)}


def test_the_cases_use_every_stage_of_the_spec() -> None:
    assert {stage for params in READ_BACK.values() for stage in params.stages()} == {*CHAIN, GREEDY}


@pytest.mark.parametrize("case", list(READ_BACK))
def test_llama_cpps_chain_is_the_stages_of_the_spec_in_its_order(case: str) -> None:
    """Read back from llama.cpp: the samplers of the chain built for these settings (one
    its settings leave nothing to do, top-p at 1, is named "?top-p")."""
    params = READ_BACK[case]
    chain = SamplerChain(params, V, [0])
    try:
        built = [ll.llama_sampler_name(ll.llama_sampler_chain_get(chain._chain, i)).decode().lstrip("?")
                 for i in range(ll.llama_sampler_chain_n(chain._chain))]
    finally:
        chain.close()
    assert built == [LLAMA_NAMES[stage] for stage in params.stages()]


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
    n = 12_000  # each row's bound still well inside what a wrong acceptance rule moves
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
