"""Sampling without a grammar, over all of a step's logits rows at once, in place in
llama.cpp's logits matrix.

The semantics are those of the llama.cpp chain that SamplerChain builds, its stages
(STAGES) in params.CHAIN's order: the end-of-generation ban (ignore_eos), the repeat
penalty over the last repeat_last_n tokens (prompt tokens included, as llama.cpp's server
feeds them), top-k, top-p on the softmax of the top-k set, min-p relative to the best
token, temperature, one draw. Temperature 0 is greedy: the first maximum, as llama.cpp's
greedy sampler picks. OpenAI's penalties are not here: their requests take the chain.

What makes it cheap (the chain copies the whole vocabulary into a candidate array and runs
each sampler over it, per row):
- greedy rows, and rows with a top-k of at most KERNEL_MAX_K (the app's default is 40),
  go to C in one call for the step (_kernel.c, draw_rows): per row one vector pass for
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

import numpy as np

from inference.params import GREEDY, SamplingParams
from inference.sample import kernel
from inference.sample.kernel import draw_rows, penalise_rows

# The stages of params.CHAIN sampled here and in the C kernel (a field of any other stage,
# or one marked kernel=False in SAMPLING_FIELDS, sends its requests to llama.cpp's chain).
STAGES = frozenset({"ignore_eos", "penalties", "top_k", "top_p", "min_p", "temperature", "dist", GREEDY})
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
    """The last n tokens (n < 0: all of them), as a numpy ring. A token seen twice is in it
    twice: the penalty reads every value before it writes any, so it still applies once per
    token, as llama.cpp's does. While its request's rows are in a PreparedRows, the ring is
    a row of that one's matrix (export/load)."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._ring = np.empty(size if size > 0 else 64, dtype=np.int64)
        self._count = 0  # tokens accepted so far

    @property
    def bounded(self) -> bool:
        return self._size > 0

    @property
    def count(self) -> int:
        return self._count

    @property
    def capacity(self) -> int:
        return self._ring.size

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
        return self._ring[: min(self._count, self._ring.size)]

    def distinct(self) -> list[int]:
        """Each token in the window once."""
        return sorted(set(self.tokens().tolist()))

    def export(self, ring: np.ndarray) -> int:
        """Copy the ring into ring (at least capacity wide); returns the ring size C uses
        there: the window's size, or for the whole history the room ring has."""
        used = min(self._count, self._ring.size)
        ring[:used] = self._ring[:used]
        return self._size if self._size > 0 else ring.size

    def load(self, ring: np.ndarray, count: int) -> None:
        """Take back the ring export wrote to, after C accepted tokens into it."""
        if self._size <= 0 and count > self._ring.size:
            self._ring = np.empty(max(count, 2 * self._ring.size), dtype=np.int64)
        used = min(count, self._ring.size)
        self._ring[:used] = ring[:used]
        self._count = count


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
        # The k draw_rows takes for this request (greedy: the best one), or 0: the threshold
        # path (every request's, where the C kernel was not built).
        self.kernel_k = 0 if not kernel.AVAILABLE else 1 if self.greedy else \
            params.top_k if 0 < params.top_k <= KERNEL_MAX_K else 0
        self.kernel_settings = (top_p, log_min_p, params.temperature)  # draw_rows' settings row
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

    def export_uniforms(self, out: np.ndarray) -> int:
        """Copy the unused uniforms' buffer into out (UNIFORM_BATCH wide), refilled first
        when it is used up; returns the index of the next one."""
        if self._next_uniform == self._uniforms.size:
            self._uniforms = self.rng.random(UNIFORM_BATCH)
            self._next_uniform = 0
        out[:] = self._uniforms
        return self._next_uniform

    def load_uniforms(self, uniforms: np.ndarray, cursor: int) -> None:
        """Take back the buffer export_uniforms wrote to, after C used cursor of them."""
        self._uniforms = uniforms.copy()
        self._next_uniform = cursor
        self._uniform_taken = False


