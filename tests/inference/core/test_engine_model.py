"""The engine on the real default model (SmolLM2 135M): batching, sharing, errors."""

from __future__ import annotations

import pytest

from inference import ChatRequest, FinishReason, LoadSettings, SamplingParams
from inference.errors import EngineError, ModelLoadError
from inference.outputs import Phase
from inference.worker.model_runner import DECODE_NO_KV_SLOT, StepOutput
from tests.support.waiting import wait_until

pytestmark = pytest.mark.model  # every test here runs the real model

QUESTIONS = [
    "What is the capital of France?",
    "Write a poem about cats.",
    "Explain recursion.",
    "List three fruits.",
    "How do planes fly?",
    "What is 2+2?",
    "Tell me a joke.",
    "Describe the moon.",
]
SYSTEM = " ".join(f"Rule {i}: answer briefly, politely and with care for detail." for i in range(30))


def user(text: str, system: str | None = None) -> tuple[dict, ...]:
    msgs = [{"role": "system", "content": system}] if system else []
    return (*msgs, {"role": "user", "content": text})


def greedy(messages, n: int = 32, **kw) -> ChatRequest:
    return ChatRequest(messages=messages, sampling=SamplingParams.greedy(n, **kw))


def test_greedy_output_is_identical_alone_and_in_a_batch_of_8(make_engine):
    engine = make_engine(n_ctx=4096, n_seq_max=8, reproducible=True)
    alone = []
    for q in QUESTIONS:
        alone.append(engine.submit(greedy(user(q), 48)).result(120).token_ids)
        engine.call(lambda core: core.kv.clear())  # nothing cached: same work as in the batch
    handles = [engine.submit(greedy(user(q), 48)) for q in QUESTIONS]
    batched = [h.result(120).token_ids for h in handles]
    assert engine.metrics(fresh=True).max_step_seqs == 8
    assert batched == alone


def test_requests_share_one_batch_and_a_system_prompt_is_computed_once(make_engine):
    engine = make_engine(n_ctx=4096, n_seq_max=8)
    prompts = [engine.inputs.chat_tokens(list(user(q, SYSTEM))) for q in QUESTIONS[:4]]
    shared = min(
        next(i for i, (a, b) in enumerate(zip(prompts[0], p)) if a != b) for p in prompts[1:]
    )
    assert shared > 300
    handles = [engine.submit(greedy(user(q, SYSTEM), 16)) for q in QUESTIONS[:4]]
    results = [h.result(120) for h in handles]
    m = engine.metrics(fresh=True)
    own = sum(len(p) - shared for p in prompts)
    assert m.prompt_tokens_computed <= shared + own + 8
    assert m.prefix_hits == 3
    assert sorted(r.stats.cached_tokens >= shared for r in results) == [False, True, True, True]
    assert m.kv_cells_shared >= shared
    assert m.max_step_seqs == 4


def test_pinned_system_prompt_is_reused_by_new_chats(make_engine):
    engine = make_engine(n_ctx=4096, n_seq_max=8)
    pin = engine.pin_system_prompt(SYSTEM).result(60)
    assert pin.finish_reason is FinishReason.STOP and pin.error is None
    prefix = engine.inputs.system_prefix_tokens(SYSTEM)
    before = engine.metrics(fresh=True).prompt_tokens_computed
    results = [engine.submit(greedy(user(q, SYSTEM), 8)).result(60) for q in QUESTIONS[:3]]
    computed = engine.metrics(fresh=True).prompt_tokens_computed - before
    assert all(r.stats.cached_tokens >= len(prefix) for r in results)
    assert computed <= sum(r.stats.prompt_tokens - len(prefix) for r in results)
    stats = engine.call(lambda core: core.kv.stats())
    assert stats.seqs_pinned == 1
    # Pinning the same prompt again computes nothing new.
    again = engine.pin_system_prompt(SYSTEM).result(60)
    assert again.finish_reason is FinishReason.STOP
    assert engine.call(lambda core: core.kv.stats()).seqs_pinned == 1


