"""The chat API's reasoning_content, at the layer that turns engine deltas into the API's
answer and chunks (app/server/openai/reply.py and format.py, through calls/generation.py's
stream loop), fed recorded deltas: a test through the real HTTP server would need a model
that thinks, and the tiny test models do not."""

from __future__ import annotations

import asyncio
import json

from app.server.calls.engine_bridge import ChoiceDelta
from app.server.calls.generation import _events
from app.server.calls.reply import Call, ChoiceTally
from app.server.openai.parsing import chat_generation
from app.server.openai.reply import CHAT, TEXT
from inference.outputs import Delta, FinishReason, Phase
from tests.app.chats.test_reasoning import QWEN3, SPLIT_TAGS


def deltas(texts: list[str], request_id: str = "r1") -> list[Delta]:
    out = [Delta(request_id, text=t, token_ids=(7,), phase=Phase.DECODING) for t in texts]
    out.append(Delta.finished_with(request_id, FinishReason.STOP))
    return out


class Recorded:
    """Choices (engine_bridge.Choices) that hand out recorded deltas."""

    def __init__(self, items: list[ChoiceDelta]) -> None:
        self._items = list(items)

    @property
    def finished(self) -> bool:
        return not self._items

    async def next(self) -> ChoiceDelta:
        return self._items.pop(0)


def call_of(body: dict, n: int = 1) -> Call:
    gen = chat_generation({"model": "m", "messages": [{"role": "user", "content": "2+2?"}], **body}, None)
    return Call("r1", "qwen3", gen, [ChoiceTally() for _ in range(n)])


def streamed(reply, texts: list[str], body: dict | None = None) -> list[dict]:
    call = call_of({"stream": True, **(body or {})})
    items = [ChoiceDelta(0, d) for d in deltas(texts)]
    first = items.pop(0)
    call.tallies[0].add(first.delta)  # as start_stream does

    async def run() -> list[bytes]:
        return [event async for event in _events(reply, call, Recorded(items), first)]

    events = asyncio.run(run())
    assert events[-1] == b"data: [DONE]\n\n"
    return [json.loads(e[len(b"data: "):]) for e in events[:-1]]


def answered(texts: list[str]) -> dict:
    call = call_of({})
    for delta in deltas(texts):
        call.tallies[0].add(delta)
    return CHAT.answer(call)


def test_a_streamed_reply_sends_its_reasoning_as_reasoning_content_and_the_answer_as_content():
    chunks = streamed(CHAT, QWEN3, {"stream_options": {"include_usage": True}})
    pieces = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
    reasoning = "".join(p.get("reasoning_content", "") for p in pieces)
    content = "".join(p.get("content", "") for p in pieces)
    assert reasoning == "Okay, the user is asking what 2+2 is.\n"
    assert content == "2 + 2 = **4**."
    assert not any("<think>" in p.get("content", "") + p.get("reasoning_content", "") for p in pieces)
    # No chunk carries both, and none is empty but the role chunk and the finish chunk.
    assert all(not ("content" in p and "reasoning_content" in p and p["content"]) for p in pieces)
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop"
    usage = chunks[-1]["usage"]
    assert usage["completion_tokens"] == 27 and usage["completion_tokens_details"] == {"reasoning_tokens": 18}


def test_tags_split_across_chunks_never_leak_into_either_field():
    pieces = [c["choices"][0]["delta"] for c in streamed(CHAT, SPLIT_TAGS)]
    assert "".join(p.get("reasoning_content", "") for p in pieces) == "Okay, the user is asking what 2+2 is.\n"
    assert "".join(p.get("content", "") for p in pieces) == "2 + 2 = **4**."


def test_a_reply_cut_while_thinking_streams_reasoning_only():
    pieces = [c["choices"][0]["delta"] for c in streamed(CHAT, ["<think>", "Let me", " count", " the", " </"])]
    assert "".join(p.get("reasoning_content", "") for p in pieces) == "Let me count the </"
    assert all(not p.get("content") for p in pieces)


def test_a_reply_without_reasoning_is_unchanged():
    pieces = [c["choices"][0]["delta"] for c in streamed(CHAT, ["Hello", "!", " <b>", "hi"])]
    assert "".join(p.get("content", "") for p in pieces) == "Hello! <b>hi"
    assert not any("reasoning_content" in p for p in pieces)
    body = answered(["Hello", "!"])
    assert body["choices"][0]["message"] == {"role": "assistant", "content": "Hello!"}
    assert "completion_tokens_details" not in body["usage"]


def test_a_whole_answer_has_message_reasoning_content():
    body = answered(QWEN3)
    message = body["choices"][0]["message"]
    assert message == {"role": "assistant", "content": "2 + 2 = **4**.",
                       "reasoning_content": "Okay, the user is asking what 2+2 is."}
    assert body["usage"]["completion_tokens_details"] == {"reasoning_tokens": 18}


def test_the_completions_api_keeps_the_raw_text():
    chunks = streamed(TEXT, QWEN3)
    assert "".join(c["choices"][0]["text"] for c in chunks if c["choices"]) == "".join(QWEN3)
