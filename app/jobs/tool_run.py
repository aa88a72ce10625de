"""One item of a job with tools: the chat's tool loop (app/tools/agent.ToolLoop, the one
state machine the window and the terminal drive) run blocking on a thread of the job's
runner, every call approved (choosing a job's tools approves them), each model turn a
request at the engine's spare priority in the job's lane. Its result is the last turn's
text, the tokens of every turn, and the exchange (the turns, calls and results after the
prompt, in OpenAI's message shape) to be stored and exported beside it."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import replace
from typing import TYPE_CHECKING

from app.jobs.results import CUT, text_result
from app.jobs.tools import JobTools
from inference import (
    SPARE_PRIORITY,
    ChatRequest,
    Delta,
    EngineClient,
    EngineError,
    MetricsSnapshot,
    ModelInfo,
    Owner,
)
from storage import ItemResult

if TYPE_CHECKING:
    from app.tools import Toolbox

class ItemEngine:
    """The engine as one item's loop sees it: every request tagged with the job's owner (its
    lane in the metrics), named after the item (prefix-t1, -t2: a turn each, as a job's other
    requests are named) and tokenized on the item's thread, its id kept so that stop() can
    cancel it; after stop() no request starts (the loop ends with EngineError)."""

    def __init__(self, client: EngineClient, owner: Owner, prefix: str) -> None:
        self.client, self.owner, self.prefix = client, owner, prefix
        self._lock = threading.Lock()
        self._open: set[str] = set()
        self._names: dict[str, str] = {}  # the loop's id of a turn -> the engine's
        self.stopped = False
        self.cut = False  # a turn was cancelled, interrupted or failed

    @property
    def info(self) -> ModelInfo | None:
        return self.client.info

    def stream(self, chat: ChatRequest, sink: Callable[[Delta], None]) -> str:
        with self._lock:
            request_id = self._names[chat.request_id or ""] = f"{self.prefix}-t{len(self._names) + 1}"
        # RequestError (longer than the context): the item fails with it
        chat = self.client.prepare(replace(chat, owner=self.owner, request_id=request_id))
        with self._lock:
            if self.stopped:
                raise EngineError("the job stopped")
            self._open.add(request_id)

        def deliver(delta: Delta) -> None:
            if delta.finished:
                with self._lock:
                    self._open.discard(request_id)
                    self.cut |= delta.finish_reason in CUT
            sink(delta)

        self.client.stream(chat, deliver)  # its deltas carry the engine's id: the loop reads none
        with self._lock:
            late = self.stopped  # stop() came between the check and the stream: it missed this one
        if late:
            self.client.cancel(request_id)
        return request_id

    def cancel(self, request_id: str) -> None:
        self.client.cancel(self._names.get(request_id, request_id))

    # The rest of EngineClient, the engine's own.
    def set_priority(self, request_id: str, priority: int) -> None:
        self.client.set_priority(self._names.get(request_id, request_id), priority)

    def prepare(self, chat: ChatRequest) -> ChatRequest:
        return self.client.prepare(chat)

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return self.client.count_tokens(texts)

    def text_tokens(self, text: str, parse_special: bool = True) -> list[int]:
        return self.client.text_tokens(text, parse_special)

    def embed(self, inputs: list[str | list[int]]) -> Future:
        return self.client.embed(inputs)

    def metrics(self) -> MetricsSnapshot | None:
        return self.client.metrics()

    def pin_system_prompt(self, text: str) -> object:
        return self.client.pin_system_prompt(text)

    def unpin_system_prompt(self, text: str) -> object:
        return self.client.unpin_system_prompt(text)

    def shutdown(self) -> None:
        """The item's loop ends; the engine is the job's host's to stop."""
        self.stop()

    def stop(self) -> None:
        with self._lock:
            self.stopped = True
            open_requests = list(self._open)
        for request_id in open_requests:
            self.client.cancel(request_id)


class ToolRun:
    """An item with tools, for the runner to drive on a thread of its own: its first request
    (the template's prompt and sampling), the job's running toolbox and its tool settings."""

    def __init__(self, chat: ChatRequest, toolbox: Toolbox, tools: JobTools) -> None:
        self.chat, self.toolbox, self.tools = chat, toolbox, tools

    def run(self, engine: ItemEngine, seconds: Callable[[], float]) -> ItemResult:
        """The item's loop to its end (blocking); EngineError when the engine refused a turn
        or the job stopped. seconds: a clock of the item's time so far."""
        from app.tools import ToolLoop, TurnDone, always_allow
        from app.tools.formats import format_of_engine

        prompt = list(self.chat.messages)
        messages = list(prompt)
        loop = ToolLoop(engine, self.toolbox, messages, self.chat.sampling, choice=self.tools.choice,
                        approve=always_allow, max_rounds=self.tools.max_rounds, priority=SPARE_PRIORITY,
                        tool_format=format_of_engine(engine))
        turns = [event for event in loop.run() if isinstance(event, TurnDone)]
        if not turns:
            raise EngineError("the job stopped")
        result = text_result(turns[-1].last, turns[-1].text, seconds())
        read = [turn.last.stats for turn in turns if turn.last.stats is not None]
        return replace(result, prompt_tokens=sum(s.prompt_tokens for s in read),
                       completion_tokens=sum(s.generated_tokens for s in read),
                       exchange=[openai_shape(m) for m in messages[len(prompt):]])


def openai_shape(message: dict) -> dict:
    """A message of the loop as OpenAI's API writes it: without the loop's own "written"
    (a call's text as the model wrote it, kept for the KV of the next turn)."""
    return {key: value for key, value in message.items() if key != "written"}