@pytest.mark.parametrize("which", ["model_path", "gemma_path"])
def test_a_pinned_preset_is_shared_by_chats_with_any_template(which, request, catalog):
    """SmolLM2 (ChatML, a system role) and Gemma 3 (no system role: the system text opens
    the first user turn). Two chats with a preset's system prompt and different questions
    start from the pinned prefix, which for Gemma holds the system text, not only BOS."""
    from inference.core.engine import Engine
    from inference.params import LoadSettings

    path = request.getfixturevalue(which)
    preset = catalog.create_preset("Careful", SYSTEM)
    engine = Engine.start(LoadSettings(model_path=path, n_ctx=2048, n_seq_max=4))
    try:
        prefix = engine.inputs.system_prefix_tokens(preset.system_prompt)
        text = engine.inputs.vocab.tokenize(preset.system_prompt, False, False)
        assert len(prefix) > len(text) and _contains(prefix, text[1:-1])  # the text's own tokens, inner ones
        assert engine.pin_system_prompt(preset.system_prompt).result(120).error is None
        assert engine.call(lambda core: core.kv.pinned_seq_for(prefix)) is not None
        results = [engine.submit(greedy(user(q, preset.system_prompt), 4)).result(120) for q in QUESTIONS[:2]]
        assert all(r.error is None for r in results)
        cached = [r.stats.cached_tokens for r in results]
        print(f"{path.name}: derived prefix {len(prefix)} tokens, cached {cached}")
        assert all(n >= len(prefix) for n in cached)
        assert engine.unpin_system_prompt(preset.system_prompt)
        assert engine.call(lambda core: core.kv.stats()).seqs_pinned == 0
    finally:
        engine.shutdown()


def _contains(tokens: list[int], part: list[int]) -> bool:
    return any(tokens[i : i + len(part)] == part for i in range(len(tokens) - len(part) + 1))


def test_next_turn_of_a_conversation_reuses_its_own_kv(shared_engine):
    first = list(user("Name a colour.", "You are terse."))
    reply = shared_engine.submit(greedy(tuple(first), 12)).result(60)
    turn1_len = reply.stats.prompt_tokens
    second = first + [
        {"role": "assistant", "content": reply.text},
        {"role": "user", "content": "Another one?"},
    ]
    again = shared_engine.submit(greedy(tuple(second), 8)).result(60)
    assert again.stats.cached_tokens >= turn1_len


def test_cancel_ends_only_that_request(shared_engine):
    long = ChatRequest(messages=user("Tell a long story."), sampling=SamplingParams.greedy(400, ignore_eos=True))
    victim = shared_engine.submit(long)
    other = shared_engine.submit(greedy(user("What is 2+2?"), 24, ignore_eos=True))
    for delta in victim:
        if delta.token_ids:
            break
    victim.cancel()
    cancelled = victim.result(60)
    finished = other.result(60)
    assert cancelled.finish_reason is FinishReason.CANCELLED
    assert 0 < cancelled.stats.generated_tokens < 400
    assert finished.finish_reason is FinishReason.LENGTH
    assert finished.stats.generated_tokens == 24


def test_idle_sequences_are_evicted_when_the_cache_is_small(make_engine):
    engine = make_engine(n_ctx=512, n_seq_max=4)
    results = [
        engine.submit(greedy(user(f"{q} Answer in detail."), 80, ignore_eos=True)).result(120)
        for q in QUESTIONS
    ]
    assert all(r.finish_reason is FinishReason.LENGTH for r in results)
    stats = engine.call(lambda core: core.kv.stats())
    assert stats.cells_used <= stats.cells_total == 512
    assert stats.seqs_idle + stats.seqs_active <= 4
    assert stats.evictions >= 4  # 8 chats through 4 sequences and 512 cells


def test_requests_wait_or_get_preempted_instead_of_failing_when_cells_run_out(make_engine):
    engine = make_engine(n_ctx=512, n_seq_max=4)
    handles = [
        engine.submit(greedy(user(q), 150, ignore_eos=True)) for q in QUESTIONS[:4]
    ]
    results = [h.result(300) for h in handles]
    assert [r.finish_reason for r in results] == [FinishReason.LENGTH] * 4
    assert all(r.stats.generated_tokens == 150 for r in results)
    m = engine.metrics(fresh=True)
    assert m.kv_cells_peak <= 512
    assert m.preemptions >= 1  # 4 x (prompt + 150) does not fit in 512 cells


def test_prompt_longer_than_the_context_fails_alone(make_engine):
    engine = make_engine(n_ctx=256, n_seq_max=2)
    ok = engine.submit(greedy(user("Say hi."), 8))
    too_long = engine.submit(greedy(user("word " * 400), 8))
    bad = too_long.result(30)
    assert bad.finish_reason is FinishReason.ERROR
    assert "context holds 256" in bad.error
    assert ok.result(60).finish_reason in (FinishReason.STOP, FinishReason.LENGTH)


