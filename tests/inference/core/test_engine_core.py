"""EngineCore on the fake runner: schedule -> execute -> postprocess, without a model.

The fake "model" writes the alphabet by position ('a' + len(context) % 26), so a delta's
text tells which position it was sampled at; each step takes 1 s of fake time.
"""

from __future__ import annotations

import inspect

from inference.core.engine_core import MAX_DECODE_RETRIES
from inference.kv.cache_manager import SeqState
from inference.outputs import Delta, FinishReason, Phase
from inference.params import ChatRequest, SamplingParams
from inference.request import RequestStatus
from inference.tokenizer.chat_template import GEMMA, ChatTemplate
from inference.tokenizer.input_processor import InputProcessor
from inference.worker.model_runner import ModelRunner
from tests.support.core_driver import chunk_of, make_driver, prompt
from tests.support.fake_runner import BOS, EOS, FakeRunner, FakeSampler


def phases(deltas: list[Delta]) -> list[tuple[Phase, tuple[int, int] | None, str]]:
    return [(d.phase, d.progress, d.text) for d in deltas]


def text_of(deltas: list[Delta]) -> str:
    return "".join(d.text for d in deltas)


# ----- one request ------------------------------------------------------------------------


def test_a_request_goes_queued_prefilling_decoding_finished_with_the_right_deltas() -> None:
    d = make_driver(n_batch=16)
    req = d.add("a", prompt(1, 40), max_tokens=3)
    assert req.status is RequestStatus.WAITING
    d.step()
    assert req.status is RequestStatus.PREFILLING
    d.run(lambda: req.status.finished)
    assert phases(d.of("a")) == [
        (Phase.QUEUED, (1, 40), ""),
        (Phase.PREFILLING, (16, 40), ""),  # nobody decodes: each chunk is the whole batch
        (Phase.PREFILLING, (32, 40), ""),
        (Phase.DECODING, None, "o"),  # sampled after 40 tokens: 'a' + 14
        (Phase.DECODING, None, "p"),
        (Phase.FINISHED, None, "q"),
    ]
    assert [x.token_ids for x in d.of("a")][3:] == [(ord("o"),), (ord("p"),), (ord("q"),)]
    final = d.final("a")
    assert final.finish_reason is FinishReason.LENGTH and final.error is None
    assert req.status is RequestStatus.FINISHED_LENGTH and req.output_tokens == list(b"opq")
    fed = [(c.start, c.n_tokens, c.wants_logits) for p in d.runner.executed for c in p.chunks]
    assert fed == [(0, 16, False), (16, 16, False), (32, 8, True), (40, 1, True), (41, 1, True)]


def test_stats_follow_the_clock() -> None:
    d = make_driver(n_batch=16)
    d.add("a", prompt(1, 40), max_tokens=3)
    d.run(lambda: not d.core.has_work())
    stats = d.final("a").stats
    assert stats is not None
    assert (stats.prompt_tokens, stats.cached_tokens, stats.generated_tokens) == (40, 0, 3)
    assert stats.queue_s == 0.0  # admitted at once
    assert stats.ttft_s == 3.0  # three 1 s steps: 16 + 16 + 8 prompt tokens
    assert stats.itl_p50_s == 1.0 and stats.decode_tok_s == 1.0
    assert stats.total_s == 5.0


def test_a_finished_request_gives_back_its_sampler_and_keeps_its_cache() -> None:
    d = make_driver()
    req = d.add("a", prompt(1, 10), max_tokens=2)
    assert d.runner.samplers == {"a": FakeSampler(req.sampling, prompt(1, 10))}
    d.run(lambda: req.status.finished)
    assert d.runner.samplers == {}
    assert d.kv.stats().seqs_idle == 1 and d.kv.cells_used == 11  # prompt + the fed output
    assert not d.core.has_work()


def test_end_of_generation_stops_without_showing_the_token() -> None:
    d = make_driver(next_token=lambda ctx: EOS if len(ctx) >= 12 else ord("x"))
    req = d.add("a", prompt(1, 10), max_tokens=50)
    d.run(lambda: req.status.finished)
    final = d.final("a")
    assert final.finish_reason is FinishReason.STOP
    assert (final.text, final.token_ids) == ("", ())
    assert text_of(d.of("a")) == "xx" and req.output_tokens == list(b"xx")
    assert req.status is RequestStatus.FINISHED_STOPPED


