"""A chat's title never delays a chat (issue 39, defect 7: "another message waited over 3 s
behind the chat-title job"), on the real model: the engine has one sequence, the title job
holds it and is writing, and the user's message sent then starts at once."""

from __future__ import annotations

import threading

import pytest

from app.chats.titles import title_request
from inference.outputs import Delta, Phase
from inference.params import PRIORITY_VISIBLE_TAB, ChatRequest, SamplingParams

WAIT_S = 300


@pytest.mark.model
def test_a_chat_sent_while_a_title_is_written_is_not_queued_behind_it(make_engine) -> None:
    engine = make_engine(n_ctx=4096, n_seq_max=1)  # one sequence: the title holds the only one
    events: list[tuple[str, Delta]] = []
    lock = threading.Lock()
    chat_done = threading.Event()
    title_done = threading.Event()
    sent = threading.Event()
    chat = ChatRequest(messages=({"role": "user", "content": "Say hello."},),
                       sampling=SamplingParams.greedy(max_tokens=4), priority=PRIORITY_VISIBLE_TAB,
                       request_id="chat")

    def on_chat(delta: Delta) -> None:
        with lock:
            events.append(("chat", delta))
        if delta.finished:
            chat_done.set()

    def on_title(delta: Delta) -> None:
        with lock:
            events.append(("title", delta))
        if delta.token_ids and not sent.is_set():
            sent.set()  # the user sends now, while the title is being written (this thread: before its next step)
            engine.stream(chat, on_chat)
        if delta.finished:
            title_done.set()

    engine.stream(title_request("What are the health benefits of green tea?", "title-1"), on_title)
    assert chat_done.wait(WAIT_S) and title_done.wait(WAIT_S)
    with lock:
        order = list(events)
    chat_first_token = next(i for i, (who, d) in enumerate(order) if who == "chat" and d.token_ids)
    title_end = next(i for i, (who, d) in enumerate(order) if who == "title" and d.finished)
    assert chat_first_token < title_end, "the chat waited for the title to finish"
    title_tokens_before = [d for who, d in order[:chat_first_token] if who == "title" and d.token_ids]
    assert len(title_tokens_before) == 1  # the title wrote nothing more once the chat came
    first = next(d for who, d in order if who == "chat")
    assert first.phase is not Phase.QUEUED or first.progress == (1, first.progress[1])  # ahead of the title
    assert order[title_end][1].finish_reason is not None and order[title_end][1].error is None
