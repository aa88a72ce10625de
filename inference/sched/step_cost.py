"""What a step of the target model costs, learned from the steps the engine runs.

One model, fed once a step (EngineCore), read in two ways: the step budget asks how many
prompt tokens fit in a time bound (tokens_within), the draft planner what a decode step of
T rows costs (seconds, floor, seen, extra).
"""

from __future__ import annotations

import bisect
from collections import deque

# Steps the straight-line fit is made over: enough to span decode-only and prompt steps, few
# enough to follow a machine whose load changes.
COST_WINDOW = 32
# A decode step size not seen for this many decode steps counts as unseen again.
STALE_STEPS = 2000


class StepCost:
    """A step's seconds by its tokens, two ways from the same steps.

    As a straight line (fit, tokens_within): fixed + per_token × tokens, by least squares over
    the last COST_WINDOW steps, prompt steps included. Dividing a step's time by its tokens,
    as the budget once did, charges a small step the whole fixed part (the weights read once
    per step, whatever it holds) per token: the bound then shrank the next step, whose
    estimate was worse still, until prompts went 16 tokens a step (measured: 8 chats' first
    tokens after 2.0 s instead of 0.7 s). Where every step had the same size, or the fit says
    the fixed part is below zero (noise), the line goes through the origin: as high a
    per-token cost as the steps allow, so the bound errs short.

    Per size (seconds): t(T) of the decode steps (no prompt chunks: every row with logits, as
    draft rows have; prompt rows need none and batch better), a moving average per T,
    interpolated between the sizes seen. It is far from a straight line on a CPU (the draft
    planner's module says how far). Past the sizes seen a step is guessed at the largest one's
    cost per token; below them, the smallest one's less the prior's cost per token. A size not
    seen for STALE_STEPS decode steps counts as unseen again: the machine's load changes."""

    def __init__(self, base_s: float = 0.010, per_token_s: float = 0.005, weight: float = 0.2,
                 window: int = COST_WINDOW) -> None:
        self._steps: deque[tuple[int, float]] = deque(maxlen=window)  # (tokens, seconds) for the line
        self.timed_prompt = False  # a step with prompt chunks was timed
        self._prior = (base_s, per_token_s)
        self._weight = weight
        self._seconds: dict[int, float] = {}  # decode step size -> its moving average
        self._sizes: list[int] = []  # the keys of _seconds, sorted: looked up by bisection
        self._seen_at: dict[int, int] = {}
        self._decode_steps = 0

    def observe(self, n_tokens: int, seconds: float, prompt: bool = False) -> None:
        """A step of n_tokens took seconds; prompt: it held prompt chunks."""
        if n_tokens <= 0:
            return
        self._steps.append((n_tokens, seconds))
        if prompt:
            self.timed_prompt = True
            return
        self._decode_steps += 1
        old = self._seconds.get(n_tokens)
        if old is None:
            bisect.insort(self._sizes, n_tokens)
            self._seconds[n_tokens] = seconds
        else:
            self._seconds[n_tokens] = old + self._weight * (seconds - old)
        self._seen_at[n_tokens] = self._decode_steps

    # ----- as a straight line (the step budget) --------------------------------------

    def fit(self) -> tuple[float, float] | None:
        """(fixed seconds, seconds per token); None before any step."""
        if not self._steps:
            return None
        n = len(self._steps)
        mean_t = sum(t for t, _ in self._steps) / n
        mean_s = sum(s for _, s in self._steps) / n
        var = sum((t - mean_t) ** 2 for t, _ in self._steps)
        if var > 0:
            slope = sum((t - mean_t) * (s - mean_s) for t, s in self._steps) / var
            fixed = mean_s - slope * mean_t
            if slope > 0 and fixed >= 0:
                return fixed, slope
        return 0.0, sum(t * s for t, s in self._steps) / sum(t * t for t, _ in self._steps)

    def tokens_within(self, seconds: float) -> int | None:
        """The most tokens a step may hold to take at most `seconds`; None where nothing is
        known yet, or where a step's fixed part alone takes that long."""
        fitted = self.fit()
        if fitted is None:
            return None
        fixed, per_token = fitted
        if fixed >= seconds or per_token <= 0:
            return None
        return int((seconds - fixed) / per_token)

    # ----- per decode step size (the draft planner) ----------------------------------

    def seen(self, n_tokens: int) -> bool:
        at = self._seen_at.get(n_tokens)
        return at is not None and self._decode_steps - at < STALE_STEPS

    def seconds(self, n_tokens: int) -> float:
        known = self._seconds
        if n_tokens in known:
            return known[n_tokens]
        sizes = self._sizes
        base, per_token = self._prior
        if not sizes:
            return base + per_token * (n_tokens - 1)
        at = bisect.bisect_left(sizes, n_tokens)
        if at == len(sizes):  # past the largest size seen: at its cost per token
            largest = sizes[-1]
            return known[largest] * n_tokens / largest
        above = sizes[at]
        if at == 0:
            return max(1e-6, known[above] - (above - n_tokens) * per_token)
        below = sizes[at - 1]
        share = (n_tokens - below) / (above - below)
        return known[below] + share * (known[above] - known[below])

    def floor(self, n_tokens: int) -> float:
        """The least a decode step of n_tokens can cost by what was measured: the seconds of
        the largest size seen at or below it (the prior's one-token step if none was)."""
        at = bisect.bisect_right(self._sizes, n_tokens)
        return self._seconds[self._sizes[at - 1]] if at else self._prior[0]

    def extra(self, n_tokens: int) -> float:
        """What one more token adds to a decode step of n_tokens (never less than nothing)."""
        return max(1e-9, self.seconds(n_tokens + 1) - self.seconds(n_tokens))