def test_a_chat_is_rendered_with_the_template_and_tokenized() -> None:
    d = make_driver()
    messages = ({"role": "user", "content": "hi"},)
    tokens = d.core.inputs.chat_tokens(list(messages))
    assert tokens[0] == BOS  # the fake adds BOS; ChatML has none of its own
    assert bytes(tokens[1:]).decode() == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    [queued] = d.core.add_request(ChatRequest(messages=messages, sampling=SamplingParams.greedy(2), request_id="c"))
    assert queued.progress == (1, len(tokens))
    d.run(lambda: not d.core.has_work())
    assert d.final("c").finish_reason is FinishReason.LENGTH


def test_continue_final_renders_the_partial_reply_without_an_end_of_turn() -> None:
    d = make_driver()
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Hel"}]
    tokens = d.core.inputs.chat_tokens(messages, continue_final=True)
    assert bytes(tokens[1:]).decode() == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\nHel"
    fitted = ChatRequest(messages=tuple(messages), sampling=SamplingParams.greedy(2), request_id="c",
                         overflow="drop_oldest", continue_final=True)
    [queued] = d.core.add_request(fitted)
    assert queued.progress == (1, len(tokens))
    [bad] = d.core.add_request(ChatRequest(messages=tuple(messages[:1]), continue_final=True, request_id="u"))
    assert bad.finish_reason is FinishReason.ERROR and "assistant message last" in (bad.error or "")


def test_invalid_requests_end_at_once_with_a_clear_error() -> None:
    d = make_driver(n_cells=64)
    [too_long] = d.core.add_request(ChatRequest(prompt_tokens=tuple(prompt(1, 64)), request_id="long"))
    [bad_params] = d.core.add_request(
        ChatRequest(prompt_tokens=(1, 2), sampling=SamplingParams(top_p=0.0), request_id="bad")
    )
    assert too_long.finish_reason is bad_params.finish_reason is FinishReason.ERROR
    assert "context holds 64" in (too_long.error or "") and "top_p" in (bad_params.error or "")
    assert not d.core.has_work() and d.runner.samplers == {}


# ----- several requests -----------------------------------------------------------------------


def test_several_requests_share_one_step() -> None:
    d = make_driver()
    names = ["a", "b", "c"]
    for i, name in enumerate(names):
        d.add(name, prompt(i + 1, 5 + i), max_tokens=2)
    d.step()
    [plan] = d.runner.executed
    assert [c.request.request_id for c in plan.chunks] == names
    assert [text_of(d.of(n)) for n in names] == ["f", "g", "h"]  # after 5, 6 and 7 tokens
    d.step()
    assert len(d.runner.executed) == 2
    assert [c.is_decode for c in d.runner.executed[1].chunks] == [True] * 3
    assert [d.final(n).finish_reason for n in names] == [FinishReason.LENGTH] * 3
    assert [text_of(d.of(n)) for n in names] == ["fg", "gh", "hi"]
    assert d.core.snapshot().max_step_seqs == 3


def test_cancel_ends_only_that_request_and_keeps_its_cache() -> None:
    d = make_driver()
    a = d.add("a", prompt(1, 10), max_tokens=50)
    b = d.add("b", prompt(2, 10), max_tokens=50)
    d.step()
    d.step()
    seq_a = a.seq
    assert seq_a is not None
    [cancelled] = d.core.cancel("a")
    assert (cancelled.phase, cancelled.finish_reason) == (Phase.FINISHED, FinishReason.CANCELLED)
    assert cancelled.stats is not None and cancelled.stats.generated_tokens == 2
    assert a.status is RequestStatus.FINISHED_CANCELLED and a.seq is None
    assert d.kv.state(seq_a) is SeqState.IDLE  # its KV stays for a later turn
    assert list(d.runner.samplers) == ["b"]
    d.step()
    assert [c.request for c in d.plans[-1].chunks] == [b]
    assert d.core.cancel("a") == []  # already gone


