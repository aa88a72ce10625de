"""Speculative decoding on the real default model: with prompt lookup the greedy text of a
request is token for token that without it (reproducible mode, where logits do not depend
on what shares the batch); drafts were really verified and kept.

The cells that rejected draft tokens free are reused by later tokens of any sequence, so a
sequence's cells may no longer lie in the order of its positions, and attention sums in
cell order: logits then differ in their last bits (docs/engine.md). A seeded sample can
flip on that, rarely; a greedy pick where two tokens nearly tie. Alone, a sequence's new
cells always follow its own, so its text is exactly the one-by-one text."""

from __future__ import annotations

import pytest

from app.bench.workload import edit_messages
from inference import SamplingParams
from inference.speculative.planner import DraftPlanner
from tests.support.chat_requests import user_chat

pytestmark = pytest.mark.model

COPY = edit_messages(0)[0]["content"]  # a text the small model copies (the bench's edit workload)



REQUESTS = [
    user_chat(COPY, SamplingParams.greedy(96, ignore_eos=True)),
    user_chat("List three fruits.", SamplingParams.greedy(24)),
    user_chat(COPY, SamplingParams.greedy(64, repeat_penalty=1.1)),
]
class EveryDraft(DraftPlanner):
    """Verifies every draft on offer (up to 8 tokens), whatever it costs: on this CPU the
    real planner rightly gives few, and these tests are about what verifying does."""

    def worth_drafting(self, best_rate: float, n_decoding: int, n_tokens: int) -> bool:
        return True

    def lengths(self, rates, available, n_tokens, room, n_decoding=None):
        lengths = []
        for n in available:
            lengths.append(min(n, 8, room))
            room -= lengths[-1]
        return lengths

    def observe(self, *args) -> None:
        pass


def start(make_engine, speculative: str, n_seq_max: int = 6):
    engine = make_engine(n_ctx=4096, n_seq_max=n_seq_max, reproducible=True, speculative=speculative)
    if speculative == "lookup":
        engine.call(lambda core: setattr(core.proposer, "planner", EveryDraft(8)))
    return engine


def run(make_engine, speculative: str, requests=REQUESTS) -> tuple[list[tuple[int, ...]], object]:
    engine = start(make_engine, speculative)
    handles = [engine.submit(r) for r in requests]
    results = [h.result(600) for h in handles]
    assert all(r.error is None for r in results)
    return [r.token_ids for r in results], engine.metrics(fresh=True)


@pytest.mark.parametrize("index", range(len(REQUESTS)), ids=["copy", "fruits", "copy-penalised"])
def test_lookup_changes_no_greedy_token(make_engine, index) -> None:
    """Alone, every draft on offer verified (most are rejected on the fruits): the same
    tokens as decoding one by one."""
    (plain,), plain_metrics = run(make_engine, "off", [REQUESTS[index]])
    (spec,), metrics = run(make_engine, "lookup", [REQUESTS[index]])
    assert spec == plain
    assert plain_metrics.draft_tokens == 0 and metrics.draft_tokens > 0


def test_drafts_of_several_requests_in_one_batch_give_complete_replies(make_engine) -> None:
    """In a batch the text may part from the one-by-one text where a near tie meets the
    cells that rejected drafts freed (see the module's docstring); every reply still comes
    whole, each drafts, and the batch takes fewer steps than tokens."""
    tokens, metrics = run(make_engine, "lookup")
    assert [len(t) for t in tokens] == [96, len(tokens[1]), len(tokens[2])] and all(tokens)
    assert metrics.draft_tokens_accepted > 20
    assert metrics.steps < sum(len(t) for t in tokens)


def test_a_lone_copy_is_decoded_in_far_fewer_steps(make_engine) -> None:
    engine = start(make_engine, "lookup", n_seq_max=2)
    result = engine.submit(REQUESTS[0]).result(600)
    metrics = engine.metrics(fresh=True)
    assert len(result.token_ids) == 96
    assert metrics.draft_tokens_accepted >= 20
    assert metrics.steps < 80  # 96 tokens (and the prompt's chunks) in far fewer steps



def test_seeded_requests_draft_too_and_finish_as_asked(make_engine) -> None:
    """Seeded text with lookup is drawn from the same distributions (the verification's
    distribution test is in test_sampling_distribution.py); token for token it matches
    only while the sequence's KV cells stay in position order, which llama.cpp does not
    promise once rejected drafts free cells (docs/engine.md)."""
    seeded = [user_chat(COPY, SamplingParams(seed=7, max_tokens=64, ignore_eos=True)),
              user_chat(COPY, SamplingParams(seed=3, temperature=0.8, top_k=0, top_p=0.95, max_tokens=48,
                                             ignore_eos=True))]
    tokens, metrics = run(make_engine, "lookup", seeded)
    assert [len(t) for t in tokens] == [64, 48]
    assert metrics.draft_tokens_accepted > 0

