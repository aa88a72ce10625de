"""Priorities that follow the user, on the real model (issue 12): 12 chats queued on 4
sequences; the one the user switches to is raised with Engine.set_priority and samples its
first token before any chat that was queued ahead of it starts, and all 12 finish."""

from __future__ import annotations

import threading

import pytest

from inference.outputs import Delta, Phase
from inference.params import PRIORITY_TAB, PRIORITY_VISIBLE_TAB, ChatRequest, SamplingParams

WAIT_S = 300


@pytest.mark.model
def test_the_chat_switched_to_starts_before_those_queued_ahead_and_all_finish(make_engine) -> None:
    engine = make_engine(n_ctx=4096, n_seq_max=4)
    events: list[tuple[str, Phase, bool]] = []  # (request, phase, sampled a token), in order
    lock = threading.Lock()
    sampled_one = threading.Event()

    def record(delta: Delta) -> None:
        with lock:
            events.append((delta.request_id, delta.phase, bool(delta.token_ids)))
        if delta.token_ids:
            sampled_one.set()

    sampling = SamplingParams.greedy(max_tokens=8)
    handles = []
    for i in range(12):
        tokens = engine.text_tokens(f"Chat number {i}: tell me about the number {i} in a few words. " * 3)
        chat = ChatRequest(prompt_tokens=tuple(tokens), sampling=sampling, priority=PRIORITY_TAB, request_id=f"c{i}")
        handles.append(engine.submit(chat, on_delta=record))
    # The first chats are running; the user switches to the last one.
    assert sampled_one.wait(WAIT_S)
    engine.set_priority("c11", PRIORITY_VISIBLE_TAB)
    # Commands run in order between steps: this snapshot is taken with the raise applied.
    queued_ahead = engine.call(lambda core: [r.request_id for r in core.scheduler.waiting if r.request_id != "c11"])
    assert queued_ahead, "every chat had started before the switch: nothing to jump"
    for handle in handles:
        handle.result(WAIT_S)  # no request waits forever
    with lock:
        order = list(events)
    first_token = next(i for i, (rid, _, sampled) in enumerate(order) if rid == "c11" and sampled)
    for rid in queued_ahead:
        started = next(i for i, (r, phase, _) in enumerate(order) if r == rid and phase is not Phase.QUEUED)
        assert started > first_token, f"{rid}, queued ahead of the raised chat, started before its first token"
    assert all(len(h.result(1).text) > 0 for h in handles)
