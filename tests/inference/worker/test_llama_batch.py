"""TokenBatch on a real (tiny) llama_batch: no model needed, llama_batch_init is plain malloc."""

from __future__ import annotations

import pytest

from inference.worker.batch import BatchItem, TokenBatch


@pytest.fixture
def batch():
    b = TokenBatch(capacity=4, n_seq_max=2)
    yield b
    b.free()


def rows_of(b: TokenBatch, n: int) -> list[tuple[int, int, int, int]]:
    raw = b.batch
    return [(raw.token[i], raw.pos[i], raw.seq_id[i][0], raw.logits[i]) for i in range(n)]


def test_fill_writes_each_token_with_its_position_sequence_and_logits_flag(batch) -> None:
    rows = batch.fill([BatchItem(seq=1, start=5, tokens=[10, 11], n_logits=1), BatchItem(0, 0, [12], 0)])
    assert rows == [1, -1]
    assert batch.batch.n_tokens == 3
    assert rows_of(batch, 3) == [(10, 5, 1, 0), (11, 6, 1, 1), (12, 0, 0, 0)]


def test_a_full_batch_fits(batch) -> None:
    assert batch.fill([BatchItem(0, 0, [1, 2, 3, 4], 1)]) == [3]
    assert batch.batch.n_tokens == 4


def test_too_many_tokens_fail_before_anything_is_written(batch) -> None:
    batch.fill([BatchItem(0, 0, [1, 2], 1)])
    with pytest.raises(ValueError, match="5 tokens exceeds the batch of 4"):
        batch.fill([BatchItem(1, 0, [7, 7, 7], 1), BatchItem(0, 2, [8, 8], 1)])
    # The previous step's batch is untouched: checking after the writes would have put
    # 7s over it (and a token past the C arrays) before noticing.
    assert batch.batch.n_tokens == 2
    assert rows_of(batch, 2) == [(1, 0, 0, 0), (2, 1, 0, 1)]


def test_free_twice_is_harmless_and_a_freed_batch_is_not_used() -> None:
    b = TokenBatch(capacity=2, n_seq_max=1)
    b.free()
    b.free()
    with pytest.raises(RuntimeError, match="freed"):
        b.fill([BatchItem(0, 0, [1], 1)])


def test_a_row_keeps_no_stale_sequence_or_logits_flag_from_an_earlier_step(batch) -> None:
    """Sequence ids are written only where they change: a row that held another sequence
    in an earlier step must get the new one, and old logits flags must be cleared."""
    batch.fill([BatchItem(1, 0, [5, 6, 7], 1), BatchItem(0, 9, [8], 1)])
    rows = batch.fill([BatchItem(0, 10, [9], 1), BatchItem(1, 3, [4], 1)])  # the rows swap sequences
    assert rows == [0, 1]
    assert rows_of(batch, 2) == [(9, 10, 0, 1), (4, 3, 1, 1)]
    batch.fill([BatchItem(1, 4, [3, 2, 1], 0)])
    assert rows_of(batch, 3) == [(3, 4, 1, 0), (2, 5, 1, 0), (1, 6, 1, 0)]
    assert [batch.batch.n_seq_id[i] for i in range(4)] == [1, 1, 1, 1]


def test_draft_rows_each_get_logits_and_the_first_of_them_is_reported(batch) -> None:
    """A decode token with two draft tokens after it: all three rows want logits (the
    worker verifies each); the row reported is the first, the others follow it."""
    rows = batch.fill([BatchItem(0, 7, [20], 1), BatchItem(1, 3, [30, 31, 32], 3)])
    assert rows == [0, 1]
    assert rows_of(batch, 4) == [(20, 7, 0, 1), (30, 3, 1, 1), (31, 4, 1, 1), (32, 5, 1, 1)]
    batch.fill([BatchItem(1, 6, [40, 41], 1)])  # the next step: only the last row again
    assert rows_of(batch, 2) == [(40, 6, 1, 0), (41, 7, 1, 1)]
