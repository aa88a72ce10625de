"""Sampling without a grammar, in numpy, over all of a step's logits rows at once.

The semantics are those of the llama.cpp chain that SamplerChain builds (llama.cpp's own
order): end-of-generation bias (ignore_eos), repeat penalties over the last repeat_last_n
tokens (prompt tokens included, as llama.cpp's server feeds them), top-k, top-p on the
softmax of the top-k set, min-p relative to the best token, temperature, then one draw.
Temperature 0 is greedy: the first maximum, as llama.cpp's greedy sampler picks.

What makes it cheap (the chain copies the whole vocabulary into a candidate array and runs
each sampler over it, per row):
- penalties and bans touch only their few tokens, in place in the logits rows;
- min-p's cut is relative to the row's maximum, so one comparison over the rows keeps only
  the tokens with logit >= max + ln(min_p); everything after works on those few, for all
  rows together (segments of one flat array), with no sort of the vocabulary;
- top-p needs the top-k set's normaliser. When the min-p set holds k tokens or more it
  contains the top-k set; otherwise the tokens missing from it are each below the min-p
  threshold, which bounds the normaliser. A row whose top-p cut the bound cannot decide
  (rare), or whose settings give no threshold (min_p = 0), takes the exact per-row path.

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
# Below it, the at most top_k - 1 tokens the candidates may miss weigh too little to move
# a top-p cut in all but a few rows; those take the exact path.
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
    """One token per row of logits (shape (rows, n_vocab), float32), row i for samplers[i];
    each sampler accepts its token. The rows are modified in place (penalties, bans)."""
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
    float32, once per distinct window token) and the end-of-generation ban, in place."""
    rows: list[np.ndarray] = []
    cols: list[np.ndarray] = []
    factors: list[np.ndarray] = []
    for i, s in enumerate(samplers):
        if s.window is not None:
            window = np.array(s.window.distinct(), dtype=np.int64)
            rows.append(np.full(window.size, i))
            cols.append(window)
            factors.append(np.full(window.size, s.penalty))
        if s.banned.size:
            logits[i, s.banned] = NEVER
    if not rows:
        return
    r, c, f = np.concatenate(rows), np.concatenate(cols), np.concatenate(factors)
    values = logits[r, c]
    logits[r, c] = np.where(values <= 0, values * f, values / f)


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
    row = flat // n_vocab
    values = logits.reshape(-1)[flat]
    gap = (top[row] - values).astype(np.float64)  # in [0, -LOG_CANDIDATE]
    order = np.argsort(row * CANDIDATE_SPAN + gap, kind="stable")  # by row, then best first
    row, ids, gap, values = row[order], (flat - row * n_vocab)[order], gap[order], values[order]
    counts = np.bincount(row, minlength=n)
    starts = np.cumsum(counts) - counts
    rank = np.arange(row.size) - starts[row]
    weight = np.exp(-gap)  # relative to the row's best token: <= 1
    k = np.array([_top_k(s.params.top_k, n_vocab) for s in samplers])
    in_top_k = rank < k[row]
    z_low = np.bincount(row, weights=weight * in_top_k, minlength=n)
    # The top-k set's tokens below the candidates each weigh less than CANDIDATE.
    missing = np.maximum(k - counts, 0)
    z_high = z_low + missing * CANDIDATE
    top_p = np.array([s.params.top_p if s.params.top_p < 1.0 else np.inf for s in samplers])
    min_p = np.array([s.params.min_p for s in samplers])
    in_min_p = values >= (top + np.array([_log_min_p(s) for s in samplers], dtype=np.float32))[row]
    before = _segment_cumsum(weight, starts, row) - weight  # mass of the better tokens
    keep = in_top_k & in_min_p & (before < (top_p * z_low)[row])
    unsure = keep != (in_top_k & in_min_p & (before < (top_p * z_high)[row]))
    # Without a min-p cut above the candidates, the kept set may go on below them.
    last = starts + counts - 1
    open_end = (missing > 0) & (min_p < CANDIDATE) & keep[np.minimum(last, row.size - 1)]
    undecided = (np.bincount(row, weights=unsure, minlength=n) > 0) | open_end
    temperature = np.array([s.params.temperature for s in samplers])
    prob = np.where(keep, np.exp(-gap / temperature[row]), 0.0)
    # One draw per decided row: the first token whose running mass exceeds u * its row's
    # mass, found for all rows at once in the cumulative sum over all segments.
    decided = np.flatnonzero(~undecided)
    uniforms = np.array([samplers[i].rng.random() for i in decided.tolist()])
    cum = np.cumsum(prob)
    first, last = starts[decided], last[decided]
    base = cum[first] - prob[first]
    picks = np.searchsorted(cum, base + uniforms * (cum[last] - base), side="right")
    picks = np.clip(picks, first, last)  # u * mass rounding up to the row's whole mass
    for i, pick in zip(decided.tolist(), ids[picks].tolist()):
        tokens[i] = pick


def _log_min_p(sampler: RequestSampler) -> float:
    return -np.inf if sampler.log_min_p is None else float(sampler.log_min_p)


def _segment_cumsum(x: np.ndarray, starts: np.ndarray, row: np.ndarray) -> np.ndarray:
    """Cumulative sums restarting at each row's first element."""
    total = np.cumsum(x)
    offset = total[starts[row]] - x[starts[row]]
    return total - offset


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