def test_bad_sampling_parameters_are_a_clear_error(shared_engine):
    bad = shared_engine.submit(
        ChatRequest(messages=user("hi"), sampling=SamplingParams(temperature=-1, top_p=2.0))
    ).result(30)
    assert bad.finish_reason is FinishReason.ERROR
    assert "temperature" in bad.error and "top_p" in bad.error


def test_generation_stops_at_max_tokens_and_at_stop_strings(shared_engine):
    full = shared_engine.submit(greedy(user("Count from 1 to 20, comma separated."), 40)).result(60)
    assert full.stats.generated_tokens <= 40
    assert len(full.text) > 6
    stop = full.text[3:6]
    cut = shared_engine.submit(
        greedy(user("Count from 1 to 20, comma separated."), 40, stop=(stop,))
    ).result(60)
    assert cut.finish_reason is FinishReason.STOP
    assert cut.text == full.text[: full.text.index(stop)]
    exact = shared_engine.submit(greedy(user("Tell a story."), 10, ignore_eos=True)).result(60)
    assert exact.finish_reason is FinishReason.LENGTH
    assert exact.stats.generated_tokens == 10


def test_streamed_text_is_utf8_correct_when_characters_span_tokens(shared_engine):
    from inference.tokenizer.detokenizer import IncrementalDetokenizer

    text = "🎉🌍 日本語"
    tokens = shared_engine.call(lambda core: core.runner.tokenize(text, add_special=False))
    pieces = shared_engine.call(lambda core: [core.runner.piece(t) for t in tokens])
    assert any(_not_utf8(p) for p in pieces), "the tokenizer should split a character here"
    detok = IncrementalDetokenizer()
    streamed = [detok.feed(p) for p in pieces] + [detok.flush()]
    assert "".join(streamed) == text
    assert "\ufffd" not in "".join(streamed)

    deltas = []
    result = shared_engine.submit(
        greedy(user("Repeat exactly: 🎉🌍 日本語 🎉🌍 日本語"), 40), on_delta=deltas.append
    ).result(60)
    all_bytes = b"".join(shared_engine.call(lambda core: [core.runner.piece(t) for t in result.token_ids]))
    assert "".join(d.text for d in deltas) == all_bytes.decode("utf-8", errors="replace")


def _not_utf8(piece: bytes) -> bool:
    try:
        piece.decode("utf-8")
        return False
    except UnicodeDecodeError:
        return True


def test_deltas_report_queue_prefill_and_decode_phases(make_engine):
    engine = make_engine(n_ctx=2048, n_seq_max=1, n_batch=64, n_ubatch=64)
    first = engine.submit(greedy(user("Tell me about the sea. " * 20), 8))
    phases: list[Phase] = []
    second = engine.submit(greedy(user("Hi"), 4), on_delta=lambda d: phases.append(d.phase))
    first.result(60)
    second.result(60)
    assert phases[0] is Phase.QUEUED
    assert Phase.DECODING in phases and phases[-1] is Phase.FINISHED


def test_foreground_request_overtakes_queued_background_ones(make_engine):
    engine = make_engine(n_ctx=2048, n_seq_max=1)
    running = engine.submit(greedy(user("Tell a story."), 60, ignore_eos=True))
    background = [
        engine.submit(ChatRequest(messages=user(q), sampling=SamplingParams.greedy(20, ignore_eos=True), priority=0))
        for q in QUESTIONS[:3]
    ]
    wait_until(lambda: engine.metrics(fresh=True).queued >= 3, "all three waiting behind the running one")
    foreground = engine.submit(
        ChatRequest(messages=user("Quick: 1+1?"), sampling=SamplingParams.greedy(5, ignore_eos=True), priority=5)
    )
    running.result(120)
    fg = foreground.result(120)
    bg = [h.result(120) for h in background]
    assert all(fg.stats.ttft_s < b.stats.ttft_s for b in bg)


def test_sixty_four_chats_on_eight_sequences_all_finish(make_engine):
    engine = make_engine(n_ctx=4096, n_seq_max=8)
    handles = [engine.submit(greedy(user(f"Count to {i}."), 12)) for i in range(64)]
    results = [h.result(300) for h in handles]
    assert all(r.error is None for r in results)
    assert all(r.finish_reason in (FinishReason.STOP, FinishReason.LENGTH) for r in results)
    assert all(r.stats.generated_tokens >= 1 for r in results)
    m = engine.metrics(fresh=True)
    assert m.max_step_seqs == 8
    assert m.requests_finished == 64


