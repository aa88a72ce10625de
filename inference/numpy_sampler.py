"""Sampling without a grammar, over all of a step's logits rows at once, in place in
llama.cpp's logits matrix.

The semantics are those of the llama.cpp chain that SamplerChain builds (llama.cpp's own
order): end-of-generation bias (ignore_eos), repeat penalties over the last repeat_last_n
tokens (prompt tokens included, as llama.cpp's server feeds them), top-k, top-p on the
softmax of the top-k set, min-p relative to the best token, temperature, then one draw.
Temperature 0 is greedy: the first maximum, as llama.cpp's greedy sampler picks.

What makes it cheap (the chain copies the whole vocabulary into a candidate array and runs
each sampler over it, per row):
- greedy rows, and rows with a top-k of at most KERNEL_MAX_K (the app's default is 40),
  go to C in one call for the step (_sampling.c, draw_rows): per row one vector pass for
  block maxima, the penalties and bans on their few tokens, the exact top-k from only
  the blocks that can hold one, then top-p, min-p, temperature and the draw on those k;
- the other rows (top_k 0 or large) get their penalties in C (penalise_rows) and find
  their candidates here with one threshold: the tokens within a factor CANDIDATE (1e-3)
  of the best one; everything after works on those (~10-200 a row instead of the
  vocabulary), for all rows at once as segments of one flat array: sort, top-k by rank,
  top-p, min-p (its cut, max + ln(min_p), is relative to the row's maximum, so its tokens
  are all candidates), temperature, the draw;
- top-p needs the top-k set's normaliser. When a row has k candidates or more they hold
  the top-k set; otherwise each top-k token they miss weighs under CANDIDATE, which bounds
  the normaliser. A row whose top-p cut that bound cannot decide, or whose kept set may go
  on below the candidates (min_p < CANDIDATE), takes the exact per-row path.

Each request has its own numpy Generator, seeded from the request's seed (or from fresh
entropy), and draws exactly one uniform per sampled token (none when greedy): its output
does not depend on what else shares the batch.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from inference._sampling import draw_rows, penalise_rows
from inference.params import SamplingParams

# Candidates: tokens within this factor of the row's best one (logit >= max + ln of it).
CANDIDATE = 1e-3
LOG_CANDIDATE = np.float32(math.log(CANDIDATE))
CANDIDATE_SPAN = 16.0  # > -LOG_CANDIDATE: row * span + gap sorts by row, then by gap
# The largest top-k draw_rows serves; its cost grows with k (a heap of k, k blocks re-read).
KERNEL_MAX_K = 256
_NO_TOKENS = np.empty(0, dtype=np.int64)
# Uniforms a request draws from its generator at a time (the same stream as one by one).
UNIFORM_BATCH = 64


class PenaltyWindow:
    """The last n tokens (n < 0: all of them), as a numpy ring handed to C as it is. A
    token seen twice is in it twice: the penalty reads every value before it writes any,
    so it still applies once per token, as llama.cpp's does."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._ring = np.empty(size if size > 0 else 64, dtype=np.int64)
        self._count = 0  # tokens accepted so far

    def accept(self, token: int) -> None:
        if self._size > 0:
            self._ring[self._count % self._size] = token
        else:  # the whole history: grow by doubling
            if self._count == self._ring.size:
                self._ring = np.concatenate([self._ring, np.empty_like(self._ring)])
            self._ring[self._count] = token
        self._count += 1

    def tokens(self) -> np.ndarray:
        """The window's tokens (in no particular order; repeats included): a view."""
        return self._ring[: min(self._count, self._ring.size)] if self._size > 0 else self._ring[: self._count]

    def distinct(self) -> list[int]:
        """Each token in the window once."""
        return sorted(set(self.tokens().tolist()))


