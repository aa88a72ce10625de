"""The one interface to an engine, wherever it runs (vLLM's EngineCoreClient is the model):
the engine in this process (inference.core.engine.Engine), an engine in a process of its own
(app/engines/process.py: the desktop's, so that a llama.cpp abort never ends the window), or a
remote OpenAI-compatible server (app/engines/remote.py). The window, the HTTP server, the
terminal and the tool loop all call an engine through it.

A request's deltas go to the sink given with it (registered once, before it starts), on
the thread that delivers them, up to its finished delta. `RequestHandle.open(client, chat)`
makes a handle to iterate or wait on from any client.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Protocol

from inference.core.metrics import MetricsSnapshot
from inference.outputs import Delta, ModelInfo
from inference.params import ChatRequest

DeltaSink = Callable[[Delta], None]


class EngineClient(Protocol):
    @property
    def info(self) -> ModelInfo | None:
        """What the engine loaded (its context, its chat template, its llama.cpp build); None
        while it loads, or for a server's model this process cannot see."""
        ...

    def stream(self, chat: ChatRequest, sink: DeltaSink) -> str:
        """Start a request whose deltas go to sink; returns its id (chat.request_id, or a new
        one). An engine that cannot take it ends it at once with an error delta."""
        ...

    def cancel(self, request_id: str) -> None: ...

    def set_priority(self, request_id: str, priority: int) -> None:
        """Raise or lower a request while it waits or runs (values in inference/params.py);
        a no-op once it finished, and for a server, which orders its own queue."""
        ...

    def prepare(self, chat: ChatRequest) -> ChatRequest:
        """The chat rendered, tokenized and checked (prompt_tokens set), its grammar compiled,
        on the calling thread, never the engine's; unchanged where this engine cannot do it
        (a server's). Raises RequestError for a chat the engine would refuse."""
        ...

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Each text's tokens as plain text (what a document costs in a prompt); a server's
        engine guesses from the characters, on the low side."""
        ...

    def text_tokens(self, text: str, parse_special: bool = True) -> list[int]:
        """A raw prompt's tokens (/v1/completions). RequestError for text that cannot fit in
        the context, or where this engine has no tokenizer (a server's)."""
        ...

    def embed(self, inputs: list[str | list[int]]) -> Future:
        """A future of (unit-length vectors, one row an input, the tokens each read)."""
        ...

    def metrics(self) -> MetricsSnapshot | None:
        """The latest snapshot of the engine's counters; None before the first."""
        ...

    def pin_system_prompt(self, text: str) -> object:
        """Keep this system prompt's KV: chats that begin with it start from there (a hint:
        an engine without a cache of its own ignores it)."""
        ...

    def unpin_system_prompt(self, text: str) -> object: ...

    def shutdown(self) -> None:
        """Stop; requests still running end with an error or as cancelled."""
        ...
