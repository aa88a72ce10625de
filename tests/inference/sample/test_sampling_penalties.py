"""The numpy sampler's repeat penalties, bans, greedy pick and per-request RNG, against
llama.cpp's own samplers on the same logits where it has one (no model needed); each on the
C kernel and on the numpy path alone (no kernel built)."""

from __future__ import annotations

import ctypes
from dataclasses import replace

import llama_cpp as ll
import numpy as np
import pytest

from inference.params import SamplingParams
from inference.sample.llama_chain import SamplerChain, _penalties, _token_array
from inference.sample.rows import RequestSampler, sample_rows

V = 512
GREEDY_PENALISED = SamplingParams(temperature=0.0, repeat_penalty=1.3, repeat_last_n=64)


def logits(seed: int = 0, n: int = V) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal(n) * 3).astype(np.float32)


def llama_apply(sampler: ll.llama_sampler_p, row: np.ndarray) -> tuple[np.ndarray, int]:
    """llama.cpp's sampler on a copy of row: the candidates' logits by token id, and the
    selected token (-1 if it selects none)."""
    data = np.zeros(row.size, dtype=[("id", np.int32), ("logit", np.float32), ("p", np.float32)])
    data["id"] = np.arange(row.size)
    data["logit"] = row
    cur = _token_array(data)
    ll.llama_sampler_apply(sampler, ctypes.byref(cur))
    out = np.full(row.size, np.nan, dtype=np.float32)
    kept = data[: cur.size]
    out[kept["id"]] = kept["logit"]
    return out, int(data[cur.selected]["id"]) if cur.selected >= 0 else -1


def test_penalties_are_llama_cpps_bit_for_bit(sampling_path) -> None:
    row = logits()
    history = [int(t) for t in np.random.default_rng(1).integers(0, 40, 100)]  # many repeats
    history[:10] = list(range(100, 110))  # older than the window: never penalised
    ours = RequestSampler(GREEDY_PENALISED)
    ours.accept_prompt(history[:70])
    for token in history[70:]:
        ours.accept(token)
    penalised = row[None].copy()
    sample_rows(penalised, [ours])

    theirs = _penalties(V, GREEDY_PENALISED)
    for token in history:
        ll.llama_sampler_accept(theirs, token)
    expected, _ = llama_apply(theirs, row)
    ll.llama_sampler_free(theirs)

    window = set(history[-64:])
    assert np.array_equal(penalised[0], expected)
    assert all(penalised[0, t] == row[t] for t in range(100, 110))
    positive = next(t for t in window if row[t] > 0 and history[-64:].count(t) > 1)
    negative = next(t for t in window if row[t] < 0)
    assert penalised[0, positive] == np.float32(row[positive] / np.float32(1.3))  # once, however often
    assert penalised[0, negative] == np.float32(row[negative] * np.float32(1.3))


def test_the_window_slides_and_counts_each_token_once() -> None:
    sampler = RequestSampler(replace(GREEDY_PENALISED, repeat_last_n=3))
    for token in [5, 5, 7, 9]:
        sampler.accept(token)
    assert sampler.window is not None and sorted(sampler.window.distinct()) == [5, 7, 9]
    sampler.accept(7)
    assert sorted(sampler.window.distinct()) == [7, 9]  # the last 5 left the window


def test_repeat_last_n_minus_one_penalises_the_whole_history_and_zero_none() -> None:
    whole = RequestSampler(replace(GREEDY_PENALISED, repeat_last_n=-1))
    whole.accept_prompt(list(range(200)))
    assert whole.window is not None and len(whole.window.distinct()) == 200
    assert RequestSampler(replace(GREEDY_PENALISED, repeat_last_n=0)).window is None
    assert RequestSampler(replace(GREEDY_PENALISED, repeat_penalty=1.0)).window is None


def test_greedy_picks_llama_cpps_token_with_penalties_and_banned_eog(sampling_path) -> None:
    """Temperature 0: the chain's greedy pick after its penalties and its end-of-generation
    bias, on rows whose best token is the banned one or a penalised one."""
    eog = [3]
    for seed in range(20):
        row = logits(seed)
        row[3] = row.max() + 1.0  # the end-of-generation token is the best
        params = replace(GREEDY_PENALISED, ignore_eos=True)
        history = [int(row.argsort()[-2]), 11, 12]  # the second best is penalised
        ours = RequestSampler(params, banned=eog)
        ours.accept_prompt(history)
        chain = SamplerChain(params, V, eog)
        chain.accept_prompt(history)
        _, expected = llama_apply(chain._chain, row)
        chain.close()
        assert sample_rows(row[None].copy(), [ours]) == [expected]
        assert expected != 3


def test_greedy_takes_the_first_of_equal_maxima_like_llama_cpp(sampling_path) -> None:
    row = np.zeros(V, dtype=np.float32)
    row[[40, 7, 300]] = 2.0
    greedy = ll.llama_sampler_init_greedy()
    _, expected = llama_apply(greedy, row)
    ll.llama_sampler_free(greedy)
    assert sample_rows(row[None].copy(), [RequestSampler(SamplingParams.greedy())]) == [expected] == [7]


