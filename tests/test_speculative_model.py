"""Speculative decoding on the real default model: with prompt lookup the greedy text is
token for token that without it, alone and in a batch (reproducible mode, where logits do
not depend on what shares the batch); drafts were really verified and kept.

The cells that rejected draft tokens free are reused by later tokens of any sequence, so a
sequence's cells may no longer lie in the order of its positions, and attention sums in
cell order: logits then differ in their last bits (docs/engine.md). A seeded sample can
flip on that, rarely; a greedy pick would need a near tie."""

from __future__ import annotations

import pytest

from app.bench.workload import edit_messages
from inference import ChatRequest, SamplingParams

pytestmark = pytest.mark.model

COPY = edit_messages(0)[0]["content"]  # a text the small model copies (the bench's edit workload)


def ask(text: str, sampling: SamplingParams) -> ChatRequest:
    return ChatRequest(messages=({"role": "user", "content": text},), sampling=sampling)


REQUESTS = [
    ask(COPY, SamplingParams.greedy(96, ignore_eos=True)),
    ask("List three fruits.", SamplingParams.greedy(24)),
    ask(COPY, SamplingParams.greedy(64, repeat_penalty=1.1)),
]
def run(make_engine, speculative: str, requests=REQUESTS) -> tuple[list[tuple[int, ...]], object]:
    engine = make_engine(n_ctx=4096, n_seq_max=6, reproducible=True, speculative=speculative)
    handles = [engine.submit(r) for r in requests]
    results = [h.result(600) for h in handles]
    assert all(r.error is None for r in results)
    return [r.token_ids for r in results], engine.metrics(fresh=True)


def test_lookup_changes_no_greedy_token_in_a_batch(make_engine) -> None:
    plain, plain_metrics = run(make_engine, "off")
    spec, metrics = run(make_engine, "lookup")
    assert spec == plain
    assert plain_metrics.draft_tokens == 0
    assert metrics.draft_tokens_accepted > 20  # the copies were drafted and kept
    assert metrics.steps < plain_metrics.steps


def test_a_lone_copy_is_decoded_in_far_fewer_steps(make_engine) -> None:
    engine = make_engine(n_ctx=4096, n_seq_max=2, reproducible=True, speculative="lookup")
    result = engine.submit(REQUESTS[0]).result(600)
    metrics = engine.metrics(fresh=True)
    assert len(result.token_ids) == 96
    assert metrics.draft_tokens_accepted >= 20 and metrics.draft_acceptance > 0.3
    assert metrics.steps < 80  # 96 tokens (and the prompt's chunks) in far fewer steps



def test_seeded_requests_draft_too_and_finish_as_asked(make_engine) -> None:
    """Seeded text with lookup is drawn from the same distributions (the verification's
    distribution test is in test_sampling_distribution.py); token for token it matches
    only while the sequence's KV cells stay in position order, which llama.cpp does not
    promise once rejected drafts free cells (docs/engine.md)."""
    seeded = [ask(COPY, SamplingParams(seed=7, max_tokens=64, ignore_eos=True)),
              ask(COPY, SamplingParams(seed=3, temperature=0.8, top_k=0, top_p=0.95, max_tokens=48, ignore_eos=True))]
    tokens, metrics = run(make_engine, "lookup", seeded)
    assert [len(t) for t in tokens] == [64, 48]
    assert metrics.draft_tokens_accepted > 0