class RequestSampler:
    """One request's sampling state: settings, RNG and penalty window."""

    def __init__(self, params: SamplingParams, banned: Sequence[int] | np.ndarray = ()) -> None:
        self.params = params
        self.greedy = params.temperature <= 0.0
        seed = params.seed if params.seed is not None else None
        self.rng = np.random.default_rng(None if seed is None else seed & 0xFFFFFFFFFFFFFFFF)
        self._uniforms = np.empty(0)
        self._next_uniform = 0
        self._uniform_taken = False
        penalised = params.repeat_penalty != 1.0 and params.repeat_last_n != 0
        self.window = PenaltyWindow(params.repeat_last_n) if penalised else None
        self.penalty = params.repeat_penalty if penalised else 1.0
        self.banned = np.asarray(banned if params.ignore_eos else (), dtype=np.int64)
        self.log_min_p = np.float32(math.log(params.min_p)) if params.min_p > 0.0 else None
        top_p = params.top_p if params.top_p < 1.0 else math.inf
        log_min_p = -math.inf if self.log_min_p is None else float(self.log_min_p)
        # The k draw_rows takes for this request (greedy: the best one), or 0: the threshold path.
        self.kernel_k = 1 if self.greedy else params.top_k if 0 < params.top_k <= KERNEL_MAX_K else 0
        self.kernel_settings = (top_p, log_min_p, params.temperature)
        # The settings _draw_candidates reads, as one row of its settings matrix.
        self.settings = (params.top_k, top_p, params.min_p, params.temperature, log_min_p)

    def accept_prompt(self, tokens: Sequence[int]) -> None:
        if self.window is None:
            return
        n = self.params.repeat_last_n
        for token in tokens if n < 0 else tokens[-n:]:
            self.window.accept(token)

    def uniform(self) -> float:
        """The uniform draw of this request's next token: the same value until accept()
        takes it, so a step that is planned but never decoded costs no draw."""
        if self._next_uniform == self._uniforms.size:
            self._uniforms = self.rng.random(UNIFORM_BATCH)
            self._next_uniform = 0
        self._uniform_taken = True
        return float(self._uniforms[self._next_uniform])

    def accept(self, token: int) -> None:
        if self.window is not None:
            self.window.accept(token)
        if self._uniform_taken:
            self._next_uniform += 1
            self._uniform_taken = False


class DrawArgs(NamedTuple):
    """draw_rows' arguments between the logits and its output (see _sampling.pyi)."""

    rows: np.ndarray
    ks: np.ndarray
    settings: np.ndarray
    windows: np.ndarray
    window_ends: np.ndarray
    penalties: np.ndarray
    bans: np.ndarray
    ban_ends: np.ndarray


@dataclass(slots=True)
class PreparedRows:
    """What sampling a step's rows needs besides the logits, built before llama_decode:
    after it, the caches hold the model's weights, and every Python object touched costs
    a trip to memory."""

    samplers: Sequence[RequestSampler]
    in_c: list[int]  # rows draw_rows serves
    c_args: DrawArgs | None  # None: no row for draw_rows
    tokens: np.ndarray  # draw_rows' output
    threshold: list[int]  # rows of the threshold path


class _StepRows:
    """The arguments of one set of rows that stay fixed while the same requests are sampled
    in the same order (rows, k, settings, penalties, bans); windows and uniforms are new
    each step (for_step)."""

    def __init__(self, samplers: Sequence[RequestSampler]) -> None:
        self.samplers = samplers
        self.in_c = [i for i, s in enumerate(samplers) if s.kernel_k]
        self.threshold = [i for i, s in enumerate(samplers) if not s.kernel_k]
        self.chosen = [samplers[i] for i in self.in_c]
        self.drawn = [i for i, s in enumerate(self.chosen) if not s.greedy]  # rows that take a uniform
        self.rows = np.array(self.in_c, dtype=np.int32)
        self.ks = np.array([s.kernel_k for s in self.chosen], dtype=np.int32)
        self.settings = np.array([s.kernel_settings + (0.0,) for s in self.chosen]).reshape(-1, 4)
        self.penalties = np.array([s.penalty for s in self.chosen], dtype=np.float32)
        bans = [s.banned for s in self.chosen]
        self.bans = np.concatenate(bans) if bans else _NO_TOKENS
        self.ban_ends = np.cumsum([b.size for b in bans], dtype=np.int64)
        self.window_sizes: list[int] = []
        self.window_ends = _NO_TOKENS
        self.tokens = np.empty(len(self.in_c), dtype=np.int32)

    def for_step(self) -> PreparedRows:
        if not self.chosen:
            return PreparedRows(self.samplers, [], None, self.tokens, self.threshold)
        for i in self.drawn:
            self.settings[i, 3] = self.chosen[i].uniform()
        windows = [_NO_TOKENS if s.window is None else s.window.tokens() for s in self.chosen]
        sizes = [w.size for w in windows]
        if sizes != self.window_sizes:  # only while a window is still filling
            self.window_sizes, self.window_ends = sizes, np.cumsum(sizes, dtype=np.int64)
        c_args = DrawArgs(self.rows, self.ks, self.settings, np.concatenate(windows), self.window_ends,
                          self.penalties, self.bans, self.ban_ends)
        return PreparedRows(self.samplers, self.in_c, c_args, self.tokens, self.threshold)


