"""n choices of one prompt (OpenAI's n) share the prompt's KV: computed once, decoded together."""

from __future__ import annotations

import uuid

import pytest

from inference import ChatRequest, SamplingParams
from tests.support.core_driver import make_driver, prompt


def test_identical_prompts_submitted_together_are_prefilled_once() -> None:
    d = make_driver()
    p = prompt(1, 300)
    for i in range(4):
        d.add(f"r{i}", p, max_tokens=8)
    d.run(lambda: not d.core.has_work())
    s = d.core.snapshot()
    # the first computes the prompt; each follower copies it and recomputes only its last
    # token (whose logits it samples from)
    assert s.prompt_tokens_computed == 300 + 3
    assert sorted(d.final(f"r{i}").stats.cached_tokens for i in range(4)) == [0, 299, 299, 299]
    assert s.kv_cells_peak < 2 * 300  # the prompt's cells are shared, not copied


@pytest.mark.model
def test_n_choices_share_the_prompt_with_the_real_model(shared_engine) -> None:
    text = f"Tag {uuid.uuid4().hex}. " + "Write a haiku about the sea and the wind and the stars. " * 6
    chat = ChatRequest(messages=({"role": "user", "content": text},),
                       sampling=SamplingParams(temperature=0.8, max_tokens=8))
    n_prompt = len(shared_engine.prepare(chat).prompt_tokens or ())
    before = shared_engine.metrics(fresh=True)
    handles = [shared_engine.submit(chat) for _ in range(4)]
    results = [h.result(120) for h in handles]
    after = shared_engine.metrics(fresh=True)
    assert n_prompt > 64
    assert after.prompt_tokens_computed - before.prompt_tokens_computed <= n_prompt + 3
    assert sorted(r.stats.cached_tokens for r in results)[1:] == [n_prompt - 1] * 3
