"""Logprobs (log-softmax of the raw logits) and grammars (llama.cpp's GBNF sampler)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from inference import FinishReason, SamplingParams
from inference.errors import RequestError
from inference.sample.grammars import JSON_OBJECT
from inference.sample.logprobs import log_softmax, sampled_logprobs
from tests.support.chat_requests import user_chat


@pytest.mark.parametrize("bad", [
    SamplingParams(logprobs=-1), SamplingParams(logprobs=21), SamplingParams(logprobs="3"),  # type: ignore[arg-type]
    SamplingParams(grammar=""), SamplingParams(grammar=JSON_OBJECT, ignore_eos=True),
])
def test_logprobs_and_grammar_ranges_are_validated(bad: SamplingParams) -> None:
    with pytest.raises(RequestError):
        bad.validate()
    SamplingParams(logprobs=0).validate()
    SamplingParams(logprobs=20, grammar=JSON_OBJECT).validate()


def test_log_softmax_and_top_list() -> None:
    logits = np.array([1.0, 3.0, 2.0, 3.0, -50.0], dtype=np.float32)
    lp = log_softmax(logits)
    assert math.isclose(float(np.exp(lp).sum()), 1.0, rel_tol=1e-9)
    s = sampled_logprobs(logits, 2, k=3)
    assert [t for t, _ in s.top] == [1, 3, 2]  # sorted, ties by id
    assert math.isclose(s.logprob, float(lp[2]))
    assert sampled_logprobs(logits, 0, k=0).top == ()


@pytest.mark.model
def test_greedy_logprobs_pick_the_top_token(shared_engine) -> None:
    sampling = SamplingParams.greedy(24, logprobs=5)
    handle = shared_engine.submit(user_chat("Name three colors.", sampling))
    deltas = list(handle)
    lps = [lp for d in deltas for lp in d.logprobs]
    tokens = [t for d in deltas for t in d.token_ids]
    assert len(lps) == len(tokens) > 0
    for lp in lps:
        assert len(lp.top) == 5
        assert [t.logprob for t in lp.top] == sorted((t.logprob for t in lp.top), reverse=True)
        assert lp.logprob == pytest.approx(lp.top[0].logprob) and lp.bytes == lp.top[0].bytes
        assert lp.logprob <= 0 and sum(math.exp(t.logprob) for t in lp.top) <= 1 + 1e-6
    # asking for logprobs changes nothing of the output
    plain = shared_engine.submit(user_chat("Name three colors.", SamplingParams.greedy(24))).result(60)
    assert plain.token_ids == tuple(tokens) and all(
        not d.logprobs for d in shared_engine.submit(user_chat("Hi", SamplingParams.greedy(4))))


@pytest.mark.model
def test_json_object_grammar_output_parses(shared_engine) -> None:
    prompts = ["Describe a cat as JSON.", "Give me a user profile.", "List two cities with populations.",
               "What is the weather?"]
    handles = [shared_engine.submit(user_chat(p, SamplingParams(temperature=0.8, seed=i, max_tokens=400,
                                                                grammar=JSON_OBJECT)))
               for i, p in enumerate(prompts)]
    for handle in handles:
        result = handle.result(180)
        assert result.finish_reason is FinishReason.STOP, result
        assert isinstance(json.loads(result.text), dict)


@pytest.mark.model
def test_a_grammar_that_does_not_parse_ends_its_request_alone(shared_engine) -> None:
    bad = shared_engine.submit(user_chat("Hi", SamplingParams(grammar="root ::= undefined_rule"))).result(60)
    assert bad.finish_reason is FinishReason.ERROR and "grammar does not parse" in (bad.error or "")
    good = shared_engine.submit(user_chat("Hi", SamplingParams.greedy(4, grammar='root ::= "yes" | "no"'))).result(60)
    assert good.finish_reason is FinishReason.STOP and good.text in ("yes", "no")
