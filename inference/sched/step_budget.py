"""How many prompt tokens the next step may carry besides the decode tokens.

Additive-increase / multiplicative-decrease on the prefill share: it grows while
requests queue and shrinks as soon as a step that held decoding sequences took longer
than the target inter-token latency. With nobody decoding there is no latency to
protect, so a step takes the whole batch.

The target stretches with queue pressure: when more requests wait for their first token
than are decoding, holding each decoding one to the target would make all the waiting
ones wait longer (one slow step for 1 reader versus many steps for 7 queued ones).

Whatever the share, a step's prompt tokens are bounded by time too (max_step_s): a cancel,
or a request the user just raised, waits for the step in flight, and a step of a whole batch
of prompt took 5.7 s on a loaded 2-core machine. The bound comes from StepCost, a step's
time as a fixed part plus a part per token; where the fixed part alone is past the bound,
splitting cannot meet it and there is none. On a GPU the bound is far above the batch and
changes nothing.
"""

from __future__ import annotations

from collections import deque

# Steps the cost is fitted to: enough to span decode-only and prompt steps, few enough to
# follow a machine whose load changes.
COST_WINDOW = 32


class StepCost:
    """A step's seconds ≈ fixed + per_token × tokens, by least squares over the last steps.

    Dividing a step's time by its tokens, as this once did, charges a small step the whole
    fixed part (the weights read once per step, whatever it holds) per token: the bound then
    shrank the next step, whose estimate was worse still, until prompts went 16 tokens a step
    (measured: 8 chats' first tokens after 2.0 s instead of 0.7 s). Where every step had the
    same size, or the fit says the fixed part is below zero (noise), the cost goes through
    the origin: as high a per-token cost as the steps allow, so the bound errs short."""

    def __init__(self, window: int = COST_WINDOW) -> None:
        self._steps: deque[tuple[int, float]] = deque(maxlen=window)

    def add(self, tokens: int, seconds: float) -> None:
        if tokens > 0:
            self._steps.append((tokens, seconds))

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


class StepBudget:
    def __init__(self, max_tokens: int, target_step_s: float, min_tokens: int = 16,
                 max_step_s: float | None = None) -> None:
        self.max_tokens = max_tokens
        self.min_tokens = min(min_tokens, max_tokens)
        self.target_step_s = target_step_s
        self.max_step_s = max_step_s
        self._prefill = max(self.min_tokens, max_tokens // 4)
        self.cost = StepCost()
        self._timed_prompt = False  # no bound before a step with prompt chunks was timed

    @property
    def prefill_share(self) -> int:
        return self._prefill

    def prefill_tokens(self, n_decoding: int) -> int:
        room = self.max_tokens - n_decoding
        cap = self.cost.tokens_within(self.max_step_s) if self._timed_prompt and self.max_step_s else None
        if cap is not None:  # no prompt step past max_step_s
            room = min(room, max(self.min_tokens, cap - n_decoding))
        if n_decoding == 0:
            return room
        return max(0, min(self._prefill, room))

    def target_for(self, n_decoding: int, n_queued: int) -> float:
        """The step latency to aim at: the configured target, stretched by queue pressure."""
        return self.target_step_s * max(1.0, n_queued / max(1, n_decoding))

    def observe(self, step_s: float, n_decoding: int, n_prefill: int, n_queued: int) -> None:
        """Feed back one finished step."""
        self.cost.add(n_prefill + n_decoding, step_s)
        self._timed_prompt = self._timed_prompt or n_prefill > 0
        if n_decoding == 0:
            return
        target = self.target_for(n_decoding, n_queued)
        if step_s > target and n_prefill > 0:
            self._prefill = max(self.min_tokens, int(self._prefill * 0.7))
        elif n_queued > 0 and step_s <= target:
            growth = max(self.min_tokens // 2, 4 * min(n_queued, 16))
            self._prefill = min(self.max_tokens, self._prefill + growth)