def test_cancel_of_a_queued_request_removes_it_before_it_runs() -> None:
    d = make_driver(n_seqs=1)
    d.add("a", prompt(1, 10), max_tokens=50)
    b = d.add("b", prompt(2, 10), max_tokens=50)
    d.step()
    assert b in d.sched.waiting
    [cancelled] = d.core.cancel("b")
    assert cancelled.finish_reason is FinishReason.CANCELLED
    assert b not in d.sched.waiting and b.status is RequestStatus.FINISHED_CANCELLED
    d.step()
    assert all(c.request is not b for p in d.runner.executed for c in p.chunks)


# ----- a decode that finds no KV slot -------------------------------------------------------------


def test_no_kv_slot_evicts_an_idle_sequence_and_retries_the_same_step() -> None:
    d = make_driver()
    done = d.add("done", prompt(1, 10), max_tokens=1)
    d.step()
    assert done.status.finished and d.kv.stats().seqs_idle == 1
    d.add("a", prompt(2, 10), max_tokens=50)
    d.add("b", prompt(3, 10), max_tokens=50)
    d.step()
    d.runner.fail_next(1)
    executed, seen = len(d.runner.executed), len(d.deltas)
    d.step()
    assert len(d.runner.executed) == executed + 2  # the failed decode and its retry
    assert [(x.request_id, x.text) for x in d.deltas[seen:]] == [("a", "l"), ("b", "l")]
    stats = d.kv.stats()
    assert stats.seqs_idle == 0 and stats.evictions == 1
    assert d.core.metrics.preemptions == 0


def test_no_kv_slot_without_an_idle_sequence_preempts_the_last_in_order() -> None:
    d = make_driver()
    first = d.add("first", prompt(1, 10), max_tokens=50, priority=2)
    second = d.add("second", prompt(2, 10), max_tokens=50)
    d.step()
    d.step()
    assert text_of(d.of("second")) == "kl"
    d.runner.fail_next(1)
    seen = len(d.deltas)
    d.step()
    assert d.deltas[seen] == Delta("second", phase=Phase.QUEUED, progress=(1, 12))
    assert second.preemptions == 1 and first.preemptions == 0
    retried = d.plans[-1]
    assert chunk_of(retried, first).is_decode
    again = chunk_of(retried, second)
    assert (again.start, again.n_tokens) == (0, 12)  # its KV was dropped: prompt and outputs again
    assert text_of(d.of("second")) == "klm"  # and it goes on where it was
    assert d.runner.sampler_starts == ["first", "second"]  # with the same sampler (RNG, penalties)
    assert d.core.metrics.preemptions == 1


def test_a_decode_that_keeps_failing_ends_its_requests_after_the_retries() -> None:
    d = make_driver()
    a = d.add("a", prompt(1, 10), max_tokens=50)
    d.step()
    d.runner.fail_next(MAX_DECODE_RETRIES + 1)
    d.step()
    final = d.final("a")
    assert final.finish_reason is FinishReason.ERROR
    assert "llama_decode failed with code 1" in (final.error or "")
    assert len(d.runner.executed) == 1 + 1 + MAX_DECODE_RETRIES
    assert d.core.metrics.preemptions == MAX_DECODE_RETRIES  # the only request, each time
    assert a.seq is None and d.kv.cells_used == 0 and not d.core.has_work()


def test_any_other_decode_failure_ends_the_step_s_requests_without_retrying() -> None:
    d = make_driver()
    d.add("a", prompt(1, 10), max_tokens=50)
    d.add("b", prompt(2, 10), max_tokens=50)
    d.step()
    d.runner.fail_next(1, code=-3)
    d.step()
    assert len(d.runner.executed) == 2
    for name in ("a", "b"):
        assert d.final(name).finish_reason is FinishReason.ERROR
        assert "code -3" in (d.final(name).error or "")
    assert d.kv.cells_used == 0  # their cache is not trusted
    assert d.core.metrics.requests_failed == 2