def test_a_seeded_request_draws_the_same_tokens_alone_and_in_any_batch(sampling_path) -> None:
    """One uniform per token from the request's own generator: what else shares the batch
    (other seeds, greedy rows, other settings, rows before or after it) changes nothing."""
    rows = [logits(seed, 2000) for seed in range(60)]
    seeded = SamplingParams(seed=42)

    def run(batch: list[SamplingParams], at: int) -> list[int]:
        samplers = [RequestSampler(p) for p in batch]
        out = []
        for row in rows:
            matrix = np.tile(row, (len(batch), 1))
            out.append(sample_rows(matrix, samplers)[at])
        return out

    alone = run([seeded], 0)
    others = [SamplingParams(seed=1), SamplingParams.greedy(), SamplingParams(temperature=1.5, top_k=0, min_p=0.0),
              SamplingParams(), SamplingParams(seed=7, top_p=0.5)]
    assert run([*others[:3], seeded, *others[3:]], 3) == alone
    assert run([seeded, *others], 0) == alone
    assert len(set(alone)) > 5  # really sampled, not one token throughout
    assert run([SamplingParams(seed=43)], 0) != alone


def test_a_step_prepared_but_never_decoded_costs_no_draw() -> None:
    """llama_decode can refuse a step (no KV slot) after its rows were prepared: the rows'
    uniforms must not be used up, or a seeded request's text would depend on the retry.
    The dropped steps here alternate between the kept rows and other rows (which hand the
    kept ones' state back to their samplers and build new ones)."""
    from inference.sample.rows import RowPreparer, sample_prepared

    row = logits(5)
    params = SamplingParams(seed=42, temperature=1.5, top_k=100, top_p=1.0, min_p=0.0, repeat_penalty=1.0)
    straight, retried, other = RequestSampler(params), RequestSampler(params), RequestSampler(params)
    expected = [sample_rows(row[None].copy(), [straight])[0] for _ in range(70)]  # past one uniform batch
    got = []
    preparer = RowPreparer()
    for i in range(70):
        preparer.prepare([other, retried] if i % 3 == 0 else [retried])  # a step planned and dropped
        got.append(sample_prepared(row[None].copy(), preparer.prepare([retried]))[0])
    preparer.clear()
    assert got == expected
    assert len(set(expected)) > 5  # really sampled


def kept_rows_tokens(seeded: SamplingParams, rows: list[np.ndarray], churn: int) -> list[int]:
    """seeded's tokens when sampled through one RowPreparer, as the engine does, with other
    requests joining and leaving every churn steps (its state handed back and forth)."""
    from inference.sample.rows import RowPreparer, sample_prepared

    mine = RequestSampler(seeded)
    others = [RequestSampler(p) for p in (SamplingParams(seed=1), SamplingParams.greedy(),
                                          SamplingParams(top_k=0, seed=3))]
    preparer = RowPreparer()
    out = []
    for step, row in enumerate(rows):
        batch = [*others[: (step // churn) % 4], mine][::-1 if step // churn % 2 else 1]
        tokens = sample_prepared(np.tile(row, (len(batch), 1)), preparer.prepare(batch))
        out.append(tokens[batch.index(mine)])
    preparer.clear()
    return out


def test_kept_rows_hand_windows_and_uniforms_back_when_the_batch_changes() -> None:
    """Penalty window and uniforms live in the kept rows while the batch stays the same:
    the tokens must be those of the request sampled alone, step by step."""
    seeded = SamplingParams(seed=11, repeat_penalty=1.5, repeat_last_n=8, top_k=20, temperature=1.2)
    alone = RequestSampler(seeded)
    rows = [logits(seed, 600) for seed in range(150)]
    expected = [sample_rows(row[None].copy(), [alone])[0] for row in rows]
    assert kept_rows_tokens(seeded, rows, churn=7) == expected
    assert kept_rows_tokens(seeded, rows, churn=1000) == expected  # kept throughout
    assert len(set(expected)) > 20


def test_a_whole_history_window_grows_while_its_rows_are_kept() -> None:
    """repeat_last_n -1 penalises every token so far: the kept rows make room as it grows."""
    seeded = SamplingParams(seed=5, repeat_penalty=2.0, repeat_last_n=-1, top_k=5, temperature=0.0)
    alone = RequestSampler(seeded)
    rows = [np.linspace(3.0, 0.0, 600, dtype=np.float32) for _ in range(300)]
    expected = [sample_rows(row[None].copy(), [alone])[0] for row in rows]
    assert kept_rows_tokens(seeded, rows, churn=1000) == expected
    assert len(set(expected)) > 200  # each token penalised for good: the greedy pick moves on


def test_penalties_in_numpy_are_the_kernels_bit_for_bit() -> None:
    """Where the kernel is built, its penalise_rows and the numpy one agree exactly: bans,
    repeats, a penalty below one, rows not listed left alone."""
    from inference.sample import kernel

    if not kernel.AVAILABLE:
        pytest.skip("the C sampling kernel is not built here")
    rng = np.random.default_rng(5)
    matrix = (rng.standard_normal((4, V)) * 3).astype(np.float32)
    rows = np.array([0, 2, 3], dtype=np.int32)
    windows = rng.integers(0, V, 90).astype(np.int64)  # with repeats
    window_ends = np.array([30, 60, 90], dtype=np.int64)
    penalties = np.array([1.3, 0.8, 1.0], dtype=np.float32)
    bans = np.array([3, 7, 7, 100], dtype=np.int64)
    ban_ends = np.array([1, 3, 4], dtype=np.int64)
    in_c, in_numpy = matrix.copy(), matrix.copy()
    kernel.penalise_rows(in_c, rows, windows, window_ends, penalties, bans, ban_ends)
    kernel.AVAILABLE = False
    try:
        kernel.penalise_rows(in_numpy, rows, windows, window_ends, penalties, bans, ban_ends)
    finally:
        kernel.AVAILABLE = True
    assert np.array_equal(in_c, in_numpy)
    assert np.array_equal(in_numpy[1], matrix[1]) and not np.array_equal(in_numpy[0], matrix[0])
    assert in_numpy[2, 7] == -np.inf and in_numpy[3, 100] == -np.inf