def test_metrics_report_rates_and_latencies(shared_engine):
    handles = [shared_engine.submit(greedy(user(q), 16, ignore_eos=True)) for q in QUESTIONS[:4]]
    [h.result(60) for h in handles]
    m = shared_engine.metrics(fresh=True)
    assert m.ttft_p50_s is not None and m.ttft_p95_s >= m.ttft_p50_s > 0
    assert m.itl_p95_s >= m.itl_p50_s > 0
    assert m.decode_only_tok_s > 0
    assert m.kv_cells_total == 4096 and 0 < m.kv_cells_used <= m.kv_cells_total
    assert m.generated_tokens >= 64


def test_shutdown_cancels_running_requests_and_stops_the_thread(make_engine):
    engine = make_engine(n_ctx=2048, n_seq_max=4)
    handle = engine.submit(greedy(user("Tell a long story."), 2000, ignore_eos=True))
    for delta in handle:
        if delta.token_ids:
            break
    engine.shutdown()
    result = handle.result(10)
    assert result.finish_reason is FinishReason.CANCELLED
    assert not engine.thread_alive()
    assert not engine.running
    with pytest.raises(EngineError):
        engine.submit(greedy(user("hi"), 4))


def test_broken_model_files_are_clear_errors(tmp_path, model_path):
    from inference.core.engine import Engine
    from inference.params import LoadSettings

    truncated = tmp_path / "truncated.gguf"
    truncated.write_bytes(model_path.read_bytes()[: 3_000_000])
    not_gguf = tmp_path / "notes.gguf"
    not_gguf.write_text("hello " * 500)
    for path, words in [
        (truncated, "could not load truncated.gguf"),
        (not_gguf, "not a GGUF model file"),
        (tmp_path / "missing.gguf", "not found"),
    ]:
        with pytest.raises(ModelLoadError, match=words):
            Engine.start(LoadSettings(model_path=path))


def test_seeded_sampling_with_penalties_repeats_and_seeds_differ(make_engine):
    engine = make_engine(n_ctx=2048, n_seq_max=4, reproducible=True)

    def sample(seed: int) -> tuple[int, ...]:
        params = SamplingParams(temperature=1.0, top_k=40, top_p=0.95, min_p=0.05,
                                repeat_penalty=1.3, seed=seed, max_tokens=24, ignore_eos=True)
        out = engine.submit(ChatRequest(messages=user("Write a sentence."), sampling=params)).result(60)
        assert out.error is None
        return out.token_ids

    first = sample(7)
    assert sample(7) == first
    assert sample(8) != first
    assert len(first) == 24


def test_a_long_prompt_is_chunked_while_others_keep_decoding(make_engine):
    engine = make_engine(n_ctx=4096, n_seq_max=4, n_batch=512, n_ubatch=512, target_itl_s=0.05)
    events: list[tuple[str, Phase, int]] = []
    lock = __import__("threading").Lock()

    def record(name):
        def on_delta(d):
            with lock:
                events.append((name, d.phase, len(d.token_ids)))
        return on_delta

    decoders = [
        engine.submit(greedy(user(q), 200, ignore_eos=True), on_delta=record(f"d{i}"))
        for i, q in enumerate(QUESTIONS[:2])
    ]
    wait_until(lambda: any(e[0] == "d0" and e[2] for e in events), "d0 decoding", timeout=120)
    long = engine.submit(greedy(user("Summarise this. " + "The sea is wide and deep. " * 220), 4),
                         on_delta=record("long"))
    long.result(120)
    [d.result(120) for d in decoders]
    with lock:
        timeline = list(events)
    start = next(i for i, e in enumerate(timeline) if e[0] == "long" and e[1] is Phase.PREFILLING)
    first_token = next(i for i, e in enumerate(timeline) if e[0] == "long" and e[2])
    chunks = sum(1 for e in timeline[start:first_token] if e[0] == "long" and e[1] is Phase.PREFILLING)
    decoded_meanwhile = sum(e[2] for e in timeline[start:first_token] if e[0] == "d0")
    assert chunks >= 3  # ~1,500 prompt tokens, never all in one step while others decode
    assert decoded_meanwhile >= chunks - 1


