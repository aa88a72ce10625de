"""The C sampling kernels (inference/sample/_kernel.c): the top-k against numpy's stable sort
on the shapes it meets (a real vocabulary, small test vocabularies, a tail block, ties,
banned tokens), and the inputs each entry point must refuse without touching memory it
does not own. Their sampling semantics are tested in test_sampling_distribution.py and
test_sampling_penalties.py."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from inference.sample._kernel import VECTOR_WIDTH, draw_rows, penalise_rows, top_k_rows


def reference(logits: np.ndarray, rows: list[int], k: int, width: int) -> tuple[np.ndarray, np.ndarray]:
    ids = np.full((len(rows), width), -1, dtype=np.int32)
    values = np.full((len(rows), width), -np.inf, dtype=np.float32)
    for i, r in enumerate(rows):
        order = np.argsort(-logits[r], kind="stable")[: min(k, logits.shape[1], width)]
        ids[i, : order.size] = order
        values[i, : order.size] = logits[r, order]
    return ids, values


def run(logits: np.ndarray, rows: list[int], ks: list[int], width: int) -> tuple[np.ndarray, np.ndarray]:
    ids = np.zeros((len(rows), width), dtype=np.int32)
    values = np.zeros((len(rows), width), dtype=np.float32)
    top_k_rows(logits, np.array(rows, dtype=np.int32), np.array(ks, dtype=np.int32), ids, values)
    return ids, values


def test_the_kernel_serves_the_default_settings_and_greedy() -> None:
    from inference.params import SamplingParams
    from inference.sample.rows import RequestSampler

    assert RequestSampler(SamplingParams()).kernel_k == 40
    assert RequestSampler(SamplingParams.greedy()).kernel_k == 1
    assert RequestSampler(SamplingParams(top_k=0)).kernel_k == 0  # no top-k: the threshold path


@pytest.mark.parametrize("n_vocab", [49_152, 262_144 + 37, 256, 100, 65, 7, 1])
@pytest.mark.parametrize("k", [1, 40, 256])
def test_matches_a_stable_sort(n_vocab: int, k: int) -> None:
    rng = np.random.default_rng(n_vocab + k)
    logits = rng.standard_normal((3, n_vocab)).astype(np.float32) * 3
    ids, values = run(logits, [0, 1, 2], [k] * 3, k)
    want_ids, want_values = reference(logits, [0, 1, 2], k, k)
    np.testing.assert_array_equal(ids, want_ids)
    np.testing.assert_array_equal(values, want_values)


# Each width's block maxima, against the stable sort, in a fresh interpreter: the width is
# chosen once, at import (CHORUS_SAMPLING_VECTOR picks one the CPU has).
_EVERY_WIDTH = textwrap.dedent("""
    import numpy as np
    from inference.sample._kernel import VECTOR_WIDTH, top_k_rows
    rng = np.random.default_rng(7)
    for n_vocab in (49_152, 1000, 64, 65, 3):
        logits = rng.standard_normal((2, n_vocab)).astype(np.float32)
        logits[1, ::97] = logits[1].max()  # ties in many blocks
        k = min(40, n_vocab)
        ids = np.zeros((2, k), np.int32); values = np.zeros((2, k), np.float32)
        top_k_rows(logits, np.array([0, 1], np.int32), np.array([k, k], np.int32), ids, values)
        for r in range(2):
            assert ids[r].tolist() == np.argsort(-logits[r], kind="stable")[:k].tolist(), (VECTOR_WIDTH, n_vocab)
    print(VECTOR_WIDTH)
""")


@pytest.mark.parametrize("width", ["scalar", "sse", "avx2", "avx512f"])
def test_every_vector_width_finds_the_same_top_k(width: str) -> None:
    env = {**os.environ, "CHORUS_SAMPLING_VECTOR": width}
    done = subprocess.run([sys.executable, "-c", _EVERY_WIDTH], env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    used = done.stdout.strip()
    if used != width:  # this CPU lacks it: the module fell back to a narrower one
        pytest.skip(f"this CPU has no {width}; the module used {used}")


@pytest.mark.skipif(not os.path.exists("/proc/cpuinfo") or "CHORUS_SAMPLING_VECTOR" in os.environ,
                    reason="reads the CPU's flags from Linux; the width was not chosen by default")
def test_the_default_is_the_widest_width_the_cpu_has() -> None:
    flags = set(open("/proc/cpuinfo").read().split())
    if "sse" not in flags:
        assert VECTOR_WIDTH == "scalar"
    else:
        assert VECTOR_WIDTH == next(w for w in ("avx512f", "avx2", "sse") if w in flags)


# A step's rows drawn on OpenMP threads (as many as OMP_NUM_THREADS allows, 4 rows or more
# each) must be the rows one thread draws: same tokens, same windows and uniforms after.
_THREADED = textwrap.dedent("""
    import json
    import numpy as np
    from dataclasses import replace
    from inference.sample.rows import RequestSampler, RowPreparer, sample_prepared
    from inference.params import SamplingParams
    rng = np.random.default_rng(3)
    kinds = [SamplingParams(), SamplingParams.greedy(), SamplingParams(top_k=7, repeat_last_n=4)]
    samplers = [RequestSampler(replace(kinds[i % 3], seed=i), np.array([2], np.int64)) for i in range(37)]
    preparer = RowPreparer()
    out = []
    for _ in range(80):  # past a uniform batch: the refill after a threaded step too
        logits = (rng.standard_normal((37, 5000)) * 2).astype(np.float32)
        out.append(sample_prepared(logits, preparer.prepare(samplers)))
    preparer.clear()
    print(json.dumps([out, [s.window.tokens().tolist() for s in samplers if s.window is not None]]))