def test_a_pinned_system_prompt_of_a_template_without_a_system_role_is_shared() -> None:
    """With Gemma's template the system text opens the first user turn: the pin computes
    that opening (not only BOS) and later chats with the system prompt start from it."""
    d = make_driver()
    d.core.inputs = InputProcessor(d.runner, d.runner.n_ctx, template=ChatTemplate(GEMMA, "<s>", "</s>"))
    system = {"role": "system", "content": "You answer in one short sentence."}
    prefix = d.core.inputs.system_prefix_tokens(system["content"])
    assert len(prefix) > len(system["content"])
    d.deltas += d.core.add_request(ChatRequest(messages=(system,), sampling=SamplingParams(max_tokens=0),
                                               pin=True, request_id="pin"))
    d.run(lambda: any(x.finished for x in d.of("pin")))
    assert d.final("pin").finish_reason is FinishReason.STOP and d.kv.stats().seqs_pinned == 1
    assert d.kv.pinned_seq_for(prefix) is not None
    for name in ("one", "two"):
        chat = ChatRequest(messages=(system, {"role": "user", "content": f"Question {name}?"}),
                           sampling=SamplingParams.greedy(max_tokens=2), request_id=name)
        d.deltas += d.core.add_request(chat)
        d.run(lambda n=name: any(x.finished for x in d.of(n)))
        assert d.final(name).stats.cached_tokens >= len(prefix)
    assert d.core.unpin(d.core.inputs.system_prefix_tokens(system["content"]))


# ----- the cache runs out ------------------------------------------------------------------------


def test_a_request_that_can_never_fit_beside_pinned_prompts_fails_clearly() -> None:
    d = make_driver(n_cells=64)
    d.add("pin", prompt(1, 50), max_tokens=0, pin=True)
    d.step()
    assert d.final("pin").finish_reason is FinishReason.STOP and d.kv.stats().seqs_pinned == 1
    d.add("big", prompt(2, 40), max_tokens=8)
    d.step()
    final = d.final("big")
    assert final.finish_reason is FinishReason.ERROR
    assert "KV cache cannot hold this request" in (final.error or "")
    assert len(d.runner.executed) == 1  # the pinned prompt's prefill only


def test_a_reply_that_fills_the_cache_ends_with_its_text_kept() -> None:
    d = make_driver(n_cells=64)
    system = prompt(1, 30)
    for name, tokens in (("pin1", system), ("pin2", prompt(2, 20))):
        d.add(name, tokens, max_tokens=0, pin=True)
        d.step()
    chat = d.add("chat", system + prompt(3, 5), max_tokens=100)
    d.run(lambda: chat.status.finished)
    final = d.final("chat")
    assert final.finish_reason is FinishReason.CONTEXT_FULL and final.error is None
    assert chat.num_cached == 30
    assert len(text_of(d.of("chat"))) == chat.num_output == 10  # 64 cells - 50 pinned - 5 own + 1 never fed
    assert d.kv.cells_used == 64


# ----- the seam ------------------------------------------------------------------------------------


def test_the_fake_runner_provides_every_member_of_the_protocol() -> None:
    members = set()
    for cls in ModelRunner.__mro__:
        if getattr(cls, "_is_protocol", False) and cls.__module__.startswith("inference"):
            members |= {n for n in vars(cls) if not n.startswith("_")} | set(getattr(cls, "__annotations__", {}))
    assert {"execute", "start_sampling", "stop_sampling", "seq_rm", "seq_cp", "n_ctx", "piece"} <= members
    fake = FakeRunner()
    missing = sorted(n for n in members if not hasattr(fake, n))
    assert missing == []
    for name in members:
        proto = inspect.getattr_static(ModelRunner, name, None)
        if callable(proto):
            assert list(inspect.signature(proto).parameters) == list(
                inspect.signature(getattr(FakeRunner, name)).parameters
            ), name



def test_a_chat_waiting_for_its_documents_pin_hears_the_pins_progress() -> None:
    """Issue 39, defect 7: a chat on attached files said "queued (position 1)" for 17 s while
    the engine computed its documents' prefix (pinned, under another request): it is reading
    that chat's prompt, and the tab says so."""
    d = make_driver(n_batch=64)
    documents = prompt(1, 300)
    d.add("pin", documents, max_tokens=0, priority=10, pin=True)
    d.add("chat", documents + prompt(2, 10), max_tokens=4, priority=10)
    d.step()
    heard = [x for x in d.of("chat") if x.phase is Phase.PREFILLING]
    assert heard and heard[-1].progress == (64, 310)  # the pin's first 64 tokens of its 310
    d.run(lambda: any(x.finished for x in d.of("chat")))
    assert [x.phase for x in d.of("chat")][0] is Phase.QUEUED
