"""The interfaces the app's engines declare, instead of being probed with isinstance.

EngineLike is what the app calls on an engine that serves conversations, whichever it is:
a local model in a process of its own (EngineClient), a remote OpenAI-compatible server
(RemoteEngine), or an engine of the pool that starts on demand (PooledEngine). Deltas do not
come back through it: each engine hands them to the on_delta callback it was built with.

ServedEngine is what the OpenAI-compatible server needs: requests it can stream or wait on.
inference.core.engine.Engine gives it (`chorus serve`), and so does EngineGateway (the app's
engine, whose deltas arrive from another process).
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from inference import ChatRequest, Delta, MetricsSnapshot, ModelInfo, RequestHandle


class EngineStatus(str, enum.Enum):
    """Where an engine is in its life.

    A str Enum so that code still comparing with plain strings (ui/ does, until it is
    migrated) keeps working: EngineStatus.READY == "ready".
    """

    STARTING = "starting"
    READY = "ready"
    CRASHED = "crashed"  # its process died; its requests ended INTERRUPTED
    STOPPED = "stopped"
    FAILED = "failed"  # it could not start: a broken model file, a server that does not answer

    def __str__(self) -> str:  # f"engine {status}" reads "engine ready", as with the old strings
        return self.value


@dataclass(frozen=True, slots=True)
class EngineState:
    """What the app knows about one engine, for status bars, tabs and panes."""

    status: EngineStatus
    info: ModelInfo | None = None
    error: str | None = None
    pid: int | None = None  # of the engine's process; None for a remote server


StateCallback = Callable[[EngineState], None]


class EngineLike(Protocol):
    @property
    def state(self) -> EngineState: ...

    @property
    def is_local(self) -> bool:
        """True for a model on this machine: it takes a share of the CPU cores."""
        ...

    def start(self, wait: bool = True) -> None:
        """Load the model or reach the server; raises if it cannot (and state says why).
        wait=False returns at once and state reports progress."""
        ...

    def submit(self, chat: ChatRequest) -> str:
        """Start a request; returns its id (chat.request_id, or a new one)."""
        ...

    def cancel(self, request_id: str) -> None: ...

    def set_priority(self, request_id: str, priority: int) -> None:
        """Raise or lower a request while it waits or runs (the user switched tabs; values
        in inference/params.py). A no-op once it finished, and for a remote server, which
        orders its own queue."""
        ...

    def pin_system_prompt(self, text: str) -> None:
        """Keep this system prompt's KV cache: chats that begin with it start from there.
        A hint: an engine without a cache of its own ignores it."""
        ...

    def unpin_system_prompt(self, text: str) -> None:
        """Let the cache evict that prompt's KV again (no open chat uses it any more)."""
        ...

    def set_threads(self, n_threads: int) -> None:
        """Decode with n_threads CPU threads (local engines share the cores); a remote
        server ignores it."""
        ...

    def shutdown(self) -> None:
        """Stop; requests still running end with an error or as cancelled."""
        ...


class ServedEngine(Protocol):
    def prepare(self, chat: ChatRequest) -> ChatRequest:
        """Render and tokenize the chat on the calling thread, never the engine's: the
        chat comes back with prompt_tokens set (or unchanged where this engine cannot
        tokenize here). Raises RequestError for a chat the engine would refuse."""
        ...

    def chat_template(self) -> str | None:
        """The chat template source chats are rendered with, None where unknown (a remote
        engine's): it decides the tool format (app/tools/formats)."""
        ...

    def text_tokens(self, text: str, parse_special: bool = True) -> list[int]:
        """A raw prompt's tokens (/v1/completions), on the calling thread. Raises
        RequestError for text that cannot fit in the context."""
        ...

    def submit(self, chat: ChatRequest, on_delta: Callable[[Delta], None] | None = None) -> RequestHandle:
        """on_delta: called with each delta on the thread that delivers it (the server
        moves them onto its event loop), besides the handle's own queue."""
        ...

    def cancel(self, request_id: str) -> None: ...

    def metrics(self, fresh: bool = False) -> MetricsSnapshot: ...

    @property
    def info(self) -> ModelInfo | None:
        """What the engine loaded (its context size for /v1/models); None while loading,
        or for a model this process cannot see (a remote server's)."""
        ...