""")


def test_rows_on_several_threads_draw_what_one_thread_draws() -> None:
    def run(threads: str) -> str:
        env = {**os.environ, "OMP_NUM_THREADS": threads}
        done = subprocess.run([sys.executable, "-c", _THREADED], env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return done.stdout

    one = run("1")
    assert run("4") == one and run("9") == one


def test_ties_go_to_the_smaller_id_across_blocks() -> None:
    logits = np.zeros((1, 1000), dtype=np.float32)
    logits[0, [999, 3, 500, 64, 63]] = 5.0  # five equal best, in several blocks
    logits[0, 700:710] = 4.0
    ids, values = run(logits, [0], [8], 8)
    assert ids[0].tolist() == [3, 63, 64, 500, 999, 700, 701, 702]
    assert values[0].tolist() == [5.0] * 5 + [4.0] * 3


def test_a_flat_row_and_banned_tokens() -> None:
    """Every block has the same maximum (the threshold admits all of them), and -inf
    (banned) tokens rank last, after every finite one."""
    logits = np.full((2, 4096), 1.0, dtype=np.float32)
    logits[1, :4000] = -np.inf
    ids, values = run(logits, [0, 1], [40, 100], 100)
    assert ids[0, :40].tolist() == list(range(40))
    assert (ids[0, 40:] == -1).all() and np.isneginf(values[0, 40:]).all()
    assert ids[1, :96].tolist() == list(range(4000, 4096))
    assert ids[1, 96:].tolist() == [0, 1, 2, 3]  # -inf, by id


def test_rows_are_read_through_the_index_and_each_row_has_its_own_k() -> None:
    rng = np.random.default_rng(1)
    logits = rng.standard_normal((6, 5000)).astype(np.float32)
    ids, values = run(logits, [5, 0, 3], [10, 3, 0], 12)
    for i, (row, k) in enumerate([(5, 10), (0, 3), (3, 0)]):
        want_ids, want_values = reference(logits, [row], k, 12)
        np.testing.assert_array_equal(ids[i], want_ids[0])
        np.testing.assert_array_equal(values[i], want_values[0])


def test_no_rows_is_nothing_to_do() -> None:
    ids, values = run(np.zeros((2, 10), dtype=np.float32), [], [], 4)
    assert ids.shape == (0, 4)


@pytest.mark.parametrize(
    "change, error",
    [
        (lambda a: {**a, "logits": a["logits"].astype(np.float64)}, TypeError),
        (lambda a: {**a, "logits": a["logits"][:, ::2]}, (TypeError, ValueError, BufferError)),
        (lambda a: {**a, "rows": np.array([0, 9], dtype=np.int32)}, IndexError),
        (lambda a: {**a, "rows": np.array([0, -1], dtype=np.int32)}, IndexError),
        (lambda a: {**a, "rows": np.array([0, 1], dtype=np.int64)}, TypeError),
        (lambda a: {**a, "ks": np.array([1], dtype=np.int32)}, ValueError),
        (lambda a: {**a, "ids": np.zeros((2, 3), dtype=np.int32)}, ValueError),
        (lambda a: {**a, "ids": np.zeros((2, 4), dtype=np.int32)[:, ::-1]}, (TypeError, ValueError, BufferError)),
        (lambda a: {**a, "values": np.zeros((2, 4), dtype=np.float32).view()[None]}, TypeError),
        (lambda a: {**a, "ids": np.zeros((2, 4), dtype=np.int32).copy(order="C").view(np.float32)}, TypeError),
    ],
)
def test_bad_arguments_raise_before_any_write(change, error) -> None:
    args = {
        "logits": np.ones((3, 50), dtype=np.float32),
        "rows": np.array([0, 1], dtype=np.int32),
        "ks": np.array([2, 2], dtype=np.int32),
        "ids": np.full((2, 4), 7, dtype=np.int32),
        "values": np.full((2, 4), 7, dtype=np.float32),
    }
    args = change(args)
    before = args["ids"].copy(), args["values"].copy()
    with pytest.raises(error):
        top_k_rows(args["logits"], args["rows"], args["ks"], args["ids"], args["values"])
    np.testing.assert_array_equal(args["ids"], before[0])
    np.testing.assert_array_equal(args["values"], before[1])


def test_read_only_outputs_are_refused() -> None:
    ids = np.zeros((1, 2), dtype=np.int32)
    ids.flags.writeable = False
    with pytest.raises((TypeError, ValueError, BufferError)):
        top_k_rows(np.ones((1, 5), dtype=np.float32), np.zeros(1, np.int32), np.ones(1, np.int32),
                   ids, np.zeros((1, 2), np.float32))


def draw_args(**changes) -> dict:
    """Row 0 greedy with window [96] (a ring of 4 holding one token), row 1 sampled with
    window [5, 7] (a ring of 2, full after 5 tokens) and token 193 banned."""
    rings = np.zeros((2, 4), dtype=np.int64)
    rings[0, 0] = 96
    rings[1, :2] = [7, 5]
    args = {
        "logits": np.arange(2 * 300, dtype=np.float32).reshape(2, 300) % 97,
        "rows": np.array([0, 1], dtype=np.int32),
        "ks": np.array([1, 40], dtype=np.int32),
        "settings": np.array([[np.inf, -np.inf, 0.0], [0.95, np.log(0.05), 0.7]]),
        "penalties": np.array([1.5, 1.1], dtype=np.float32),
        "bans": np.array([193], dtype=np.int64),
        "ban_ends": np.array([0, 1], dtype=np.int64),
        "rings": rings,
        "ring_sizes": np.array([4, 2], dtype=np.int64),
        "ring_counts": np.array([1, 5], dtype=np.int64),
        "uniforms": np.array([[0.0, 0.0], [0.5, 0.25]]),
        "cursors": np.array([0, 0], dtype=np.int32),
        "tokens": np.full(2, 7, dtype=np.int32),
    }
    return {**args, **changes}


def call_draw(a: dict) -> tuple[int, int]:
    return draw_rows(a["logits"], a["rows"], a["ks"], a["settings"], a["penalties"], a["bans"], a["ban_ends"],
                     a["rings"], a["ring_sizes"], a["ring_counts"], a["uniforms"], a["cursors"], a["tokens"])


def test_draw_rows_penalises_bans_and_picks_the_best_when_greedy() -> None:
    logits = np.zeros((2, 300), dtype=np.float32)
    logits[0, [96, 95, 250]] = [9.0, 7.0, 7.0]  # 96 penalised to 6: 95 and 250 tie, 95 first
    logits[1, [193, 20]] = [50.0, 8.0]  # 193 banned
    a = draw_args(logits=logits, settings=np.array([[np.inf, -np.inf, 0.0], [np.inf, -np.inf, 0.0]]))
    assert call_draw(a) == (0, 0)
    assert a["tokens"].tolist() == [95, 20]
    assert a["logits"][0, 96] == np.float32(9.0) / np.float32(1.5)
    assert np.isneginf(a["logits"][1, 193])


def test_each_row_accepts_its_token_in_place() -> None:
    """The ring takes the token at count % size and counts it; a drawing row's cursor moves
    on, a greedy row's does not; the uniform a row used is the one at its cursor."""
    logits = np.zeros((2, 300), dtype=np.float32)
    logits[0, 42] = 9.0
    logits[1, [10, 11]] = [3.0, 3.0]  # equal halves: a uniform of 0.25 picks 10, 0.75 picks 11
    a = draw_args(logits=logits, uniforms=np.array([[0.0, 0.0], [0.25, 0.75]]),
                  penalties=np.array([1.5, 1.0], dtype=np.float32))  # row 1's ring fills, penalises nothing
    assert call_draw(a) == (0, 0)
    assert a["tokens"].tolist() == [42, 10]
    assert a["rings"][0].tolist() == [96, 42, 0, 0] and a["ring_counts"][0] == 2
    assert a["rings"][1].tolist() == [7, 10, 0, 0] and a["ring_counts"][1] == 6  # 5 % 2: slot 1
    assert a["cursors"].tolist() == [0, 1]
    a["logits"][:] = logits
    assert call_draw(a) == (0, 1)  # the second uniform was the last one: refill due
    assert a["tokens"].tolist() == [42, 11] and a["cursors"].tolist() == [0, 2]


