"""Token bitmasks as llguidance writes them: one row of int32 words per request, bit t of
word t // 32 set when token t is allowed."""

from __future__ import annotations

import numpy as np


def new_masks(rows: int, n_vocab: int) -> np.ndarray:
    """A bitmask of rows x n_vocab bits (int32 words), every token allowed."""
    return np.full((rows, (n_vocab + 31) // 32), -1, dtype=np.int32)


def allowed_bits(mask: np.ndarray, n_vocab: int) -> np.ndarray:
    """One row's bits as n_vocab 0/1 bytes."""
    return np.unpackbits(mask.view(np.uint8), bitorder="little", count=n_vocab)


def allowed_tokens(mask: np.ndarray, n_vocab: int) -> np.ndarray:
    """The tokens one row allows, ascending."""
    return np.flatnonzero(allowed_bits(mask, n_vocab))


def allow_only(mask: np.ndarray, tokens: np.ndarray | list[int]) -> None:
    """Rewrites one row (in place) to allow exactly these tokens."""
    chosen = np.asarray(tokens, dtype=np.int64)
    words = mask.view(np.uint32)
    words[:] = 0
    np.bitwise_or.at(words, chosen >> 5, np.left_shift(np.uint32(1), (chosen & 31).astype(np.uint32)))


def apply_mask(logits: np.ndarray, mask: np.ndarray) -> None:
    """Tokens the mask forbids get -inf in logits (one row, in place)."""
    logits[allowed_bits(mask, logits.size) == 0] = -np.inf