class PreparedRows:
    """The state of a step's rows that draw_rows serves, as the arrays it reads and updates
    in place, built before llama_decode (after it the caches hold the model's weights, and
    every Python object touched costs a trip to memory).

    Kept while the same requests are sampled in the same order (RowPreparer): a decode step
    then costs one C call and no Python per row. While kept, the rows' penalty windows and
    unused uniforms live here, not in their samplers: store() hands them back, and must run
    before the samplers are used anywhere else (RowPreparer does so when the rows change)."""

    def __init__(self, samplers: Sequence[RequestSampler]) -> None:
        self.samplers = list(samplers)
        self.in_c = [i for i, s in enumerate(self.samplers) if s.kernel_k]
        self.threshold = [i for i, s in enumerate(self.samplers) if not s.kernel_k]
        chosen = self._chosen = [self.samplers[i] for i in self.in_c]
        n = len(chosen)
        self.tokens = np.empty(n, dtype=np.int32)  # draw_rows' output
        windows = [s.window for s in chosen]
        # Whole-history windows grow: room for twice what they hold (ready() checks it).
        width = max([1] + [w.capacity if w.bounded else 2 * w.count + 64 for w in windows if w is not None])
        self._rings = np.zeros((n, width), dtype=np.int64)
        sizes = np.array([0 if w is None else w.export(self._rings[i]) for i, w in enumerate(windows)],
                         dtype=np.int64)
        self._counts = np.array([0 if w is None else w.count for w in windows], dtype=np.int64)
        self._growing = [i for i, w in enumerate(windows) if w is not None and not w.bounded]
        self._drawing = [i for i, s in enumerate(chosen) if not s.greedy]
        self._uniforms = np.zeros((n, UNIFORM_BATCH))
        self._cursors = np.zeros(n, dtype=np.int32)
        for i in self._drawing:
            self._cursors[i] = chosen[i].export_uniforms(self._uniforms[i])
        bans = [s.banned for s in chosen]
        # draw_rows' arguments between the logits and tokens, in its order (see _sampling.pyi).
        self._c_args = (
            np.array(self.in_c, dtype=np.int32),
            np.array([s.kernel_k for s in chosen], dtype=np.int32),
            np.array([s.kernel_settings for s in chosen], dtype=np.float64).reshape(-1, 3),
            np.array([s.penalty for s in chosen], dtype=np.float32),
            np.concatenate(bans) if bans else _NO_TOKENS,
            np.cumsum([b.size for b in bans], dtype=np.int64),
            self._rings, sizes, self._counts, self._uniforms, self._cursors,
        )

    def serves(self, samplers: Sequence[RequestSampler]) -> bool:
        mine = self.samplers
        return len(mine) == len(samplers) and all(a is b for a, b in zip(mine, samplers))

    def ready(self) -> bool:
        """False when a whole-history window has filled its room: build the rows again."""
        return all(self._counts[i] < self._rings.shape[1] for i in self._growing)

    def draw(self, logits: np.ndarray) -> list[int]:
        """One token for each row draw_rows serves, in order; each row accepts it."""
        if not self._chosen:
            return []
        undrawn, exhausted = draw_rows(logits, *self._c_args, self.tokens)
        if undrawn:
            raise ValueError("the model produced a logits row without a finite value (NaN)")
        if exhausted:
            self._refill()
        return self.tokens.tolist()

    def _refill(self) -> None:
        for i in self._drawing:
            if self._cursors[i] == UNIFORM_BATCH:
                self._uniforms[i] = self._chosen[i].rng.random(UNIFORM_BATCH)
                self._cursors[i] = 0

    def store(self) -> None:
        """Hand each row's window and uniforms back to its sampler."""
        for i, sampler in enumerate(self._chosen):
            if sampler.window is not None:
                sampler.window.load(self._rings[i], int(self._counts[i]))
        for i in self._drawing:
            self._chosen[i].load_uniforms(self._uniforms[i], int(self._cursors[i]))