def test_a_row_without_a_finite_logit_draws_no_token() -> None:
    """NaN rows, banned tokens or not: -1, never a banned token, no state changed, and
    sample_rows says so."""
    a = draw_args(logits=np.full((2, 300), np.nan, dtype=np.float32))
    before = {k: a[k].copy() for k in ("rings", "ring_counts", "cursors")}
    assert call_draw(a)[0] == 2
    assert a["tokens"].tolist() == [-1, -1]
    for k, v in before.items():
        np.testing.assert_array_equal(a[k], v)

    from inference.params import SamplingParams
    from inference.sample.rows import RequestSampler, sample_rows

    with pytest.raises(ValueError, match="NaN"):
        sample_rows(np.full((1, 300), np.nan, dtype=np.float32), [RequestSampler(SamplingParams())])


@pytest.mark.parametrize(
    "changes, error",
    [
        ({"rings": np.array([[96, 0, 0, 0], [5, 300, 0, 0]], dtype=np.int64)}, IndexError),  # outside the vocabulary
        ({"rings": np.array([[-1, 0, 0, 0], [5, 7, 0, 0]], dtype=np.int64)}, IndexError),
        ({"ring_sizes": np.array([5, 2], dtype=np.int64)}, ValueError),  # wider than the rings
        ({"ring_sizes": np.array([-1, 2], dtype=np.int64)}, ValueError),
        ({"ring_counts": np.array([-1, 2], dtype=np.int64)}, ValueError),
        ({"ring_counts": np.array([1], dtype=np.int64)}, ValueError),  # not one per row
        ({"rings": np.zeros((2, 4), dtype=np.int32)}, TypeError),
        ({"cursors": np.array([0, 2], dtype=np.int32)}, ValueError),  # row 1 draws: none left
        ({"cursors": np.array([0, -1], dtype=np.int32)}, ValueError),
        ({"uniforms": np.zeros((1, 2))}, ValueError),
        ({"bans": np.array([1000], dtype=np.int64)}, IndexError),
        ({"ban_ends": np.array([3], dtype=np.int64)}, ValueError),
        ({"ks": np.array([0, 40], dtype=np.int32)}, ValueError),
        ({"settings": np.zeros((2, 4))}, ValueError),
        ({"settings": np.zeros((2, 3), dtype=np.float32)}, TypeError),
        ({"penalties": np.ones(1, dtype=np.float32)}, ValueError),
        ({"rows": np.array([0, 2], dtype=np.int32)}, IndexError),
        ({"tokens": np.zeros(3, dtype=np.int32)}, ValueError),
    ],
)
def test_draw_rows_refuses_bad_arguments_before_any_write(changes, error) -> None:
    a = draw_args(**changes)
    names = ("logits", "tokens", "rings", "ring_counts", "cursors")
    before = {k: a[k].copy() for k in names}
    with pytest.raises(error):
        call_draw(a)
    for k in names:
        np.testing.assert_array_equal(a[k], before[k])


