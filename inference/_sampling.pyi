"""Sampling over a step's logits rows in C (inference/_sampling.c). Arrays are C-contiguous
numpy arrays: logits float32 (n, n_vocab); rows, ks, ids and tokens int32; windows, bans
and their *_ends int64 (row r owns windows[window_ends[r-1]:window_ends[r]]); penalties
float32; settings float64 (rows, 4): top_p (inf for none), log(min_p) (-inf for none),
temperature (<= 0: greedy), the row's uniform draw in [0, 1)."""

import numpy as np

# The vector width the block maxima pass runs at (CHORUS_SAMPLING_VECTOR may narrow it).
VECTOR_WIDTH: str

def top_k_rows(logits: np.ndarray, rows: np.ndarray, ks: np.ndarray, ids: np.ndarray, values: np.ndarray) -> None:
    """For each i: the ks[i] largest logits of row rows[i] (descending, ties by smaller id)
    into ids[i] and values[i]; the rest of each output row -1 and -inf."""

def penalise_rows(logits: np.ndarray, rows: np.ndarray, windows: np.ndarray, window_ends: np.ndarray,
                  penalties: np.ndarray, bans: np.ndarray, ban_ends: np.ndarray) -> None:
    """Bans (-inf), then the repeat penalty once per window token, in place."""

def draw_rows(logits: np.ndarray, rows: np.ndarray, ks: np.ndarray, settings: np.ndarray, windows: np.ndarray,
              window_ends: np.ndarray, penalties: np.ndarray, bans: np.ndarray, ban_ends: np.ndarray,
              tokens: np.ndarray) -> int:
    """Per row: bans and penalties in place, its top ks[i], then top-p, min-p, temperature
    and the draw; tokens[i] the token, or -1 where no logit is finite (NaN). Returns the
    number of such rows."""
