"""Speculation with a draft model, without a model: the proposer asks the draft model for
the decoding requests' drafts (tests/support/fake_draft_model.py stands in for the llama.cpp
one, on the fake clock), the engine core verifies them as it does lookup's, and the planner
weighs what writing a draft costs."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from inference import LoadSettings
from inference.sched.step_cost import StepCost
from inference.speculative.planner import DraftPlanner
from tests.inference.speculative.test_speculative import PROMPT, copier, generate, writer
from tests.support.core_driver import make_driver


def run(speculative: str, max_tokens: int = 60, next_token=writer, prompt=PROMPT, **options):
    d = make_driver(n_cells=1024, n_batch=64, next_token=next_token, speculative=speculative, **options)
    d.add("r", list(prompt), max_tokens=max_tokens)
    d.run(lambda: any(x.finished for x in d.of("r")), max_steps=400)
    return d, [t for x in d.of("r") for t in x.token_ids]


def test_a_draft_model_that_writes_what_the_target_would_makes_the_same_tokens_in_fewer_steps() -> None:
    """writer's text never repeats: lookup has nothing to draft, the draft model does."""
    plain, expected = run("off")
    lookup, _ = run("lookup")
    spec, tokens = run("draft")
    assert tokens == expected and len(tokens) == 60
    assert len(spec.plans) < len(plain.plans) / 2
    assert lookup.core.snapshot().draft_tokens == 0
    snap = spec.core.snapshot()
    assert snap.draft_tokens >= 30 and snap.draft_tokens_accepted == snap.draft_tokens
    want = spec.runner.draft_model.wants[0]
    assert want.owner == "r" and want.tokens[: len(PROMPT)] == PROMPT and want.limit >= 1


def test_wrong_draft_tokens_are_rejected_and_the_kv_keeps_only_what_was_kept() -> None:
    _, expected = run("off", next_token=copier)
    spec, tokens = run("draft", next_token=copier, draft_wrong_every=3)
    assert tokens == expected
    snap = spec.core.snapshot()
    assert 0 < snap.draft_tokens_accepted < snap.draft_tokens
    # (the driver checks after each step that the KV holds each request's kept tokens only)


def test_a_draft_model_as_dear_as_the_target_is_asked_only_to_score_now_and_then() -> None:
    """Each draft token costs a whole target step (as timed at load): no draft could pay
    even if every one were kept, so the draft model is never asked (nor computes the
    prompt); the text and the time are those without it."""
    plain, expected = run("off", max_tokens=80)
    spec, tokens = run("draft", max_tokens=80, draft_step_s=1.0)
    assert tokens == expected
    assert spec.runner.draft_model.wants == []
    assert spec.clock.now == plain.clock.now


def test_a_draft_model_that_is_cheap_but_wrong_is_asked_only_to_score_now_and_then() -> None:
    """Every draft token wrong: the rate falls, drafts stop paying, and the draft model is
    asked for a one-token scoring draft every few steps only."""
    spec, tokens = run("draft", max_tokens=120, draft_step_s=0.05, draft_wrong_every=1)
    _, expected = run("off", max_tokens=120)
    assert tokens == expected
    wants = spec.runner.draft_model.wants
    late = wants[len(wants) // 2:]
    assert len(wants) < 60 and all(w.limit == 1 for w in late)


def test_several_requests_are_drafted_for_in_one_call_each_with_its_own_tokens() -> None:
    d = make_driver(n_cells=2048, n_batch=128, next_token=writer, speculative="draft")
    prompts = {f"r{i}": [300 * (i + 1) + j for j in range(30)] for i in range(3)}
    for name, tokens in prompts.items():
        d.add(name, tokens, max_tokens=30)
    d.run(lambda: all(any(x.finished for x in d.of(n)) for n in prompts))
    wants = d.runner.draft_model.wants
    assert {w.owner for w in wants} == set(prompts)
    assert len({w.seq for w in wants}) == 3
    for name, tokens in prompts.items():
        _, expected = generate("off", max_tokens=30, next_token=writer, prompt=tokens)
        assert [t for x in d.of(name) for t in x.token_ids] == expected


def test_generation_limit_weighs_the_draft_models_time() -> None:
    cost = StepCost()
    for n, seconds in ((1, 0.010), (2, 0.012), (4, 0.014), (8, 0.020), (16, 0.035)):
        for _ in range(5):
            cost.observe(n, seconds)
    planner = DraftPlanner(16, cost=cost, model=SimpleNamespace(step_s=0.0))  # type: ignore[arg-type]
    planner.draft_step_s = 0.001  # a draft model 10x cheaper than its target
    planner._draft_timed = True
    cheap = planner.generation_limit(0.9, 1, 1)
    assert cheap >= 4
    planner.draft_step_s = 0.010  # as dear as the target
    assert planner.generation_limit(0.9, 1, 1) < cheap
    assert planner.generation_limit(0.3, 1, 1) == 0
    planner = DraftPlanner(16, cost=cost, model=SimpleNamespace(step_s=0.0))  # type: ignore[arg-type]
    planner.observe_drafting(4, 0.004)  # the first timing replaces the prior ...
    assert planner.draft_step_s == pytest.approx(0.001)
    planner.observe_drafting(2, 0.022)  # ... then a moving average of seconds a draft step
    assert 0.001 < planner.draft_step_s < 0.011


def test_the_draft_mode_needs_a_draft_model_file() -> None:
    with pytest.raises(ValueError, match="draft model"):
        LoadSettings(model_path="m.gguf", speculative="draft").validate()  # type: ignore[arg-type]
    LoadSettings(model_path="m.gguf", speculative="draft", draft_model="d.gguf").validate()  # type: ignore[arg-type]
