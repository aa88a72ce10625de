"""Speculation with a draft model on the real default model, drafting for itself (the only
pair with one vocabulary here: docs/engine.md): the draft model's cache follows the target's
requests lazily and drafts what a fresh one would; the engine's greedy text is token for
token the text without speculation; a model with another vocabulary is refused clearly."""

from __future__ import annotations

import pytest

from inference import LoadSettings, ModelLoadError, SamplingParams
from inference.speculative.draft_model import DraftWant
from inference.worker.runner import LlamaRunner
from tests.inference.speculative.test_speculative_model import COPY, EveryDraft
from tests.support.chat_requests import user_chat

pytestmark = pytest.mark.model


def draft_runner(model_path, draft_path=None) -> LlamaRunner:
    return LlamaRunner(LoadSettings(model_path=model_path, n_ctx=2048, n_seq_max=4, speculative="draft",
                                    draft_model=draft_path or model_path))


@pytest.fixture(scope="module")
def runners(model_path):
    kept, fresh = draft_runner(model_path), draft_runner(model_path)
    yield kept, fresh
    kept.close()
    fresh.close()


def test_the_draft_cache_follows_a_request_and_a_sequence_that_changed_hands(runners) -> None:
    kept, fresh = runners
    model = kept.draft_model
    assert model is not None
    prompt = kept.tokenize("The capital of France is Paris. The capital of Italy is")
    [first] = model.propose([DraftWant(0, "a", prompt, 6)])
    # One decode a draft token, and one more where the next was too unsure to offer; the
    # first, computing the prompt, is not a draft step.
    assert first and len(first) - 1 <= model.last_steps <= len(first)
    # The target kept two of the drafts and sampled its own token after them.
    grown = prompt + first[:2] + [kept.tokenize(" Rome", add_special=False)[0]]
    [second] = model.propose([DraftWant(0, "a", grown, 6)])
    # Only the sampled token was new (the kept drafts were in): every decode a draft step.
    assert len(second) <= model.last_steps <= len(second) + 1 and model.last_step_s > 0
    fresh_model = fresh.draft_model
    assert fresh_model is not None
    assert second == fresh_model.propose([DraftWant(1, "x", grown, 6)])[0]
    # Sequence 0 now serves another request: nothing of "a" may leak into its drafts.
    other = kept.tokenize("def add(a, b):\n    return")
    [third] = model.propose([DraftWant(0, "b", other, 6)])
    assert third == fresh_model.propose([DraftWant(2, "y", other, 6)])[0]


def test_drafts_stop_at_the_want_limit_and_two_sequences_draft_in_one_call(runners) -> None:
    kept, _ = runners
    model = kept.draft_model
    a = kept.tokenize("1, 2, 3, 4, 5, 6, 7, 8, 9, 10,")
    b = kept.tokenize("Monday, Tuesday, Wednesday, Thursday,")
    drafts = model.propose([DraftWant(2, "c", a, 3), DraftWant(3, "d", b, 1)])
    assert len(drafts[0]) == 3 and len(drafts[1]) == 1
    assert model.last_steps <= max(len(d) for d in drafts)  # one batched decode a draft token


class DraftEvery(EveryDraft):
    """Verifies up to 8 of the draft model's tokens every step, whatever they cost: a model
    drafting for itself never pays (docs/engine.md); these tests are about what it does."""

    def generation_limit(self, rate: float, n_decoding: int, n_tokens: int) -> int:
        return 8

    def observe_drafting(self, steps: int, seconds: float) -> None:
        pass


def test_a_draft_model_changes_no_greedy_token(make_engine, model_path) -> None:
    requests = [user_chat(COPY, SamplingParams.greedy(64, ignore_eos=True)),
                user_chat("List three fruits.", SamplingParams.greedy(32))]
    texts = {}
    for mode in ("off", "draft"):
        engine = make_engine(n_ctx=4096, n_seq_max=2, reproducible=True, speculative=mode,
                             draft_model=model_path if mode == "draft" else None)
        if mode == "draft":
            engine.call(lambda core: setattr(core.proposer, "planner",
                                             DraftEvery(8, model=core.runner.draft_model)))
        texts[mode] = [engine.submit(r).result(600).token_ids for r in requests]  # one at a time
        metrics = engine.metrics(fresh=True)
    assert texts["draft"] == texts["off"]
    assert metrics.draft_tokens > 40 and metrics.draft_tokens_accepted >= 0.8 * metrics.draft_tokens


def test_a_draft_model_with_another_vocabulary_is_refused_by_name(model_path, gemma_path) -> None:
    with pytest.raises(ModelLoadError, match=f"{gemma_path.name} cannot draft for {model_path.name}: "
                                             "its vocabulary has 262,144 tokens"):
        draft_runner(model_path, gemma_path)


def test_a_full_draft_cache_empties_the_sequences_not_asking_and_never_fails_a_decode(model_path) -> None:
    """The draft model's cache does not share prefixes as the target's does: three
    sequences of about 190 tokens and their drafts do not fit in its 512 cells. The third
    gets no draft (no failed decode emptying everything); asked alone, it does, the others'
    cells given back."""
    runner = LlamaRunner(LoadSettings(model_path=model_path, n_ctx=512, n_seq_max=4, speculative="draft",
                                      draft_model=model_path))
    try:
        model = runner.draft_model
        prompts = [runner.tokenize(f"{name} counts: " + ", ".join(str(i) for i in range(1, 51)) + ",")
                   for name in ("Ann", "Bob", "Cyd")]
        assert all(2 * (len(p) + 4) <= model._n_ctx < 3 * (len(p) + 4) for p in prompts)
        drafts = model.propose([DraftWant(i, f"r{i}", p, 4) for i, p in enumerate(prompts)])
        assert drafts[0] and drafts[1] and drafts[2] == []
        [alone] = model.propose([DraftWant(2, "r2", prompts[2], 4)])
        assert alone == drafts[0]  # the same count goes on the same way
        assert model._held[0] == [] and model._held[1] == []  # given back to make room
    finally:
        runner.close()
