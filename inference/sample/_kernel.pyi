"""Sampling over a step's logits rows in C (inference/sample/_kernel.c). Arrays are C-contiguous
numpy arrays: logits float32 (n, n_vocab); rows, ks, ids, cursors and tokens int32; windows,
bans and their *_ends int64 (row r owns bans[ban_ends[r-1]:ban_ends[r]]); penalties float32.
In settings, top_p is inf for none, log(min_p) -inf for none, a temperature <= 0 is greedy."""

import numpy as np

# The vector width the block maxima pass runs at (CHORUS_SAMPLING_VECTOR may narrow it).
VECTOR_WIDTH: str

def top_k_rows(logits: np.ndarray, rows: np.ndarray, ks: np.ndarray, ids: np.ndarray, values: np.ndarray) -> None:
    """For each i: the ks[i] largest logits of row rows[i] (descending, ties by smaller id)
    into ids[i] and values[i]; the rest of each output row -1 and -inf."""

def penalise_rows(logits: np.ndarray, rows: np.ndarray, windows: np.ndarray, window_ends: np.ndarray,
                  penalties: np.ndarray, bans: np.ndarray, ban_ends: np.ndarray) -> None:
    """Bans (-inf), then the repeat penalty once per window token, in place."""

def draw_rows(logits: np.ndarray, rows: np.ndarray, ks: np.ndarray, settings: np.ndarray, penalties: np.ndarray,
              bans: np.ndarray, ban_ends: np.ndarray, rings: np.ndarray, ring_sizes: np.ndarray,
              ring_counts: np.ndarray, uniforms: np.ndarray, cursors: np.ndarray,
              tokens: np.ndarray) -> tuple[int, int]:
    """Per row: bans and the repeat penalty (over rings[i][:min(ring_counts[i], ring_sizes[i])],
    int64), in place, its top ks[i], then top-p, min-p, temperature (settings float64 (rows, 3):
    top_p, log(min_p), temperature) and the draw with uniforms[i][cursors[i]] (float64 (rows,
    U), int32 cursors); tokens[i] the token, or -1 where no logit is finite (NaN). When every
    row drew, row i's ring takes its token at ring_counts[i] % ring_sizes[i] (a size of 0 keeps
    none), ring_counts[i] grows by one, and each drawing row's cursor moves on. Returns (rows
    that drew no token, drawing rows whose cursor reached U)."""
