"""Speculative decoding with prompt lookup, without a model: the n-gram drafter, the draft
planner's arithmetic, and EngineCore verifying drafts on the fake runner (the same tokens
as without speculation, the KV exactly what was kept, limits and stops mid-draft)."""

from __future__ import annotations

import pytest

from inference.sched.step_cost import StepCost
from inference.speculative.ngram import POOL_KEY, NgramIndex, NgramPool
from inference.speculative.planner import draft_lengths
from inference.speculative.request_drafts import Acceptance
from tests.support.core_driver import make_driver
from tests.support.fake_runner import EOS

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


def test_the_pool_continues_what_followed_a_run_of_tokens_anywhere_it_was_seen() -> None:
    pool = NgramPool()
    first = list(range(100, 140))  # a request's text, none of it repeating
    pool.add(first, 0, len(first))
    assert len(pool) == len(first) - POOL_KEY
    assert pool.draft(first[:20], 8) == first[20:28]  # the chain walks on from each draft token
    assert pool.draft(first[:30], 64) == first[30:]  # ... to where the text ended
    assert pool.draft([1] * 8 + first[:POOL_KEY - 1], 8) == []  # one token short of a key
    assert pool.draft(first[:20], 0) == []
    second = first[:25] + [7, 8, 9] + first[28:]  # another request wrote 3 tokens otherwise
    pool.add(second, 0, len(second))
    assert pool.draft(first[:25], 4) == [7, 8, 9, *second[28:29]]  # the latest wins


def test_a_request_drafts_from_the_pool_what_another_wrote_and_adds_its_own() -> None:
    pool = NgramPool()
    other = NgramIndex(list(range(300, 360)), pool)
    other.index_all()
    tokens = [5, 6, *range(300, 320)]  # writing what the other wrote, not copying its own
    mine = NgramIndex(tokens, pool)
    assert mine.draft(10) == list(range(320, 330))
    assert NgramIndex(list(tokens)).draft(10) == []  # without the pool: nothing of its own
    tokens.append(999)
    mine.draft(1)  # indexes its tokens up to the last: they join the pool
    assert pool.draft([5, 6, *range(300, 310)], 3) == list(range(310, 313))
    echo = [310, 311, 42, 43, *range(300, 312)]  # its last 2 tokens also began its text
    assert NgramIndex(list(echo)).draft(4) == [42, 43, 300, 301]  # its own lookup: a 2-gram's copy
    assert NgramIndex(list(echo), pool).draft(4) == [312, 313, 314, 315]  # the pool's 12-token copy wins


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


def test_the_step_cost_follows_the_sizes_seen_and_guesses_between_and_beyond() -> None:
    cost = StepCost(base_s=0.010, per_token_s=0.005)
    assert cost.seconds(1) == pytest.approx(0.010) and cost.seconds(3) == pytest.approx(0.020)  # the prior
    for _ in range(30):  # a CPU: one token memory-bound, each more one of compute
        for n, seconds in ((1, 0.014), (2, 0.024), (4, 0.037), (8, 0.057)):
            cost.observe(n, seconds)
    assert cost.seconds(2) == pytest.approx(0.024)
    assert cost.seconds(3) == pytest.approx(0.0305)  # between 2 and 4
    assert cost.extra(1) == pytest.approx(0.010)  # the first draft token is dear
    assert cost.seconds(16) == pytest.approx(2 * 0.057)  # beyond: at the largest size's rate per token
    assert cost.seen(8) and not cost.seen(9)
    cost.observe(1, 0.030)  # a slower moment moves the average a fifth of the way
    assert cost.seconds(1) == pytest.approx(0.014 + 0.2 * 0.016)


