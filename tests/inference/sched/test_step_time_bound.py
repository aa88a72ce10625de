"""Prompt steps bounded by time (LoadSettings.max_step_s): a cancel, or a request raised to
the front, waits for the step in flight, so no step of prompt chunks may take longer than
the bound at the seconds per token the steps took (pure Python)."""

from __future__ import annotations

from inference.sched.step_budget import StepBudget
from tests.support.core_driver import make_driver, prompt


def test_no_bound_until_a_prompt_step_was_timed_then_the_rate_sets_it() -> None:
    budget = StepBudget(max_tokens=512, target_step_s=0.15, max_step_s=0.4)
    assert budget.prefill_tokens(0) == 512
    budget.cost.observe(512, 2.0, prompt=True)  # ~3.9 ms a token
    assert budget.prefill_tokens(0) == 102  # 0.4 s of prompt
    assert budget.prefill_tokens(2) <= 100
    budget.cost.observe(100, 0.05, prompt=True)  # the machine got faster
    assert budget.prefill_tokens(0) > 102


def test_without_a_bound_the_whole_batch_is_one_prompt_step() -> None:
    budget = StepBudget(max_tokens=512, target_step_s=0.15)  # max_step_s None
    budget.cost.observe(512, 20.0, prompt=True)
    assert budget.prefill_tokens(0) == 512


def test_a_long_prompt_is_computed_in_steps_of_at_most_the_bound_on_the_engine_core() -> None:
    """A 600-token prompt at 10 ms a token (fake time): steps of at most 0.4 s, so a cancel
    sent meanwhile waits at most that long, not the 6 s one step of the prompt would take."""
    d = make_driver(n_cells=2048, n_batch=512, step_s=0.0, max_step_s=0.4)
    per_token = 0.010

    def timed(plan) -> None:
        d.clock.now += per_token * plan.num_tokens  # the fake model's time grows with the step

    d.runner.on_execute = timed
    d.add("warm", prompt(9, 100), max_tokens=1)  # its step teaches the rate
    d.run(lambda: any(x.finished for x in d.of("warm")))
    first = len(d.plans)
    d.add("long", prompt(1, 600), max_tokens=4)
    d.run(lambda: any(x.finished for x in d.of("long")))
    steps = [p.num_tokens for p in d.plans[first:] if p.num_prefill_tokens]
    assert sum(steps) == 600 and max(steps) <= 41  # 0.4 s at 10 ms a token
    assert len(steps) >= 15


def _fixed_plus_per_token(d, fixed: float, per_token: float) -> None:
    """The fake model's time: a fixed part per step (the weights read once) and a part per token."""
    def timed(plan) -> None:
        d.clock.now += fixed + per_token * plan.num_tokens

    d.runner.on_execute = timed


def test_a_step_s_fixed_part_is_not_charged_per_token() -> None:
    """At 0.1 s a step plus 2 ms a token, 0.4 s holds 150 tokens. The bound once came from
    seconds over tokens of the steps taken, so small steps looked dear per token and kept
    the next ones small: 8 chats' first tokens came over several steps (2.0 s instead of
    0.7 s measured with `chorus bench --chats 8 --warm`). Fitted, they come in one step."""
    d = make_driver(n_cells=4096, n_batch=512, step_s=0.0, max_step_s=0.4)
    _fixed_plus_per_token(d, fixed=0.1, per_token=0.002)
    d.add("warm", prompt(9, 24), max_tokens=24)  # a small prompt step and decode steps teach the cost
    d.run(lambda: any(x.finished for x in d.of("warm")))
    first = len(d.plans)
    for i in range(6):
        d.add(f"c{i}", prompt(20 + i, 20), max_tokens=2)
    d.run(lambda: all(any(x.finished for x in d.of(f"c{i}")) for i in range(6)))
    prompt_steps = [p for p in d.plans[first:] if p.num_prefill_tokens]
    assert len(prompt_steps) == 1 and prompt_steps[0].num_prefill_tokens == 6 * 20


def test_no_bound_where_a_step_s_fixed_part_alone_is_past_it() -> None:
    """On a machine so loaded that any step takes 1 s, splitting a prompt cannot bring a step
    under 0.4 s: it would only pay the fixed part more often."""
    budget = StepBudget(max_tokens=512, target_step_s=0.15, max_step_s=0.4)
    for tokens in (8, 8, 64, 512):
        budget.cost.observe(tokens, 1.0 + 0.001 * tokens, prompt=True)
    assert budget.prefill_tokens(0) == 512
