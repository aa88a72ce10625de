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
of prompt took 5.7 s on a loaded 2-core machine. The bound comes from the engine's StepCost
(step_cost.py), a step's time as a fixed part plus a part per token; where the fixed part
alone is past the bound, splitting cannot meet it and there is none. On a GPU the bound is
far above the batch and changes nothing.
"""

from __future__ import annotations

from inference.sched.step_cost import StepCost


class StepBudget:
    def __init__(self, max_tokens: int, target_step_s: float, min_tokens: int = 16,
                 max_step_s: float | None = None, cost: StepCost | None = None) -> None:
        self.max_tokens = max_tokens
        self.min_tokens = min(min_tokens, max_tokens)
        self.target_step_s = target_step_s
        self.max_step_s = max_step_s
        self._prefill = max(self.min_tokens, max_tokens // 4)
        self.cost = cost or StepCost()  # the engine's, fed by it once a step

    @property
    def prefill_share(self) -> int:
        return self._prefill

    def prefill_tokens(self, n_decoding: int) -> int:
        room = self.max_tokens - n_decoding
        # No bound before a step with prompt chunks was timed.
        cap = self.cost.tokens_within(self.max_step_s) if self.max_step_s and self.cost.timed_prompt else None
        if cap is not None:  # no prompt step past max_step_s
            room = min(room, max(self.min_tokens, cap - n_decoding))
        if n_decoding == 0:
            return room
        return max(0, min(self._prefill, room))

    def target_for(self, n_decoding: int, n_queued: int) -> float:
        """The step latency to aim at: the configured target, stretched by queue pressure."""
        return self.target_step_s * max(1.0, n_queued / max(1, n_decoding))

    def observe(self, step_s: float, n_decoding: int, n_prefill: int, n_queued: int) -> None:
        """Feed back one finished step (its cost is StepCost's, fed by the engine)."""
        if n_decoding == 0:
            return
        target = self.target_for(n_decoding, n_queued)
        if step_s > target and n_prefill > 0:
            self._prefill = max(self.min_tokens, int(self._prefill * 0.7))
        elif n_queued > 0 and step_s <= target:
            growth = max(self.min_tokens // 2, 4 * min(n_queued, 16))
            self._prefill = min(self.max_tokens, self._prefill + growth)