def test_drafts_go_where_they_pay_and_stop_where_they_do_not() -> None:
    cheap = StepCost(base_s=0.010, per_token_s=0.0001)  # a GPU: further rows are nearly free
    for n in range(1, 41):
        cheap.observe(n, 0.010 + 0.0001 * n)
    assert draft_lengths([0.9], [16], 1, cheap, room=64) == [16]
    assert draft_lengths([0.9], [16], 1, cheap, room=5) == [5]
    assert draft_lengths([0.9, 0.9], [3, 0], 2, cheap, room=64) == [3, 0]
    cpu = StepCost()
    for n in range(1, 41):  # what this project's CPU measured: 14 ms, then ~7-10 ms a token
        cpu.observe(n, 0.014 + 0.0098 * min(n - 1, 1) + 0.007 * max(n - 2, 0))
    assert draft_lengths([0.6] * 8, [16] * 8, 8, cpu, room=64) == [0] * 8  # 8 chats: nothing pays
    lone = draft_lengths([0.97], [32], 1, cpu, room=64)[0]
    assert 3 <= lone < 32  # a lone chat that copies well: a few tokens, not all on offer
    assert draft_lengths([0.5], [32], 1, cpu, room=64) == [0]  # one that copies badly: none
    mixed = draft_lengths([0.99, 0.3], [16, 16], 2, cheap, room=64)
    assert mixed[0] > mixed[1] >= 0
    unmeasured = StepCost()
    unmeasured.observe(8, 0.057)
    # one probe, of the next size on the ladder (12), by the likeliest tokens
    assert draft_lengths([0.95] * 8, [16] * 8, 8, unmeasured, room=64) == [1] * 4 + [0] * 4
    assert draft_lengths([0.7] * 8, [16] * 8, 8, unmeasured, room=64) == [0] * 8  # not on a poor draft


def test_a_cost_curve_where_the_second_row_never_pays_still_drafts_long_copies() -> None:
    """Gemma 3 270M on this project's CPU (tests' figures from /tmp probes, 2026-12-03): 2 rows
    cost more than twice one, 16 rows under six times one. One more draft token never pays
    for itself at the margin, but 15 likely ones make the step 1.8x as fast."""
    from inference.speculative.planner import DraftPlanner

    gemma = StepCost()
    for _ in range(3):
        for n, ms in ((1, 11.9), (2, 25.6), (3, 33.6), (4, 40.6), (6, 65.0), (8, 60.1), (12, 63.0),
                      (16, 68.0), (24, 98.0), (32, 121.3)):
            gemma.observe(n, ms / 1000)
    assert draft_lengths([0.97], [32], 1, gemma, room=64) == [15]  # a step of 16, not of 2
    assert draft_lengths([0.97], [1], 1, gemma, room=64) == [0]  # one token on offer: 2 rows cost 2.15x one
    assert draft_lengths([0.5], [32], 1, gemma, room=64) == [0]  # a poor copy: none
    planner = DraftPlanner(32, gemma)
    assert planner.worth_drafting(0.97, 1, 1)
    planner._asked = 0  # a step that only scores the offers is not a yes
    assert not planner.worth_drafting(0.5, 1, 1)


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
    assert d.core.proposer._requests == {}  # their drafting state left with them (their text is in the pool)


def test_a_step_whose_decoding_requests_were_all_preempted_drafts_nothing_and_runs() -> None:
    """The tab the user looks at takes the only sequence from a reply decoding in the
    background: the step then holds no decode token, and the propose stage has nothing to
    draft for (it once raised ValueError out of the step: max() of no rates)."""
    from inference.params import PRIORITY_VISIBLE_TAB
    from tests.support.core_driver import prompt

    d = make_driver(n_cells=1024, n_seqs=1, n_batch=64, next_token=copier, speculative="lookup")
    d.add("background", list(PROMPT), max_tokens=40)
    d.run(lambda: any(x.token_ids for x in d.of("background")))
    d.add("tab", prompt(3, 20), max_tokens=4, priority=PRIORITY_VISIBLE_TAB)
    plan = d.step()
    assert [c.request.request_id for c in plan.chunks] == ["tab"] and plan.n_draft == 0
    d.run(lambda: all(any(x.finished for x in d.of(name)) for name in ("tab", "background")))
    assert d.final("tab").finish_reason.value == d.final("background").finish_reason.value == "length"
    _, expected = generate("off", max_tokens=40)
    assert [t for x in d.of("background") for t in x.token_ids] == expected


def writer(context: list[int]) -> int:
    """A "model" whose reply never repeats itself or its prompt (a token from the last two):
    its own prompt lookup finds nothing to copy."""
    return 7000 + (context[-1] * 31 + context[-2] * 17) % 5000


