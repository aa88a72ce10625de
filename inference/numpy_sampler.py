"""Sampling without a grammar, in numpy, over all of a step's logits rows at once.

The semantics are those of the llama.cpp chain that SamplerChain builds (llama.cpp's own
order): end-of-generation bias (ignore_eos), repeat penalties over the last repeat_last_n
tokens (prompt tokens included, as llama.cpp's server feeds them), top-k, top-p on the
softmax of the top-k set, min-p relative to the best token, temperature, then one draw.
Temperature 0 is greedy: the first maximum, as llama.cpp's greedy sampler picks.

What makes it cheap (the chain copies the whole vocabulary into a candidate array and runs
each sampler over it, per row):
- penalties and bans touch only their few tokens, in place in the logits rows;
- one pass finds each row's maximum, one comparison keeps the candidates: the tokens
  within a factor CANDIDATE (1e-3) of the best one; everything after works on those
  (~10-200 a row instead of the vocabulary), for all rows at once as segments of one flat
  array: sort, top-k by rank, top-p, min-p (its cut, max + ln(min_p), is relative to the
  row's maximum, so its tokens are all candidates), temperature, the draw;
- top-p needs the top-k set's normaliser. When a row has k candidates or more they hold
  the top-k set; otherwise each top-k token they miss weighs under CANDIDATE, which bounds
  the normaliser. A row whose top-p cut that bound cannot decide (about 1 in 500 on real
  logits), or whose kept set may go on below the candidates (min_p < CANDIDATE), takes
  the exact per-row path (top-k by argpartition over the row).

Each request has its own numpy Generator, seeded from the request's seed (or from fresh
entropy), and draws exactly one uniform per token: its output does not depend on what
else shares the batch.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence

import numpy as np

from inference.params import SamplingParams

NEVER = np.float32(-np.inf)
# Candidates: tokens within this factor of the row's best one (logit >= max + ln of it).
CANDIDATE = 1e-3
LOG_CANDIDATE = np.float32(math.log(CANDIDATE))
CANDIDATE_SPAN = 16.0  # > -LOG_CANDIDATE: row * span + gap sorts by row, then by gap


class PenaltyWindow:
    """The last n tokens (n < 0: all of them) and how often each occurs among them,
    updated in O(1) per token: llama.cpp's penalties sampler's ring buffer."""

    def __init__(self, size: int) -> None:
        self._tokens: deque[int] = deque()
        self._size = size
        self._counts: dict[int, int] = {}

    def accept(self, token: int) -> None:
        if 0 <= self._size == len(self._tokens):
            old = self._tokens.popleft()
            left = self._counts[old] - 1
            if left:
                self._counts[old] = left
            else:
                del self._counts[old]
        self._tokens.append(token)
        self._counts[token] = self._counts.get(token, 0) + 1

    def distinct(self) -> list[int]:
        """Each token in the window once: the penalty applies once per token."""
        return list(self._counts)


class RequestSampler:
    """One request's sampling state on the numpy path: settings, RNG and penalty window."""

    def __init__(self, params: SamplingParams, banned: Sequence[int] = ()) -> None:
        self.params = params
        self.greedy = params.temperature <= 0.0
        seed = params.seed if params.seed is not None else None
        self.rng = np.random.default_rng(None if seed is None else seed & 0xFFFFFFFFFFFFFFFF)
        penalised = params.repeat_penalty != 1.0 and params.repeat_last_n != 0
        self.window = PenaltyWindow(params.repeat_last_n) if penalised else None
        self.penalty = np.float32(params.repeat_penalty)
        self.banned = np.array(banned if params.ignore_eos else [], dtype=np.int64)
        self.log_min_p = np.float32(math.log(params.min_p)) if params.min_p > 0.0 else None
        # The settings _draw_candidates reads, as one row of its settings matrix.
        self.settings = (params.top_k, params.top_p if params.top_p < 1.0 else math.inf, params.min_p,
                         params.temperature, -math.inf if self.log_min_p is None else float(self.log_min_p))

    def accept_prompt(self, tokens: Sequence[int]) -> None:
        if self.window is None:
            return
        n = self.params.repeat_last_n
        for token in tokens if n < 0 else tokens[-n:]:
            self.window.accept(token)

    def accept(self, token: int) -> None:
        if self.window is not None:
            self.window.accept(token)


