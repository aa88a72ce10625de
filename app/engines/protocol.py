"""What the app knows of an engine's life (EngineState) and the interface of the engines it
manages: inference.EngineClient (requests, tokens, embeddings, metrics) and their lifecycle.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from inference import EngineClient

if TYPE_CHECKING:
    from inference import ModelInfo


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


class ManagedEngine(EngineClient, Protocol):
    """An engine the app starts, watches and stops, whichever it is: a local model in a
    process of its own (EngineProcess), a remote OpenAI-compatible server (RemoteEngine),
    or an engine of the pool that starts on demand (PooledEngine). Requests go through
    inference.EngineClient, which this extends."""

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

    def set_threads(self, n_threads: int) -> None:
        """Decode with n_threads CPU threads (local engines share the cores); a remote
        server ignores it."""
        ...