def test_a_reply_asked_again_drafts_from_what_the_first_wrote_with_the_same_tokens() -> None:
    """Regenerate, greedy: the second reply writes the first one's text again; the engine's
    pool drafts it (the request's own lookup finds nothing), in far fewer steps."""
    prompt = [11 * j + 3 for j in range(40)]
    alone, expected = generate("off", max_tokens=60, next_token=writer, prompt=prompt)
    d = make_driver(n_cells=1024, n_batch=64, next_token=writer, speculative="lookup")
    d.add("first", list(prompt), max_tokens=60)
    d.run(lambda: any(x.finished for x in d.of("first")))
    steps_first = len(d.plans)
    d.add("again", list(prompt), max_tokens=60)
    d.run(lambda: any(x.finished for x in d.of("again")))
    for name in ("first", "again"):
        assert [t for x in d.of(name) for t in x.token_ids] == expected
    assert len(d.plans) - steps_first < steps_first / 3
    # From its first decode step: a pool draft's chance starts at the pool's rate (0.9), not
    # at a new request's prior (0.6, which waited for four scored guesses to pay).
    again = d.plans[steps_first:]
    assert next(i for i, plan in enumerate(again) if plan.n_draft) <= 2
    assert d.core.proposer.pool_acceptance.drafted > 0  # the engine-wide record of pool drafts


def test_an_unverified_draft_is_scored_against_what_the_model_wrote() -> None:
    """Drafts that do not pay get no rows, so their acceptance cannot be measured by
    verifying: the guess is compared with the token the model then wrote, for free."""
    from inference.params import SamplingParams
    from inference.request import Request
    from inference.speculative.request_drafts import RequestDrafts

    req = Request("r", [1, 2, 3, 1, 2], SamplingParams.greedy(10))
    drafts = RequestDrafts(req)
    assert drafts.draft(4) == [3, 1, 2, 3]
    drafts.shadow = (len(req.tokens), 3)
    before = drafts.acceptance.rate
    req.append_token(3)  # the model wrote the guess
    drafts.draft(4)
    assert drafts.acceptance.rate > before and drafts.shadow is None
    drafts.shadow = (len(req.tokens), 1)
    req.append_token(9)  # it did not
    drafts.draft(4)
    assert drafts.acceptance.rate < before


def test_a_request_whose_drafts_do_not_pay_yet_learns_when_they_would() -> None:
    """On a CPU-like cost a copy's drafts start below the bar; the free scoring raises its
    rate as the copy goes on, and drafts start."""
    from inference.speculative.planner import DraftPlanner

    d = make_driver(n_cells=1024, n_batch=64, next_token=lambda c: c[len(c) - PERIOD], speculative="lookup")
    cost = d.core.cost  # the engine's, which it goes on learning
    for n in range(1, 41):
        cost.observe(n, 0.014 + 0.0098 * min(n - 1, 1) + 0.007 * max(n - 2, 0))
    d.core.proposer.planner = DraftPlanner(16, cost)
    d.add("r", list(PROMPT), max_tokens=80)
    d.run(lambda: any(x.finished for x in d.of("r")))
    first = next(i for i, plan in enumerate(d.plans) if any(c.draft for c in plan.chunks))
    assert first > 1  # not at once: the prior is below the bar
    assert len(d.plans) < 60  # but soon, and then for most of the reply


def test_the_guard_pauses_drafting_where_it_made_steps_slower_and_tries_again_later() -> None:
    from inference.speculative.planner import RateGuard

    guard = RateGuard()
    for _ in range(RateGuard.WINDOW):
        guard.record(8, False, tokens=8, seconds=0.057)  # 140 tok/s plain
        guard.record(8, True, tokens=10, seconds=0.090)  # 111 tok/s with drafts
        guard.record(1, False, tokens=1, seconds=0.014)
        guard.record(1, True, tokens=3, seconds=0.030)  # 100 tok/s against 71: drafts pay
    assert not guard.allows(8) and guard.allows(1)
    for _ in range(RateGuard.HOLD_STEPS):
        guard.record(1, True, tokens=3, seconds=0.030)
    assert guard.allows(8)  # tried again after the pause


def _lone_chat(guard, steps: int, plain_s: float, drafted: tuple[int, float]) -> list[bool]:
    """A lone chat's steps honouring the guard: a plain step makes 1 token in plain_s, a
    drafted one drafted[0] tokens in drafted[1]; which steps drafted."""
    ran = []
    for _ in range(steps):
        draft = guard.allows(1)
        guard.record(1, draft, *(drafted if draft else (1, plain_s)))
        ran.append(draft)
    return ran


def test_the_guard_judges_drafts_against_plain_steps_run_under_the_same_load() -> None:
    """The other programs' load doubles as a copy starts: its drafts (50 tok/s) beat the
    plain step as it is now (42 tok/s) though not as it was (83): drafting goes on, with a
    few control steps. The guard once compared with the plain steps from before the copy
    and paused it for the rest of the reply (lookup under two `yes`: 1.04-1.60 tokens a step
    where a quiet machine made 1.7-1.85)."""
    from inference.speculative.planner import RateGuard

    guard = RateGuard()
    for _ in range(RateGuard.PLAIN_WINDOW):
        guard.record(1, False, tokens=1, seconds=0.012)  # quiet
    ran = _lone_chat(guard, 300, 0.024, (3, 0.060))  # busy from here on
    assert not any(not (a or b) for a, b in zip(ran, ran[1:]))  # single controls, never a pause
    assert sum(ran) >= 300 * RateGuard.WINDOW / (RateGuard.WINDOW + RateGuard.MIN_CONTROLS) - 2


