"""Logprobs (log-softmax of the raw logits) and grammars (llguidance's masks on the batch path)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from inference import FinishReason, SamplingParams, gbnf_grammar, schema_grammar
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
    # Asking for logprobs changes nothing of the output. The first token only: the plain call
    # finds the prompt cached from the first, and a greedy answer on a reused prefix may tip
    # at a later word (it did in a clean-clone run after other tests changed the cache).
    plain = shared_engine.submit(user_chat("Name three colors.", SamplingParams.greedy(24))).result(60)
    assert plain.token_ids[:1] == tuple(tokens[:1]) and all(
        not d.logprobs for d in shared_engine.submit(user_chat("Hi", SamplingParams.greedy(4))))


@pytest.mark.model
def test_json_object_grammar_output_parses(make_engine) -> None:
    # A fresh engine: after tests/inference/core on the shared one, seeded and greedy texts here
    # came out other than alone (reproduce: pytest -p no:randomly -m model tests/inference/core
    # tests/inference/sample/test_engine_logprobs_grammar.py, on main before and after stop 42).
    shared_engine = make_engine(n_ctx=4096, n_seq_max=8, reproducible=True)
    prompts = ["Describe a cat as JSON.", "Give me a user profile.", "List two cities with populations.",
               "What is the weather?"]
    handles = [shared_engine.submit(user_chat(p, SamplingParams(temperature=0.5, seed=i, max_tokens=800,
                                                                grammar=JSON_OBJECT)))
               for i, p in enumerate(prompts)]
    for handle in handles:
        result = handle.result(180)
        assert result.finish_reason is FinishReason.STOP, result
        assert isinstance(json.loads(result.text), dict)


@pytest.mark.model
def test_a_grammar_that_does_not_parse_ends_its_request_alone(shared_engine) -> None:
    bad = shared_engine.submit(user_chat("Hi", SamplingParams(grammar="start: undefined_rule"))).result(60)
    assert bad.finish_reason is FinishReason.ERROR and "grammar cannot be enforced" in (bad.error or "")
    yes_no = gbnf_grammar('root ::= "yes" | "no"')
    good = shared_engine.submit(user_chat("Hi", SamplingParams.greedy(4, grammar=yes_no))).result(60)
    assert good.finish_reason is FinishReason.STOP and good.text in ("yes", "no")


@pytest.mark.model
def test_a_prepared_grammar_is_compiled_off_the_engine_thread_and_once(shared_engine) -> None:
    """Engine.prepare compiles it on the calling thread (a 100,000-value enum once held the
    engine for two minutes, compiled on its thread); the engine thread copies the cached one."""
    schema = {"type": "object", "properties": {"n": {"enum": [f"v{i}" for i in range(5000)]}}, "required": ["n"]}
    grammar = schema_grammar(schema)
    compiler = shared_engine._runner.grammars
    before = compiler.compiles
    chats = [shared_engine.prepare(user_chat(f"Pick {i}.", SamplingParams.greedy(40, grammar=grammar)))
             for i in range(2)]
    assert compiler.compiles == before + 1  # the second came from the cache
    for result in [shared_engine.submit(chat).result(120) for chat in chats]:
        assert result.finish_reason is FinishReason.STOP and json.loads(result.text)["n"].startswith("v")
    assert compiler.compiles == before + 1  # the engine thread compiled nothing


@pytest.mark.model
def test_a_grammar_holds_on_the_penalty_chain_and_beside_plain_rows(make_engine) -> None:
    """A grammar row with OpenAI's penalties samples on llama.cpp's chain, masked in its buffer;
    plain rows beside it are untouched (their greedy text is what it is alone)."""
    # A fresh engine: after tests/inference/core on the shared one, seeded and greedy texts here
    # came out other than alone (reproduce: pytest -p no:randomly -m model tests/inference/core
    # tests/inference/sample/test_engine_logprobs_grammar.py, on main before and after stop 42).
    shared_engine = make_engine(n_ctx=4096, n_seq_max=8, reproducible=True)
    schema = {"type": "object", "properties": {"colour": {"enum": ["red", "green", "blue"]}}, "required": ["colour"]}
    penalised = SamplingParams(temperature=0.9, seed=3, max_tokens=40, frequency_penalty=1.5,
                               grammar=schema_grammar(schema))
    alone = shared_engine.submit(user_chat("Count to five.", SamplingParams.greedy(24))).result(60)
    handles = [shared_engine.submit(user_chat("Pick a colour.", penalised)),
               shared_engine.submit(user_chat("Count to five.", SamplingParams.greedy(24)))]
    constrained, plain = (h.result(120) for h in handles)
    assert json.loads(constrained.text)["colour"] in ("red", "green", "blue")
    assert plain.text == alone.text
