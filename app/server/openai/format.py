"""OpenAI's response objects, built from what the engine reported: completions, chunks,
usage. Pure functions of their inputs; the two APIs (chat and raw text) differ only in
object names and where the text goes."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from app.chats.reasoning import split_reasoning
from app.engines.finish import openai_finish_reason
from app.server.calls.reply import ChoiceTally
from inference import FinishReason


@dataclass(frozen=True)
class Api:
    """Which of OpenAI's two generation APIs a call uses."""

    chat: bool
    id_prefix: str = field(init=False)
    object_name: str = field(init=False)
    chunk_name: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "id_prefix", "chatcmpl-" if self.chat else "cmpl-")
        object.__setattr__(self, "object_name", "chat.completion" if self.chat else "text_completion")
        object.__setattr__(self, "chunk_name", "chat.completion.chunk" if self.chat else "text_completion")


CHAT = Api(chat=True)
TEXT = Api(chat=False)


def usage(tallies: list[ChoiceTally], prompt_tokens: int | None) -> dict:
    """prompt_tokens once (the choices share the prompt), completion tokens of all."""
    prompt = next((t.prompt_tokens for t in tallies if t.prompt_tokens is not None), prompt_tokens) or 0
    completion = sum(t.completion_tokens for t in tallies)
    totals: dict = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
    reasoning = sum(t.reasoning.reasoning_tokens for t in tallies)
    if reasoning:  # OpenAI's place for them; part of completion_tokens
        totals["completion_tokens_details"] = {"reasoning_tokens": reasoning}
    return totals


def finish_reason(reason: FinishReason | None) -> str | None:
    return None if reason is None else openai_finish_reason(reason)


def completion(api: Api, call_id: str, model: str, tallies: list[ChoiceTally], prompt_tokens: int | None,
               with_logprobs: bool = False) -> dict:
    choices = []
    for index, tally in enumerate(tallies):
        logprobs = logprobs_of(api, tally.logprobs) if with_logprobs else None
        choice: dict = {"index": index, "finish_reason": finish_reason(tally.finish), "logprobs": logprobs}
        if api.chat:
            choice["message"] = message(tally.text)
        else:
            choice["text"] = tally.text
        choices.append(choice)
    return {"id": api.id_prefix + call_id, "object": api.object_name, "created": int(time.time()), "model": model,
            "choices": choices, "usage": usage(tallies, prompt_tokens)}


def message(text: str) -> dict:
    """A whole chat reply: its reasoning, if it has any, as reasoning_content (as
    llama.cpp's server and vLLM return it), content the answer alone."""
    split = split_reasoning(text)
    if split.reasoning is None:
        return {"role": "assistant", "content": text}
    return {"role": "assistant", "content": split.answer, "reasoning_content": split.reasoning}


def chunk(api: Api, call_id: str, model: str, index: int, text: str | None, finish: str | None,
          role: bool = False, with_usage: bool = False, logprobs: dict | None = None,
          reasoning: str | None = None) -> dict:
    """One streamed piece of one choice. with_usage: the call asked for usage, so every
    chunk carries "usage": null and the last one the totals (OpenAI's shape). reasoning: the
    chat reply's reasoning in this piece, sent as delta.reasoning_content."""
    choice: dict = {"index": index, "finish_reason": finish, "logprobs": logprobs}
    if api.chat:
        delta: dict = {"role": "assistant", "content": ""} if role else {}
        if reasoning:
            delta["reasoning_content"] = reasoning
        if text:
            delta["content"] = text
        choice["delta"] = delta
    else:
        choice["text"] = text or ""
    payload = {"id": api.id_prefix + call_id, "object": api.chunk_name, "created": int(time.time()), "model": model,
               "choices": [choice]}
    if with_usage:
        payload["usage"] = None
    return payload


def usage_chunk(api: Api, call_id: str, model: str, usage_totals: dict) -> dict:
    return {"id": api.id_prefix + call_id, "object": api.chunk_name, "created": int(time.time()), "model": model,
            "choices": [], "usage": usage_totals}


# ----- log-probabilities -----------------------------------------------------------------------
# Entries are the engine's TokenLogprob (token, bytes, logprob, top: TopLogprob...), one
# per generated token.


def chat_logprobs(entries) -> dict:
    """The chat API's shape: {"content": [{token, logprob, bytes, top_logprobs}]}."""
    return {"content": [{**_logprob(e), "top_logprobs": [_logprob(t) for t in e.top]} for e in entries],
            "refusal": None}


def _logprob(entry) -> dict:
    return {"token": entry.token, "logprob": entry.logprob, "bytes": list(entry.bytes)}


def text_logprobs(entries, offset: int = 0) -> dict:
    """The completions API's older shape: parallel lists, alternatives as {token: logprob},
    text_offset counting characters from the start of the reply (offset: where these
    entries start)."""
    offsets = []
    for entry in entries:
        offsets.append(offset)
        offset += len(entry.token)
    return {"tokens": [e.token for e in entries], "token_logprobs": [e.logprob for e in entries],
            "top_logprobs": [{t.token: t.logprob for t in e.top} for e in entries], "text_offset": offsets}


def logprobs_of(api: Api, entries, offset: int = 0) -> dict:
    return chat_logprobs(entries) if api.chat else text_logprobs(entries, offset)