def test_the_guard_pauses_drafts_that_stopped_paying_when_the_load_fell() -> None:
    """The load falls as a copy starts: its drafts (67 tok/s) beat the plain steps of the
    busy minute before (42) but not the plain step now (83). Control steps find it out and
    drafting pauses; the guard once kept the busy minute's rate and drafted on at a loss."""
    from inference.speculative.planner import RateGuard

    guard = RateGuard()
    for _ in range(RateGuard.PLAIN_WINDOW):
        guard.record(1, False, tokens=1, seconds=0.024)  # busy
    ran = _lone_chat(guard, 600, 0.012, (3, 0.045))  # quiet from here on
    first_pause = RateGuard.RECENT + RateGuard.WINDOW  # soon after the old rate aged
    assert not any(ran[first_pause:first_pause + RateGuard.FIRST_HOLD - RateGuard.WINDOW])
    # Tried again after each pause, each pause twice as long as the one before.
    pattern = "".join("D" if drafted else "." for drafted in ran[first_pause:])
    pauses = [len(run) for run in pattern.split("D") if len(run) > RateGuard.WINDOW]
    assert len(pauses) >= 3 and all(b > 1.8 * a for a, b in zip(pauses, pauses[1:-1]))
    assert sum(ran[first_pause:]) < 0.15 * len(ran[first_pause:])


def test_a_wrong_pause_costs_a_short_hold_only() -> None:
    """A verdict made on noise (drafts that lost one window under a busy machine's stalls)
    pauses FIRST_HOLD steps, not the rest of the reply; drafts that pay again clear it."""
    from inference.speculative.planner import RateGuard

    guard = RateGuard()
    for _ in range(RateGuard.PLAIN_WINDOW):
        guard.record(1, False, tokens=1, seconds=0.012)
    stalled = _lone_chat(guard, 20, 0.012, (3, 0.120))  # a window of stalled drafted steps
    assert not stalled[-1]
    ran = _lone_chat(guard, RateGuard.FIRST_HOLD + 40, 0.012, (3, 0.020))  # then drafts pay (150 tok/s)
    assert not any(ran[:RateGuard.FIRST_HOLD - 20]) and all(ran[-20:])


def test_a_copy_far_ahead_pays_little_for_the_guard_s_controls() -> None:
    from inference.speculative.planner import RateGuard

    guard = RateGuard()
    ran = _lone_chat(guard, 480, 0.012, (6, 0.036))  # drafts at twice the plain rate
    assert len(ran) - sum(ran) <= 480 // RateGuard.RECENT + RateGuard.MIN_CONTROLS


