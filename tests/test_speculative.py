"""Speculative decoding with prompt lookup, without a model: the n-gram drafter, the draft
planner's arithmetic, and EngineCore verifying drafts on the fake runner (the same tokens
as without speculation, the KV exactly what was kept, limits and stops mid-draft)."""

from __future__ import annotations

import pytest

from inference.spec.ngram import NgramIndex, accepted_prefix
from inference.spec.policy import Acceptance, StepCost, draft_lengths
from tests.core_driver import make_driver
from tests.fake_runner import EOS

# ----- the drafter ---------------------------------------------------------------------


def test_the_draft_is_what_followed_the_latest_earlier_occurrence_of_the_last_tokens() -> None:
    tokens = [1, 2, 3, 4, 5, 9, 1, 2, 3, 7, 8, 0, 1, 2, 3]
    index = NgramIndex(tokens)
    # "1 2 3" occurred twice before the end; the latest (followed by 7 8) wins.
    assert index.draft(3) == [7, 8, 0]
    tokens.append(7)  # the request grows: "2 3 7" occurred once, at 7 8 0
    assert index.draft(2) == [8, 0]


def test_a_longer_match_is_preferred_and_no_match_drafts_nothing() -> None:
    # "5 6" last occurred before 1, but "4 5 6" only before 2: the longer witness wins.
    tokens = [4, 5, 6, 2, 2, 2, 5, 6, 1, 3, 4, 5, 6]
    assert NgramIndex(tokens).draft(1) == [2]
    assert NgramIndex([1, 2, 3, 4]).draft(8) == []
    assert NgramIndex([1, 2]).draft(8) == []
    assert NgramIndex([5, 6, 7, 5, 6]).draft(0) == []


def test_a_copy_that_reaches_the_end_goes_on_as_a_loop() -> None:
    tokens = [1, 2, 3, 1, 2, 3, 1, 2, 3]  # a loop: the latest "1 2 3" ends 3 before the end
    assert NgramIndex(tokens).draft(7) == [1, 2, 3, 1, 2, 3, 1]
    tokens = [9, 5, 6, 7, 8, 5, 6, 7]  # "5 6 7" then 8 once: the copy goes 8, 5, 6, 7, 8 ...
    assert NgramIndex(tokens).draft(6) == [8, 5, 6, 7, 8, 5]


def test_accepted_prefix_counts_the_matching_head() -> None:
    assert accepted_prefix([5, 6, 7], [5, 6, 9, 7]) == 2
    assert accepted_prefix([5, 6], [5, 6, 1]) == 2
    assert accepted_prefix([5], [4, 5]) == 0


# ----- the planner ---------------------------------------------------------------------


def test_acceptance_follows_runs_of_kept_tokens() -> None:
    record = Acceptance()
    for _ in range(20):
        record.observe(drafted=8, accepted=8)
    assert record.rate > 0.95 and (record.drafted, record.accepted) == (160, 160)
    for _ in range(20):
        record.observe(drafted=8, accepted=0)
    assert record.rate < 0.05
    record.observe(drafted=0, accepted=0)  # nothing drafted: nothing learned
    assert record.drafted == 320


def test_the_step_cost_is_fitted_from_steps_of_different_sizes() -> None:
    cost = StepCost()
    for n in [1, 4, 9, 16, 2, 30, 8] * 20:
        cost.observe(n, 0.020 + 0.003 * n)
    assert cost.base_s == pytest.approx(0.020, rel=0.02)
    assert cost.per_token_s == pytest.approx(0.003, rel=0.02)
    assert cost.seconds(10) == pytest.approx(0.050, rel=0.02)