class RowPreparer:
    """Keeps the last step's PreparedRows: a decode step usually samples the same requests
    in the same order as the one before, so their rows are built once."""

    def __init__(self) -> None:
        self._last: PreparedRows | None = None

    def prepare(self, samplers: Sequence[RequestSampler]) -> PreparedRows:
        last = self._last
        if last is None or not last.serves(samplers) or not last.ready():
            self.clear()
            last = self._last = PreparedRows(samplers)
        return last

    def clear(self) -> None:
        """Hand the kept rows' state back to their samplers and forget them."""
        if self._last is not None:
            self._last.store()
            self._last = None

    def release(self, sampler: RequestSampler) -> None:
        """Before sampler is used on its own (a draft's verification): its state back."""
        if self._last is not None and any(s is sampler for s in self._last.samplers):
            self.clear()


def sample_rows(logits: np.ndarray, samplers: Sequence[RequestSampler]) -> list[int]:
    """One token per row of logits (shape (rows, n_vocab), float32, C-contiguous), row i
    for samplers[i]; each sampler accepts its token. The rows are modified in place
    (penalties, bans)."""
    prepared = PreparedRows(samplers)
    try:
        return sample_prepared(logits, prepared)
    finally:
        prepared.store()


def verify_draft(logits: np.ndarray, sampler: RequestSampler, draft: Sequence[int]) -> list[int]:
    """One request's rows for a draft: row j holds the logits after the request's tokens
    and draft[:j]. Sampled in order: the draft tokens kept (up to the first that differs
    from what was sampled there) and the token sampled after them.

    Each row is sampled with the state the tokens before it left (penalty window, one
    uniform per token kept), so the tokens are those of decoding them one by one: greedy
    output does not change, and sampled output keeps its distribution. For a draft of
    fixed tokens this is speculative rejection sampling: a draft token is kept with the
    probability the model gives it, and a rejected one is replaced by a draw from the rest
    of the distribution (the sample, which is not it)."""
    emitted: list[int] = []
    for j in range(len(draft) + 1):
        token = sample_rows(logits[j:j + 1], [sampler])[0]
        emitted.append(token)
        if j == len(draft) or token != draft[j]:
            break
    return emitted


def sample_prepared(logits: np.ndarray, prepared: PreparedRows) -> list[int]:
    """sample_rows, on rows built (and kept) by the caller: their state stays in prepared."""
    if not logits.flags.c_contiguous:
        raise ValueError("sample_rows needs C-contiguous logits rows")
    samplers = prepared.samplers
    if logits.shape[0] != len(samplers):
        raise ValueError(f"{logits.shape[0]} logits rows for {len(samplers)} samplers")
    drawn = prepared.draw(logits)
    threshold = prepared.threshold
    if not threshold:  # the usual step: every row was drawn in C, in order
        return drawn
    tokens = [0] * len(samplers)
    for i, token in zip(prepared.in_c, drawn):
        tokens[i] = token
    chosen = [samplers[i] for i in threshold]
    penalise_rows(logits, np.array(threshold, dtype=np.int32), *_penalty_arrays(chosen))
    rows = logits if len(threshold) == len(samplers) else logits[threshold]
    for i, token in zip(threshold, _draw(rows, chosen)):
        tokens[i] = token
    for sampler, token in zip(chosen, (tokens[i] for i in threshold)):
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
    tokens: list[int | None] = [None] * len(samplers)
    greedy = [i for i, s in enumerate(samplers) if s.greedy]
    if greedy:  # only without the C kernel: the first maximum, as llama.cpp's greedy sampler
        for i, token in zip(greedy, np.argmax(logits[greedy], axis=1).tolist()):
            tokens[i] = token
        others = [i for i, s in enumerate(samplers) if not s.greedy]
        if others:
            for i, token in zip(others, _draw(logits[others], [samplers[i] for i in others])):
                tokens[i] = token
        return tokens  # type: ignore[return-value]  # every row was drawn
    top = logits.max(axis=1)
    flat = np.flatnonzero(logits >= (top + LOG_CANDIDATE)[:, None])
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
