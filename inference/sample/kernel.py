"""The C sampling kernel (_kernel.c), or numpy in its place where it could not be built.

The extension is optional (pyproject's ext-modules): an install with no C compiler, or
one setuptools cannot drive with OpenMP (MSVC), still succeeds, and every row is then
sampled on the numpy threshold path (rows.py), with its penalties applied here. What is
lost is speed only: the host time of a decode step (docs/sampling.md). CHORUS_SAMPLING_KERNEL=0
chooses the numpy path where the kernel exists (the tests force it this way too).
"""

from __future__ import annotations

import importlib
import logging
import os
from types import ModuleType

import numpy as np

log = logging.getLogger(__name__)


def _load() -> ModuleType | None:
    if os.environ.get("CHORUS_SAMPLING_KERNEL", "").strip().lower() in ("0", "false", "no", "off"):
        return None
    try:  # by name: a missing extension is an expected state, not an import error
        return importlib.import_module("inference.sample._kernel")
    except ImportError as exc:
        log.info("sampling without the C kernel (%s): every row takes the numpy path", exc)
        return None


_kernel = _load()
AVAILABLE = _kernel is not None  # draw_rows can serve greedy and small top-k rows
VECTOR_WIDTH = str(getattr(_kernel, "VECTOR_WIDTH", "none"))


def draw_rows(*args: np.ndarray) -> tuple[int, int]:
    """The kernel's draw (see _kernel.pyi); only called while AVAILABLE."""
    assert _kernel is not None, "draw_rows without the C kernel"
    return _kernel.draw_rows(*args)


def penalise_rows(logits: np.ndarray, rows: np.ndarray, windows: np.ndarray, window_ends: np.ndarray,
                  penalties: np.ndarray, bans: np.ndarray, ban_ends: np.ndarray) -> None:
    """Bans (-inf), then the repeat penalty once per distinct window token, in place: in C
    when the kernel is there, else the same arithmetic in numpy (llama.cpp's: a positive
    logit divided by the penalty, any other multiplied)."""
    if AVAILABLE and _kernel is not None:
        _kernel.penalise_rows(logits, rows, windows, window_ends, penalties, bans, ban_ends)
        return
    window_start = ban_start = 0
    for i, row in enumerate(rows.tolist()):
        logit_row = logits[row]
        banned = bans[ban_start:ban_ends[i]]
        tokens = np.unique(windows[window_start:window_ends[i]])
        window_start, ban_start = int(window_ends[i]), int(ban_ends[i])
        penalty = np.float32(penalties[i])
        if banned.size:
            logit_row[banned] = -np.inf
        if tokens.size and penalty != 1.0:
            values = logit_row[tokens]  # float32, as llama.cpp computes it
            logit_row[tokens] = np.where(values <= 0, values * penalty, values / penalty)