def test_drafts_go_where_they_pay_and_stop_where_they_do_not() -> None:
    cheap = StepCost(base_s=0.010, per_token_s=0.0001)  # a lone chat on a memory-bound decode
    assert draft_lengths([0.9], [16], 1, cheap, room=64) == [16]
    assert draft_lengths([0.9], [16], 1, cheap, room=5) == [5]
    assert draft_lengths([0.9, 0.9], [3, 0], 2, cheap, room=64) == [3, 0]
    costly = StepCost(base_s=0.010, per_token_s=0.005)  # every row costs half a step
    assert draft_lengths([0.5] * 8, [16] * 8, 8, costly, room=64) == [0] * 8
    mixed = draft_lengths([0.95, 0.3], [16, 16], 2, StepCost(base_s=0.010, per_token_s=0.0004), room=64)
    assert mixed[0] > mixed[1] >= 0 and mixed[0] >= 4


# ----- verifying on the engine core ----------------------------------------------------

PERIOD = 23


def copier(context: list[int]) -> int:
    """A "model" that repeats its context with period PERIOD, except at every 10th position,
    where it writes a token of its own: drafts from the lookup are right for a while, then
    rejected."""
    n = len(context)
    return 5000 + n if n % 10 == 0 else context[n - PERIOD]


PROMPT = [100 + i for i in range(PERIOD)] * 2


def generate(speculative: str, max_tokens: int = 60, next_token=copier, prompt=PROMPT):
    d = make_driver(n_cells=1024, n_batch=64, next_token=next_token, speculative=speculative)
    d.add("r", list(prompt), max_tokens=max_tokens)
    d.run(lambda: any(x.finished for x in d.of("r")))
    tokens = [t for x in d.of("r") for t in x.token_ids]
    return d, tokens


def test_lookup_gives_the_same_tokens_in_fewer_steps_with_the_kv_exactly_what_was_kept() -> None:
    plain, expected = generate("off")
    spec, tokens = generate("lookup")
    assert tokens == expected and len(tokens) == 60
    assert len(spec.plans) < len(plain.plans) / 2  # most steps kept several tokens
    drafted = [c for plan in spec.plans for c in plan.chunks if c.draft]
    assert drafted and any(len(c.draft) > 1 for c in drafted)
    snap = spec.core.snapshot()
    assert 0 < snap.draft_tokens_accepted < snap.draft_tokens  # some were rejected
    # (the driver checks after every step that the manager, the reference KV and each
    # request agree: rejected drafts left no cell behind)
    assert ("rm",) in {call[:1] for call in spec.runner.kv.calls}
    assert spec.final("r").finish_reason == plain.final("r").finish_reason


def test_a_token_limit_reached_mid_draft_ends_the_reply_at_the_limit() -> None:
    for limit in (1, 2, 7, 31):
        _, expected = generate("off", max_tokens=limit)
        spec, tokens = generate("lookup", max_tokens=limit)
        assert tokens == expected and len(tokens) == limit
        assert spec.final("r").finish_reason.value == "length"


def test_an_end_of_generation_token_kept_from_a_draft_ends_the_reply_there() -> None:
    prompt = [100 + i for i in range(PERIOD - 1)] + [EOS]  # the copy reaches EOS after one period
    prompt = prompt * 2

    def copy_all(context: list[int]) -> int:
        return context[len(context) - PERIOD]

    _, expected = generate("off", next_token=copy_all, prompt=prompt)
    spec, tokens = generate("lookup", next_token=copy_all, prompt=prompt)
    assert tokens == expected and EOS not in tokens
    assert spec.final("r").finish_reason.value == "stop"


def test_several_requests_draft_in_one_step_each_from_its_own_tokens() -> None:
    d = make_driver(n_cells=2048, n_batch=128, next_token=copier, speculative="lookup")
    prompts = {f"r{i}": [200 * (i + 1) + j for j in range(PERIOD)] * 2 for i in range(3)}
    for name, tokens in prompts.items():
        d.add(name, tokens, max_tokens=40)
    d.run(lambda: all(any(x.finished for x in d.of(n)) for n in prompts))
    multi = [plan for plan in d.plans if sum(1 for c in plan.chunks if c.draft) >= 2]
    assert multi, "no step verified two requests' drafts together"
    for name, tokens in prompts.items():
        alone, expected = generate("off", max_tokens=40, prompt=tokens)
        assert [t for x in d.of(name) for t in x.token_ids] == expected
