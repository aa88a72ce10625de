"""StepBudget: the adaptive prefill share of each step (AIMD)."""

from __future__ import annotations

import pytest

from inference.sched.step_budget import StepBudget

TARGET = 0.1
FAST, SLOW = 0.05, 0.2


def budget(max_tokens: int = 512, min_tokens: int = 16) -> StepBudget:
    return StepBudget(max_tokens, TARGET, min_tokens=min_tokens)


def test_starts_at_a_quarter_of_the_batch() -> None:
    assert budget(512).prefill_share == 128
    assert budget(40).prefill_share == 16  # a quarter (10) is below the floor


def test_min_tokens_never_exceeds_max_tokens() -> None:
    b = budget(max_tokens=8, min_tokens=16)
    assert b.min_tokens == 8
    assert b.prefill_share == 8
    assert b.prefill_tokens(1) == 7


def test_with_nobody_decoding_a_step_takes_the_whole_batch() -> None:
    b = budget(512)
    assert b.prefill_tokens(0) == 512


@pytest.mark.parametrize(("n_decoding", "expected"), [(1, 128), (384, 128), (400, 112), (512, 0), (600, 0)])
def test_prefill_tokens_is_the_share_capped_by_what_decode_leaves(n_decoding: int, expected: int) -> None:
    assert budget(512).prefill_tokens(n_decoding) == expected


def test_slow_step_with_prefill_shrinks_the_share_multiplicatively() -> None:
    b = budget(512)
    b.observe(SLOW, n_decoding=4, n_prefill=100, n_queued=0)
    assert b.prefill_share == int(128 * 0.7)
    b.observe(SLOW, n_decoding=4, n_prefill=100, n_queued=5)
    assert b.prefill_share == int(int(128 * 0.7) * 0.7)


def test_shrinking_stops_at_min_tokens() -> None:
    b = budget(512, min_tokens=16)
    for _ in range(50):
        b.observe(SLOW, n_decoding=4, n_prefill=10, n_queued=3)
    assert b.prefill_share == 16
    assert b.prefill_tokens(4) == 16


def test_slow_step_without_prefill_is_not_the_prefills_fault() -> None:
    b = budget(512)
    b.observe(SLOW, n_decoding=4, n_prefill=0, n_queued=2)
    assert b.prefill_share == 128


def test_fast_step_with_a_queue_grows_the_share_additively() -> None:
    b = budget(512)
    b.observe(FAST, n_decoding=2, n_prefill=50, n_queued=3)
    assert b.prefill_share == 128 + 12  # 4 per queued request
    b.observe(FAST, n_decoding=2, n_prefill=50, n_queued=100)
    assert b.prefill_share == 140 + 64  # the queue counts up to 16
    b.observe(TARGET, n_decoding=2, n_prefill=50, n_queued=1)  # exactly on target is fine
    assert b.prefill_share == 204 + 8  # at least min_tokens // 2


def test_growth_is_capped_at_max_tokens() -> None:
    b = budget(128)
    for _ in range(20):
        b.observe(FAST, n_decoding=1, n_prefill=10, n_queued=16)
    assert b.prefill_share == 128
    assert b.prefill_tokens(1) == 127


def test_fast_step_with_an_empty_queue_keeps_the_share() -> None:
    b = budget(512)
    b.observe(FAST, n_decoding=2, n_prefill=50, n_queued=0)
    assert b.prefill_share == 128


def test_steps_without_decoding_are_ignored() -> None:
    b = budget(512)
    b.observe(10.0, n_decoding=0, n_prefill=512, n_queued=0)
    b.observe(FAST, n_decoding=0, n_prefill=512, n_queued=50)
    assert b.prefill_share == 128


def test_recovers_after_a_slow_phase() -> None:
    b = budget(512)
    for _ in range(10):
        b.observe(SLOW, n_decoding=8, n_prefill=64, n_queued=4)
    low = b.prefill_share
    for _ in range(10):
        b.observe(FAST, n_decoding=8, n_prefill=low, n_queued=4)
    assert b.prefill_share == low + 10 * 16


def test_a_long_queue_stretches_the_latency_target() -> None:
    budget = StepBudget(max_tokens=512, target_step_s=0.1)
    assert budget.target_for(n_decoding=4, n_queued=2) == 0.1
    assert budget.target_for(n_decoding=1, n_queued=7) == pytest.approx(0.7)
    start = budget.prefill_share
    # 0.5 s is over the plain target but within the stretched one: 7 wait on 1 reader.
    budget.observe(step_s=0.5, n_decoding=1, n_prefill=100, n_queued=7)
    assert budget.prefill_share > start
    budget.observe(step_s=0.5, n_decoding=7, n_prefill=100, n_queued=1)
    assert budget.prefill_share < start + 64
