"""Where a sequence's tokens sit: their positions, for models whose images span fewer
positions than rows (M-RoPE: Qwen-VL).

Everywhere else a token's index in its sequence is its position. Under M-RoPE an image piece
of R rows is a grid W wide: its rows sit at (t, y, x) = (p0, p0 + row // W, p0 + row % W),
all at position p0 in the KV cache's eyes, and the token after the piece at p0 + P, P = the
positions the piece spans (libmtmd's n_pos: the grid's larger side). From there on each
index is R - P ahead of its position. A sequence's shifts are a short list of (index after a
piece, how far ahead from there); index i sits at i minus the last shift at or before it.

Such a piece is decoded whole (inference/sched/scheduler.py): its rows share one position, so
the cache could not drop part of them, and every cut the engine makes (a cached prefix, a
truncation) falls on a boundary between text and pieces.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Sequence

import numpy as np

from inference.params import image_slot_row

# (slot, first row of a piece) -> the positions the piece spans, or None for as many as rows.
PieceSpans = Callable[[int, int], int | None]
Shifts = list[tuple[int, int]]


def position_shifts(tokens: Sequence[int], spans: PieceSpans) -> Shifts:
    """The shifts of a sequence of tokens (image rows as placeholder ids); empty where every
    piece spans as many positions as rows."""
    ids = np.asarray(tokens, dtype=np.int64)
    rows = np.flatnonzero(ids < 0)
    if rows.size == 0:
        return []
    # a piece: a run of consecutive indices whose ids count down by one
    breaks = np.flatnonzero((np.diff(rows) != 1) | (np.diff(ids[rows]) != -1)) + 1
    shifts: Shifts = []
    ahead = 0
    for piece in np.split(rows, breaks):
        first, n_rows = int(piece[0]), len(piece)
        span = spans(*image_slot_row(int(ids[first])))
        if span is not None and span != n_rows:
            ahead += n_rows - span
            shifts.append((first + n_rows, ahead))
    return shifts


def position(shifts: Shifts, index: int) -> int:
    """The position of the token at index (or of the next one to come, at the end)."""
    k = bisect_right(shifts, (index, float("inf")))
    return index - shifts[k - 1][1] if k else index
