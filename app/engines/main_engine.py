"""The app's main engine as one EngineClient, whichever model or server it is on now (the
user may switch while the HTTP server runs): every call goes to the engine of the moment."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Future

from app.engines.protocol import ManagedEngine
from inference import ChatRequest, DeltaSink, MetricsSnapshot, ModelInfo


class MainEngine:
    def __init__(self, current: Callable[[], ManagedEngine]) -> None:
        self._current = current

    @property
    def engine(self) -> ManagedEngine:
        return self._current()

    @property
    def info(self) -> ModelInfo | None:
        return self._current().info

    def stream(self, chat: ChatRequest, sink: DeltaSink) -> str:
        return self._current().stream(chat, sink)

    def cancel(self, request_id: str) -> None:
        self._current().cancel(request_id)

    def set_priority(self, request_id: str, priority: int) -> None:
        self._current().set_priority(request_id, priority)

    def prepare(self, chat: ChatRequest) -> ChatRequest:
        return self._current().prepare(chat)

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return self._current().count_tokens(texts)

    def text_tokens(self, text: str, parse_special: bool = True) -> list[int]:
        return self._current().text_tokens(text, parse_special)

    def embed(self, inputs: list[str | list[int]]) -> Future:
        return self._current().embed(inputs)

    def metrics(self) -> MetricsSnapshot | None:
        return self._current().metrics()

    def pin_system_prompt(self, text: str) -> object:
        return self._current().pin_system_prompt(text)

    def unpin_system_prompt(self, text: str) -> object:
        return self._current().unpin_system_prompt(text)

    def shutdown(self) -> None:
        """The hub stops its engines; a server that stops does not."""