def test_the_guard_judges_the_latest_drafted_steps_and_not_the_probes() -> None:
    """A copy whose first drafts were poor (probes of small sizes, early misses) and that
    pays from then on keeps drafting; the planner's probe steps are left out of the count."""
    from inference.speculative.planner import DraftPlanner, RateGuard

    guard = RateGuard()
    for _ in range(RateGuard.WINDOW):
        guard.record(1, False, tokens=1, seconds=0.012)  # 83 tok/s plain
    for _ in range(RateGuard.WINDOW // 2):
        guard.record(1, True, tokens=1, seconds=0.026)  # early drafts: 38 tok/s
    for _ in range(RateGuard.WINDOW):
        guard.record(1, True, tokens=14, seconds=0.068)  # then a copy: 206 tok/s
        assert guard.allows(1)
    planner = DraftPlanner(32, StepCost())
    for _ in range(RateGuard.WINDOW):
        planner.guard.record(1, False, tokens=1, seconds=0.012)
    for _ in range(2 * RateGuard.WINDOW):  # every step a probe that lost: its drafts kept, but slow
        planner.worth_drafting(0.95, 1, 1)
        drafted = sum(planner.lengths([0.95], [32], 1, room=64))
        assert drafted and planner._probing
        planner.observe(1, drafted, 1 + drafted, 0.500)
        planner.cost = StepCost()  # each step's size still unmeasured: a probe again
    assert planner.guard.allows(1)


def test_a_drafting_request_among_others_that_decode_is_weighed_against_the_whole_step() -> None:
    """One of 8 decoding requests has a draft on offer: its few extra tokens are weighed
    against the 8 the step makes anyway, not against its own one (which made every lone
    offer in a busy batch look like a lone chat's)."""
    smollm2 = StepCost()
    for _ in range(3):
        for n, ms in ((1, 9.9), (2, 18.3), (4, 27.5), (8, 49.0), (12, 62.7), (16, 84.1), (24, 108.6)):
            smollm2.observe(n, ms / 1000)
    assert draft_lengths([0.9], [16], 8, smollm2, room=64, n_decoding=8) == [0]
    assert sum(draft_lengths([0.9], [16], 8, smollm2, room=64)) > 0  # what it was weighed as before


def test_drafts_stop_where_the_rates_promised_more_than_was_kept() -> None:
    """8 requests whose rates say 0.9 each, where drafting together keeps a third of what
    they promise: the planner's trust in the rates falls and the drafts stop within a few
    steps; a lone copy that keeps what it promises keeps drafting."""
    from inference.speculative.planner import DraftPlanner

    cost = StepCost()
    for n in range(1, 41):  # a row costs a twelfth of a one-row step: drafts look good
        cost.observe(n, 0.030 + 0.0025 * (n - 1))
    planner = DraftPlanner(8, cost)
    steps_drafted = 0
    for _ in range(20):
        lengths = planner.lengths([0.9] * 8, [8] * 8, 8, room=64)
        drafted = sum(lengths)
        if drafted == 0:
            break
        steps_drafted += 1
        expected = sum(0.9 ** (j + 1) for n in lengths for j in range(n))
        planner.observe(8, drafted, 8 + round(expected / 3), 0.030 + 0.0025 * (7 + drafted))
    assert 1 <= steps_drafted <= 8 and planner.trust(8) < 0.7
    assert planner.lengths([0.9] * 8, [8] * 8, 8, room=64) == [0] * 8
    assert planner.trust(1) == 1.0  # a lone chat's record is its own
    for _ in range(20):
        lengths = planner.lengths([0.95], [8], 1, room=64)
        assert lengths == [8]
        planner.observe(1, 8, 9, 0.050)  # everything kept
    assert planner.trust(1) == 1.0


def test_one_missed_draft_token_does_not_stop_a_lone_chat_drafting_and_distrust_wears_off() -> None:
    """A lone chat's first draft (one token, at the prior's cost) missed: that is one coin's
    toss, not evidence enough to stop drafting (Gemma 3's copy drafted once and never again:
    1.17x where it had made 2.1x). And trust that fell comes back as steps go by."""
    from inference.speculative.planner import DraftPlanner

    planner = DraftPlanner(32)
    planner.worth_drafting(0.6, 1, 1)
    planner._expected = 0.6  # the plan of one draft token at the prior's rate
    planner.observe(1, 1, 1, 0.026)  # missed
    assert planner.trust(1) > 0.9
    planner._trust[1] = 0.1
    for _ in range(100):
        planner.worth_drafting(0.9, 1, 1)
    assert planner.trust(1) > 0.8


def test_in_a_batch_kept_drafts_count_for_the_share_of_requests_drafting() -> None:
    """8 chats decoding together end with the last of them: one chat's drafts shorten the
    run only as far as the others draft too. On this CPU's costs one copying chat among 8
    gets none (a lone one would), all 8 copying do; on a GPU's nearly free rows the one
    chat drafts anyway, at no one's cost."""
    from inference.speculative.planner import kept_token_value

    assert kept_token_value([0.9], 1) == 1.0
    assert kept_token_value([0.9, 0.6], 8) == pytest.approx(1.5 / 8)
    assert kept_token_value([0.95] * 8, 8) == pytest.approx(0.95)
    cpu = StepCost()
    for _ in range(3):
        for n, ms in ((1, 9.9), (2, 18.3), (4, 27.5), (8, 49.0), (12, 62.7), (16, 84.1), (24, 108.6)):
            cpu.observe(n, ms / 1000)
    assert draft_lengths([0.99], [16], 8, cpu, room=64, n_decoding=8) == [0]
    assert sum(draft_lengths([0.99] * 8, [16] * 8, 8, cpu, room=64)) > 8
    gpu = StepCost()
    for n in range(1, 41):
        gpu.observe(n, 0.010 + 0.00002 * n)
    assert 0 < sum(draft_lengths([0.5], [16], 8, gpu, room=64, n_decoding=8)) <= 10
