"""A chat longer than the context, under each overflow policy (a fake byte vocabulary: one
token per byte, so lengths are easy to reason about)."""

from __future__ import annotations

import pytest

from inference.errors import RequestError
from inference.params import ChatRequest, SamplingParams
from inference.tokenizer.chat_template import GEMMA, ChatTemplate
from inference.tokenizer.input_processor import InputProcessor
from tests.support.fake_runner import FakeRunner

N_CTX = 1024
CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def processor(template: str = CHATML) -> InputProcessor:
    return InputProcessor(FakeRunner(n_ctx=N_CTX), n_ctx=N_CTX, template=ChatTemplate(template, "<s>", "</s>"))


def long_chat(turns: int = 40, system: bool = True) -> list[dict]:
    chat = [{"role": "system", "content": "SYSTEM PROMPT"}] if system else []
    for i in range(turns):
        chat += [{"role": "user", "content": f"question {i:02d} " + "q" * 40},
                 {"role": "assistant", "content": f"answer {i:02d} " + "a" * 40}]
    return [*chat, {"role": "user", "content": "THE LAST QUESTION"}]


def prepared(messages: list[dict], overflow: str, max_tokens: int = 100, **kw) -> ChatRequest:
    return processor(kw.pop("template", CHATML)).prepare(
        ChatRequest(messages=tuple(messages), overflow=overflow, sampling=SamplingParams(max_tokens=max_tokens), **kw))


def text(chat: ChatRequest) -> str:
    return bytes(t for t in chat.prompt_tokens or () if t < 256).decode()


def test_stop_refuses_a_chat_longer_than_the_context_and_cuts_nothing() -> None:
    with pytest.raises(RequestError, match="longer than the context|context holds 1024"):
        prepared(long_chat(), "stop")
    short = prepared(long_chat(turns=2), "stop")
    assert short.dropped == (0, 0) and "question 00" in text(short)


def test_drop_oldest_keeps_the_system_prompt_and_the_newest_turns_that_fit() -> None:
    messages = long_chat()
    chat = prepared(messages, "drop_oldest")
    start, count = chat.dropped
    assert start == 1 and count > 0
    assert messages[start + count]["role"] == "user"  # the kept turns open with the user
    assert len(chat.prompt_tokens or ()) + 100 <= N_CTX
    shown = text(chat)
    assert shown.startswith("<|im_start|>system\nSYSTEM PROMPT") and "THE LAST QUESTION" in shown
    assert "question 00" not in shown and messages[start + count]["content"] in shown
    # the fewest turns went: one more kept turn would not have fitted
    one_more = processor().chat_tokens(messages[:1] + messages[start + count - 2:])
    assert len(one_more) + 100 > N_CTX


def test_truncate_middle_keeps_the_first_exchange_too() -> None:
    messages = long_chat()
    chat = prepared(messages, "truncate_middle")
    start, count = chat.dropped
    assert start == 3 and count > 0  # system, first question, first answer
    shown = text(chat)
    assert "SYSTEM PROMPT" in shown and "question 00" in shown and "answer 00" in shown
    assert "question 01" not in shown and "THE LAST QUESTION" in shown
    assert len(chat.prompt_tokens or ()) + 100 <= N_CTX


def test_truncate_middle_without_room_for_the_first_exchange_drops_it_as_drop_oldest() -> None:
    messages = long_chat(turns=12)
    messages[1] = {"role": "user", "content": "huge first question " + "h" * 900}
    chat = prepared(messages, "truncate_middle")
    assert chat.dropped[0] == 1 and "huge first question" not in text(chat)


def test_a_cut_never_leaves_the_assistant_first_for_a_template_that_needs_turns_to_alternate() -> None:
    """Gemma's template has no system role and wants user/assistant turns in turn: every
    cut falls before a user message, and a reply being continued stays last."""
    messages = long_chat(system=False)[:-1]  # ends with an assistant reply, to continue
    chat = prepared(messages, "drop_oldest", template=GEMMA, continue_final=True)
    start, count = chat.dropped
    assert start == 0 and messages[count]["role"] == "user"
    shown = text(chat)
    assert shown.endswith(messages[-1]["content"])  # no end of turn: the reply goes on
    assert shown.count("<start_of_turn>user") == shown.count("<start_of_turn>model")


def test_a_single_message_longer_than_the_context_is_refused_under_every_policy() -> None:
    messages = [{"role": "system", "content": "S"}, {"role": "user", "content": "x" * 2000}]
    for policy in ("drop_oldest", "truncate_middle"):
        with pytest.raises(RequestError, match="context holds 1024"):
            prepared(messages, policy)


def test_an_unknown_policy_is_refused_by_name() -> None:
    with pytest.raises(RequestError, match="overflow must be one of stop, drop_oldest, truncate_middle"):
        prepared(long_chat(turns=1), "summarise")