class RowPreparer:
    """prepare_rows with a memory of the last step: a decode step usually samples the same
    requests in the same order as the one before, so their fixed arrays are built once."""

    def __init__(self) -> None:
        self._last: _StepRows | None = None

    def prepare(self, samplers: Sequence[RequestSampler]) -> PreparedRows:
        last = self._last
        if last is None or len(last.samplers) != len(samplers) or any(
                a is not b for a, b in zip(last.samplers, samplers)):
            last = self._last = _StepRows(list(samplers))
        return last.for_step()

    def clear(self) -> None:
        self._last = None


def prepare_rows(samplers: Sequence[RequestSampler]) -> PreparedRows:
    """What sample_prepared needs for these rows, built from scratch."""
    return _StepRows(list(samplers)).for_step()


def sample_rows(logits: np.ndarray, samplers: Sequence[RequestSampler]) -> list[int]:
    """One token per row of logits (shape (rows, n_vocab), float32, C-contiguous), row i
    for samplers[i]; each sampler accepts its token. The rows are modified in place
    (penalties, bans)."""
    return sample_prepared(logits, prepare_rows(samplers))


def sample_prepared(logits: np.ndarray, prepared: PreparedRows) -> list[int]:
    """sample_rows, with the arguments prepare_rows built for these rows."""
    if not logits.flags.c_contiguous:
        raise ValueError("sample_rows needs C-contiguous logits rows")
    samplers = prepared.samplers
    if logits.shape[0] != len(samplers):
        raise ValueError(f"{logits.shape[0]} logits rows for {len(samplers)} samplers")
    tokens = [0] * len(samplers)
    if prepared.c_args is not None:
        if draw_rows(logits, *prepared.c_args, prepared.tokens):
            raise ValueError("the model produced a logits row without a finite value (NaN)")
        drawn = prepared.tokens.tolist()
        if prepared.threshold:
            for i, token in zip(prepared.in_c, drawn):
                tokens[i] = token
        else:  # the usual step: every row was drawn in C, in order
            tokens = drawn
    if prepared.threshold:
        threshold = prepared.threshold
        chosen = [samplers[i] for i in threshold]
        penalise_rows(logits, np.array(threshold, dtype=np.int32), *_penalty_arrays(chosen))
        rows = logits if len(threshold) == len(samplers) else logits[threshold]
        for i, token in zip(threshold, _draw(rows, chosen)):
            tokens[i] = token
    for sampler, token in zip(samplers, tokens):
        sampler.accept(token)
    return tokens


def _penalty_arrays(samplers: Sequence[RequestSampler]) -> tuple[np.ndarray, ...]:
    """The rows' windows and bans as the C side reads them: each kind concatenated, with
    the running end of each row's part; and each row's penalty."""
    windows = [_NO_TOKENS if s.window is None else s.window.tokens() for s in samplers]
    bans = [s.banned for s in samplers]
    return (np.concatenate(windows), np.cumsum([w.size for w in windows], dtype=np.int64),
            np.array([s.penalty for s in samplers], dtype=np.float32),
            np.concatenate(bans), np.cumsum([b.size for b in bans], dtype=np.int64))


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
    uniforms = np.array([samplers[i].uniform() for i in decided.tolist()])
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
    pick = int(np.searchsorted(cum, sampler.uniform() * cum[-1], side="right"))
    return int(ids[min(pick, ids.size - 1)])
