"""Which engine serves a conversation, when conversations may use different models.

Chats on the main model use the main engine (one batch for all of them). A conversation on
another model (a compare pane, or a chat continued from one) holds an engine from the pool
until it lets go; local engines running together split the CPU cores. No Qt here.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from app.engines.pool import EnginePool, PooledEngine
from app.engines.process import EngineProcess
from app.engines.protocol import EngineState, EngineStatus, ManagedEngine, StateCallback
from app.engines.remote import RemoteEndpoint, RemoteEngine
from app.engines.sources import REMOTE, ModelSource
from inference import LoadSettings, MetricsSnapshot


class EngineRouter:
    def __init__(
        self,
        main_engine: Callable[[], ManagedEngine],
        local_settings: Callable[[], LoadSettings],
        on_state: Callable[[ModelSource, EngineState], None],
    ) -> None:
        self._main_engine = main_engine
        self._local_settings = local_settings
        self.cpu_threads = local_settings().threads()  # what one engine alone gets
        self.remote_keys: dict[str, str] = {}  # base URL -> API key, for this session only
        self._metrics: dict[str, MetricsSnapshot] = {}
        self._held: dict[int, ModelSource] = {}  # conversation -> the pool engine it holds
        self._lock = threading.Lock()
        self.pool = EnginePool(self._make_engine, on_state)
        # What a pool engine loads its model with, from the main engine's settings with the
        # model's path: the app puts that model's own library defaults on.
        self.settings_for: Callable[[LoadSettings], LoadSettings] = lambda settings: settings

    def engine_for(self, conversation_id: int, source: ModelSource) -> PooledEngine:
        """The pool engine of a conversation on a model other than the main one; held until
        the conversation is released (its tab or pane closed) or asks for another model."""
        with self._lock:
            held = self._held.get(conversation_id)
        if held is not None and held.key == source.key:
            engine = self.pool.get(source)
            if engine is not None and engine.status is not EngineStatus.FAILED:
                return engine
        self.release(conversation_id)
        engine = self.pool.acquire(source)
        with self._lock:
            self._held[conversation_id] = source
        self._share_cpu()
        return engine

    def release(self, conversation_id: int) -> None:
        with self._lock:
            source = self._held.pop(conversation_id, None)
        if source is None:
            return
        self.pool.release(source)
        if self.pool.get(source) is None:
            with self._lock:
                self._metrics.pop(source.label, None)
            self._share_cpu()

    def local_paths(self) -> set[Path]:
        """The model files the conversations' pool engines hold."""
        with self._lock:
            return {Path(source.path) for source in self._held.values() if source.kind != REMOTE}

    def metrics(self) -> dict[str, MetricsSnapshot]:
        """The latest snapshot of each pool engine (read from the monitor thread)."""
        with self._lock:
            return dict(self._metrics)

    def shutdown(self) -> None:
        self.pool.shutdown()

    # ----- CPU sharing -------------------------------------------------------------------

    def _local_engines(self) -> list[ManagedEngine]:
        engines: list[ManagedEngine] = [self._main_engine(), *self.pool.engines()]
        return [engine for engine in engines if engine.is_local]

    def _cpu_share(self, engines: int) -> int:
        return max(1, self.cpu_threads // max(1, engines))

    def _share_cpu(self) -> None:
        """Engines running at once split the CPU's cores between them. llama.cpp's threads
        spin while they wait for each other, so more threads than cores makes every engine
        crawl (`chorus bench-engines`: about 3x the total tokens/s with the cores split)."""
        engines = self._local_engines()
        share = self._cpu_share(len(engines))
        for engine in engines:
            engine.set_threads(share)  # a no-op for one that has that many already

    def _make_engine(self, source: ModelSource, on_state: StateCallback) -> ManagedEngine:
        if source.kind == REMOTE:
            endpoint = RemoteEndpoint(source.base_url, source.model, self.remote_keys.get(source.base_url))
            return RemoteEngine(endpoint, on_state)
        share = self._cpu_share(len(self._local_engines()) + 1)
        settings = self.settings_for(
            replace(self._local_settings(), model_path=Path(source.path), n_threads=share, n_threads_batch=share))

        def metrics(snapshot: MetricsSnapshot, label=source.label) -> None:
            with self._lock:
                self._metrics[label] = snapshot

        return EngineProcess(settings, on_metrics=metrics, on_state=on_state)
