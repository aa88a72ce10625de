"""What one item of a job asks the engine, and what its answer is: the runner (runner.py)
is the same for every kind of job; a Work says how an item becomes engine requests and how
their deltas become the item's result. TemplateWork is `chorus batch`'s (a prompt template
over a row); the server's OpenAI batches bring their own (app/server/batches/work.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from app.jobs.spec import ItemError, JobSpec
from inference import ChatRequest, Delta, FinishReason
from storage import ItemRecord, ItemResult


class ItemRun(Protocol):
    """One item under way: its engine requests (each with its own request_id, at spare
    priority), fed their deltas; its result once every request has finished."""

    requests: Sequence[ChatRequest]

    def add(self, index: int, delta: Delta) -> None:
        """A delta of requests[index]."""
        ...

    def result(self, seconds: float) -> ItemResult: ...


class Work(Protocol):
    def start(self, item: ItemRecord, request_id: str) -> ItemRun | ItemResult:
        """The item's run, or its result already (it cannot run: the reason is its error).
        Called off the runner's lock: it may block (tokenize, prepare)."""
        ...


class TemplateWork:
    def __init__(self, spec: JobSpec) -> None:
        self.spec = spec

    def start(self, item: ItemRecord, request_id: str) -> ItemRun | ItemResult:
        try:
            return TextRun(self.spec.request(item.fields, request_id))
        except (ItemError, ValueError) as bad:
            return ItemResult(answer=None, finish_reason=None, error=str(bad))


class TextRun:
    """One request; the answer is its text."""

    def __init__(self, chat: ChatRequest) -> None:
        self.requests: Sequence[ChatRequest] = (chat,)
        self._parts: list[str] = []
        self._last: Delta | None = None

    def add(self, index: int, delta: Delta) -> None:
        self._parts.append(delta.text)
        if delta.finished:
            self._last = delta

    def result(self, seconds: float) -> ItemResult:
        assert self._last is not None
        return text_result(self._last, "".join(self._parts), seconds)


def text_result(delta: Delta, text: str, seconds: float) -> ItemResult:
    stats = delta.stats
    reason = delta.finish_reason.value if delta.finish_reason else None
    failed = delta.finish_reason in (FinishReason.ERROR, FinishReason.CANCELLED, FinishReason.INTERRUPTED)
    return ItemResult(answer=None if failed else text, finish_reason=reason,
                      prompt_tokens=stats.prompt_tokens if stats else 0,
                      completion_tokens=stats.generated_tokens if stats else 0, seconds=seconds,
                      error=(delta.error or reason) if failed else None)
