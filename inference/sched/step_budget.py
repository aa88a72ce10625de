"""How many prompt tokens the next step may carry besides the decode tokens.

Additive-increase / multiplicative-decrease on the prefill share: it grows while
requests queue and shrinks as soon as a step that held decoding sequences took longer
than the target inter-token latency. With nobody decoding there is no latency to
protect, so a step takes the whole batch.

The target stretches with queue pressure: when more requests wait for their first token
than are decoding, holding each decoding one to the target would make all the waiting
ones wait longer (one slow step for 1 reader versus many steps for 7 queued ones).

Whatever the share, a step's prompt tokens are bounded by time too (max_step_s, from the
seconds per token the steps with prompt chunks took): a cancel, or a request the user just
raised, waits for the step in flight, and a step of a whole batch of prompt took 5.7 s on a
loaded 2-core machine. On a GPU the bound is far above the batch and changes nothing.
"""

from __future__ import annotations


class StepBudget:
    def __init__(self, max_tokens: int, target_step_s: float, min_tokens: int = 16,
                 max_step_s: float | None = None) -> None:
        self.max_tokens = max_tokens
        self.min_tokens = min(min_tokens, max_tokens)
        self.target_step_s = target_step_s
        self.max_step_s = max_step_s
        self._prefill = max(self.min_tokens, max_tokens // 4)
        self._s_per_token: float | None = None  # of steps with prompt chunks, a moving average

    @property
    def prefill_share(self) -> int:
        return self._prefill

    def prefill_tokens(self, n_decoding: int) -> int:
        room = self.max_tokens - n_decoding
        if self._s_per_token is not None and self.max_step_s is not None:  # no prompt step past max_step_s
            room = min(room, max(self.min_tokens, int(self.max_step_s / self._s_per_token) - n_decoding))
        if n_decoding == 0:
            return room
        return max(0, min(self._prefill, room))

    def target_for(self, n_decoding: int, n_queued: int) -> float:
        """The step latency to aim at: the configured target, stretched by queue pressure."""
        return self.target_step_s * max(1.0, n_queued / max(1, n_decoding))

    def observe(self, step_s: float, n_decoding: int, n_prefill: int, n_queued: int) -> None:
        """Feed back one finished step."""
        if n_prefill > 0:
            per_token = step_s / (n_prefill + n_decoding)
            old = self._s_per_token
            self._s_per_token = per_token if old is None else old + 0.3 * (per_token - old)
        if n_decoding == 0:
            return
        target = self.target_for(n_decoding, n_queued)
        if step_s > target and n_prefill > 0:
            self._prefill = max(self.min_tokens, int(self._prefill * 0.7))
        elif n_queued > 0 and step_s <= target:
            growth = max(self.min_tokens // 2, 4 * min(n_queued, 16))
            self._prefill = min(self.max_tokens, self._prefill + growth)