def test_penalise_rows_touches_only_its_rows() -> None:
    logits = draw_args()["logits"]
    before = logits.copy()
    penalise_rows(logits, np.array([1], dtype=np.int32), np.array([5, 5, 7], dtype=np.int64),
                  np.array([3], dtype=np.int64), np.array([2.0], dtype=np.float32),
                  np.array([9], dtype=np.int64), np.array([1], dtype=np.int64))
    np.testing.assert_array_equal(logits[0], before[0])
    assert logits[1, 5] == before[1, 5] / 2  # once, though listed twice
    assert logits[1, 7] == before[1, 7] / 2
    assert np.isneginf(logits[1, 9])
    changed = np.flatnonzero(logits[1] != before[1]).tolist()
    assert changed == [5, 7, 9]


def test_a_penalty_below_one_raises_a_token_into_the_top() -> None:
    """penalty 0.5 doubles a positive logit: the block maxima must follow it up (else the
    top-k would never look at its block again)."""
    logits = np.zeros((1, 4096), dtype=np.float32)
    logits[0, 10] = 5.0
    logits[0, 3000] = 3.0  # raised to 6.0
    a = draw_args(logits=logits, rows=np.array([0], dtype=np.int32), ks=np.array([1], dtype=np.int32),
                  settings=np.array([[np.inf, -np.inf, 0.0]]), rings=np.array([[3000]], dtype=np.int64),
                  ring_sizes=np.array([1], dtype=np.int64), ring_counts=np.array([1], dtype=np.int64),
                  uniforms=np.zeros((1, 1)), cursors=np.zeros(1, dtype=np.int32),
                  penalties=np.array([0.5], dtype=np.float32), bans=np.array([], dtype=np.int64),
                  ban_ends=np.array([0], dtype=np.int64), tokens=np.zeros(1, dtype=np.int32))
    assert call_draw(a) == (0, 0)
    assert a["tokens"][0] == 3000 and a["logits"][0, 3000] == 6.0