def sample_rows(logits: np.ndarray, samplers: Sequence[RequestSampler]) -> list[int]:
    """One token per row of logits (shape (rows, n_vocab), float32, C-contiguous), row i
    for samplers[i]; each sampler accepts its token. The rows are modified in place
    (penalties, bans)."""
    if not logits.flags.c_contiguous:
        raise ValueError("sample_rows needs C-contiguous logits rows")
    _penalise(logits, samplers)
    tokens = [0] * len(samplers)
    greedy = [i for i, s in enumerate(samplers) if s.greedy]
    drawn = [i for i, s in enumerate(samplers) if not s.greedy]
    if greedy:
        best = logits.argmax(axis=1) if len(greedy) == len(samplers) else [logits[i].argmax() for i in greedy]
        for i, token in zip(greedy, best):
            tokens[i] = int(token)
    if drawn:
        rows = logits if len(drawn) == len(samplers) else logits[drawn]
        for i, token in zip(drawn, _draw(rows, [samplers[i] for i in drawn])):
            tokens[i] = token
    for sampler, token in zip(samplers, tokens):
        sampler.accept(token)
    return tokens


def _penalise(logits: np.ndarray, samplers: Sequence[RequestSampler]) -> None:
    """llama.cpp's repeat penalty (logit <= 0: times the penalty, else divided by it, in
    float32, once per distinct window token) and the end-of-generation ban, in place;
    one gather and one scatter for all rows."""
    tokens: list[int] = []
    offsets: list[int] = []
    factors: list[float] = []
    n_vocab = logits.shape[1]
    for i, s in enumerate(samplers):
        if s.window is not None:
            window = s.window.distinct()
            tokens.extend(window)
            offsets.append(i * n_vocab)
            factors.append(len(window))
        if s.banned.size:
            logits[i, s.banned] = NEVER
    if not tokens:
        return
    penalised = [s for s in samplers if s.window is not None]
    sizes = np.array(factors, dtype=np.int64)
    flat = np.array(tokens, dtype=np.int64) + np.repeat(offsets, sizes)
    factor = np.repeat(np.array([s.penalty for s in penalised], dtype=np.float32), sizes)
    row = logits.reshape(-1)  # a view: the rows are contiguous
    values = row[flat]
    row[flat] = np.where(values <= 0, values * factor, values / factor)


def _draw(logits: np.ndarray, samplers: Sequence[RequestSampler]) -> list[int]:
    top = logits.max(axis=1)
    flat = np.flatnonzero(logits >= (top + LOG_CANDIDATE)[:, None])
    tokens: list[int | None] = [None] * len(samplers)
    _draw_candidates(logits, flat, top, samplers, tokens)
    for i, token in enumerate(tokens):
        if token is None:
            tokens[i] = _draw_exact(logits[i], samplers[i])
    return tokens  # type: ignore[return-value]  # every None was filled