def test_decode_without_a_kv_slot_evicts_or_preempts_and_retries(make_engine):
    engine = make_engine(n_ctx=2048, n_seq_max=4)
    engine.submit(greedy(user("Warm up the cache."), 8)).result(60)  # leaves an idle sequence
    failures = {"left": 3}

    def install(core):
        real = core.runner.execute

        def flaky(plan):
            if failures["left"] and len(plan.chunks) > 1:
                failures["left"] -= 1
                return StepOutput.failed(DECODE_NO_KV_SLOT)  # what llama_decode says when no slot is free
            return real(plan)

        core.runner.execute = flaky

    engine.call(install)
    handles = [engine.submit(greedy(user(q), 20, ignore_eos=True)) for q in QUESTIONS[:3]]
    results = [h.result(120) for h in handles]
    assert failures["left"] == 0
    assert all(r.finish_reason is FinishReason.LENGTH and r.stats.generated_tokens == 20 for r in results)
    m = engine.metrics(fresh=True)
    assert m.kv_evictions + m.preemptions >= 3


def test_a_request_that_can_never_fit_beside_pinned_prompts_fails_clearly(make_engine):
    engine = make_engine(n_ctx=256, n_seq_max=4)
    big_system = "You are careful. " * 45
    assert engine.pin_system_prompt(big_system).result(60).error is None
    assert engine.call(lambda core: core.kv.stats()).cells_used > 150
    other = engine.submit(greedy(user("Tell me about the sea and the sky. " * 6), 8)).result(60)
    assert other.finish_reason is FinishReason.ERROR
    assert "KV cache cannot hold this request" in other.error
    assert "unpin" in other.error
    # The pinned prompt itself still serves chats that fit.
    ok = engine.submit(greedy(user("Hi", big_system), 4)).result(60)
    assert ok.error is None and ok.stats.cached_tokens > 150


def test_a_reply_that_fills_the_cache_ends_with_its_text_kept(make_engine):
    engine = make_engine(n_ctx=256, n_seq_max=2)
    big_system = "You are careful. " * 45
    engine.pin_system_prompt(big_system).result(60)
    out = engine.submit(greedy(user("Hi", big_system), 500, ignore_eos=True)).result(60)
    assert out.finish_reason is FinishReason.CONTEXT_FULL
    assert out.error is None
    assert 20 < out.stats.generated_tokens < 256 - 180
    assert len(out.text) > 20


def test_a_chat_longer_than_the_context_keeps_its_newest_turns(make_engine):
    engine = make_engine(n_ctx=512, n_seq_max=2)
    history = [{"role": "system", "content": "You are brief."}]
    for i in range(60):
        history += [{"role": "user", "content": f"Tell me about item {i}."},
                    {"role": "assistant", "content": f"Item {i} is a fine thing."}]
    history.append({"role": "user", "content": "And the last one?"})
    refused = engine.submit(ChatRequest(messages=tuple(history), sampling=SamplingParams.greedy(16))).result(60)
    assert refused.finish_reason is FinishReason.ERROR and "context holds 512" in refused.error
    fitted = engine.submit(
        ChatRequest(messages=tuple(history), sampling=SamplingParams.greedy(16), overflow="drop_oldest")
    ).result(60)
    assert fitted.error is None
    assert 300 < fitted.stats.prompt_tokens <= 512 - 16
    start, count = fitted.stats.messages_dropped  # the oldest turns, for the chat to mark
    assert start == 1 and count > 0 and history[start + count]["role"] == "user"
    tokens = engine.inputs.fit_messages(history, 16).tokens
    text = engine.call(lambda core: "".join(core.runner.piece(t).decode("utf-8", "replace") for t in tokens))
    assert "You are brief." in text and "And the last one?" in text
    assert "item 0." not in text and "item 59." in text


@pytest.mark.parametrize("overflow", ["drop_oldest", "truncate_middle"])
def test_gemma_goes_on_past_its_context_with_turns_that_still_alternate(gemma_path, overflow):
    """Gemma 3's template refuses turns out of order and it has sliding-window layers: a
    cut chat still renders, runs and says what it left out."""
    from inference.core.engine import Engine

    history: list[dict] = [{"role": "system", "content": "You are brief."}]
    for i in range(40):
        history += [{"role": "user", "content": f"Tell me about item {i}."},
                    {"role": "assistant", "content": f"Item {i} is a fine thing to have around."}]
    history.append({"role": "user", "content": "And the last one?"})
    with Engine.start(LoadSettings(model_path=gemma_path, n_ctx=512, n_seq_max=1)) as engine:
        out = engine.submit(ChatRequest(messages=tuple(history), sampling=SamplingParams.greedy(8),
                                        overflow=overflow)).result(120)
    assert out.error is None and out.stats.generated_tokens > 0
    start, count = out.stats.messages_dropped
    assert start == (1 if overflow == "drop_oldest" else 3) and count > 0
    assert history[start + count]["role"] == "user"
    assert out.stats.prompt_tokens <= 512 - 8
