"""Plain greedy sampling is a numpy argmax over the logits row (sampler_chain.FAST_GREEDY):
on the very same logits it picks llama.cpp's greedy token, with and without
end-of-generation banned (ignore_eos)."""

from __future__ import annotations

import llama_cpp as ll
import pytest

from inference import ChatRequest, SamplingParams
from inference.sampler_chain import SamplerChain

pytestmark = pytest.mark.model

QUESTIONS = ["What is 2+2?", "List three fruits.", "Say hi.", "Explain recursion."]


@pytest.mark.parametrize("ignore_eos", [False, True])
def test_argmax_greedy_gives_llama_cpps_greedy_tokens(shared_engine, monkeypatch, ignore_eos) -> None:
    pairs: list[tuple[int, int]] = []
    fast = SamplerChain._argmax

    def both(self, ctx, row):  # the chain is stateless: sampling it too changes nothing
        pairs.append((fast(self, ctx, row), ll.llama_sampler_sample(self._chain, ctx, row)))
        return pairs[-1][0]

    monkeypatch.setattr(SamplerChain, "_argmax", both)
    handles = [
        shared_engine.submit(ChatRequest(messages=({"role": "user", "content": q},),
                                         sampling=SamplingParams.greedy(40, ignore_eos=ignore_eos)))
        for q in QUESTIONS
    ]
    results = [h.result(120) for h in handles]
    assert all(r.error is None for r in results)
    stopped = 0 if ignore_eos else sum(r.finish_reason.value == "stop" for r in results)  # EOS: not kept
    assert len(pairs) == sum(len(r.token_ids) for r in results) + stopped
    assert [a for a, _ in pairs] == [b for _, b in pairs]