def _draw_candidates(logits: np.ndarray, flat: np.ndarray, top: np.ndarray,
                     samplers: Sequence[RequestSampler], tokens: list[int | None]) -> None:
    """The vectorised path over each row's candidates (logit >= max + LOG_CANDIDATE);
    fills tokens for the rows it can decide exactly, leaves None for the others."""
    n, n_vocab = logits.shape
    top_k, top_p, min_p, temperature, log_min_p = np.array([s.settings for s in samplers]).T
    k = np.where((top_k > 0) & (top_k < n_vocab), top_k, n_vocab)
    row = flat // n_vocab
    values = logits.reshape(-1)[flat]
    gap = (top[row] - values).astype(np.float64)  # in [0, -LOG_CANDIDATE]
    order = np.argsort(row * CANDIDATE_SPAN + gap)  # by row, then best first
    row, flat, gap, values = row[order], flat[order], gap[order], values[order]
    counts = np.bincount(row, minlength=n)
    starts = np.cumsum(counts) - counts
    first = starts[row]
    in_top_k = np.arange(row.size) - first < k[row]
    weight = np.exp(-gap)  # relative to the row's best token: <= 1
    cum = np.cumsum(weight)
    before = cum - (cum[first] - weight[first]) - weight  # mass of the better tokens in the row
    z_low = np.bincount(row, weights=weight * in_top_k, minlength=n)
    # min-p's cut in float32, as llama.cpp computes it.
    eligible = in_top_k & (values >= (top + log_min_p.astype(np.float32))[row])
    keep = eligible & (before < (top_p * z_low)[row])
    undecided = np.zeros(n, dtype=bool)
    missing = np.maximum(k - counts, 0)
    if missing.any():
        # The top-k set's tokens below the candidates each weigh less than CANDIDATE: a
        # row is decided if its top-p cut is the same for their least and greatest mass.
        z_high = z_low + missing * CANDIDATE
        unsure = keep != (eligible & (before < (top_p * z_high)[row]))
        undecided = np.bincount(row, weights=unsure, minlength=n) > 0
        # Without a min-p cut above the candidates, the kept set may go on below them.
        open_end = (missing > 0) & (min_p < CANDIDATE)
        if open_end.any():
            undecided |= open_end & keep[np.minimum(starts + counts - 1, row.size - 1)]
    prob = np.where(keep, np.exp(-gap / temperature[row]), 0.0)
    # One draw per decided row: the first token whose running mass exceeds u * its row's
    # mass, found for all rows at once in the cumulative sum over all segments.
    decided = np.flatnonzero(~undecided)
    uniforms = np.array([samplers[i].rng.random() for i in decided.tolist()])
    cum = np.cumsum(prob)
    first, last = starts[decided], (starts + counts - 1)[decided]
    base = cum[first] - prob[first]
    picks = np.searchsorted(cum, base + uniforms * (cum[last] - base), side="right")
    picks = np.minimum(picks, last)  # u * mass rounding up to the row's whole mass
    for i, token in zip(decided.tolist(), (flat[picks] - decided * n_vocab).tolist()):
        tokens[i] = token


def _top_k(k: int, n_vocab: int) -> int:
    return k if 0 < k < n_vocab else n_vocab


def _draw_exact(row: np.ndarray, sampler: RequestSampler) -> int:
    """The chain, step by step, on one row: for settings the vectorised path cannot bound."""
    p = sampler.params
    n_vocab = row.size
    k = _top_k(p.top_k, n_vocab)
    ids = np.argpartition(row, n_vocab - k)[n_vocab - k:] if k < n_vocab else np.arange(n_vocab)
    ids = ids[np.argsort(-row[ids], kind="stable")]
    values = row[ids]
    top = values[0]
    if p.top_p < 1.0:
        weight = np.exp(values.astype(np.float64) - np.float64(top))
        before = np.cumsum(weight) - weight
        n_keep = int(np.count_nonzero(before < p.top_p * weight.sum()))
        ids, values = ids[:n_keep], values[:n_keep]
    if sampler.log_min_p is not None:
        n_keep = max(1, int(np.count_nonzero(values >= top + sampler.log_min_p)))
        ids, values = ids[:n_keep], values[:n_keep]
    prob = np.exp((values.astype(np.float64) - np.float64(top)) / p.temperature)
    cum = np.cumsum(prob)
    pick = int(np.searchsorted(cum, sampler.rng.random() * cum[-1], side="right"))
    return int(ids[min(pick, ids.size - 1)])
