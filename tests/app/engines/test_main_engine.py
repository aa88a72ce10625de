"""The app's main engine as the HTTP server sees it (app/engines/main_engine.py): every call
goes to the engine of the moment, so a switch of model or server while clients are served
needs nothing of them. A scripted engine (fast)."""

from __future__ import annotations

from concurrent.futures import Future

from app.engines.main_engine import MainEngine
from inference import ChatRequest, Delta, FinishReason, RequestHandle


class Scripted:
    def __init__(self, name: str) -> None:
        self.name = name
        self.info = None
        self.cancelled: list[str] = []

    def stream(self, chat: ChatRequest, sink) -> str:
        sink(Delta(str(chat.request_id), text=self.name))
        sink(Delta.finished_with(str(chat.request_id), FinishReason.STOP))
        return str(chat.request_id)

    def cancel(self, request_id: str) -> None:
        self.cancelled.append(request_id)

    def count_tokens(self, texts):
        return [len(self.name)] * len(texts)

    def embed(self, inputs) -> Future:
        done: Future = Future()
        done.set_result(self.name)
        return done


def test_every_call_goes_to_the_engine_of_the_moment():
    current = {"engine": Scripted("first")}
    main = MainEngine(lambda: current["engine"])
    chat = ChatRequest(messages=({"role": "user", "content": "hi"},))
    assert RequestHandle.open(main, chat).result(1).text == "first"
    current["engine"] = Scripted("second model")
    handle = RequestHandle.open(main, chat)
    assert handle.result(1).text == "second model"
    assert main.count_tokens(["a", "b"]) == [12, 12] and main.embed(["a"]).result() == "second model"
    handle.cancel()
    assert current["engine"].cancelled == [handle.request_id]
