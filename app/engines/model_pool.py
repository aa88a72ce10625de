"""Models on demand: a request names its model, the pool loads it within a memory budget,
evicts the least recently used idle model to make room, and unloads a model idle past its
keep-alive. No Qt; used by `chorus serve --models` (app/server/pooled_models.py).

The policy, in one place:
- acquire(name) counts a request in flight on the model at once (a model with requests in
  flight, or waiting for it to load, is busy and never evicted) and loads it on a thread
  of its own if it is not loaded; the lease's future gives the engine once it is up, or the
  load's error (every request that waited for that load gets it).
- Loading needs the model's memory (its estimate: weights + KV cache for its context) to fit
  beside the models loaded and loading. If it does not, the least recently used idle model
  is unloaded, then the next, until it fits; when every other model is busy, the load waits
  for one to go idle (waiting_for_room names it: a batch holding a model for its whole run
  lets go when it sees one). A model larger than the whole budget is refused at acquire.
- A model's keep-alive starts when its last request ends: the latest request's keep_alive
  (Ollama's meaning: 0 unloads at once, a negative value keeps it loaded), else the pool's.
- Local engines running at once split the CPU cores (llama.cpp's threads spin while they
  wait for each other, so more threads than cores makes every engine crawl; router.py).
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Protocol

from inference import EngineClient, ModelInfo, physical_cores

log = logging.getLogger(__name__)

DEFAULT_KEEP_ALIVE_S = 300.0
SWEEP_EVERY_S = 1.0  # how often idle models are checked against their keep-alive
LOAD_JOIN_S = 120.0  # how long shutdown waits for a load under way (llama.cpp must not be loading at exit)


def size_text(n: int) -> str:
    """Bytes in the binary units `--models-memory` takes: 900 MiB, 3.5 GiB."""
    return f"{n / 2**30:.1f} GiB" if n >= 2**30 else f"{n / 2**20:.0f} MiB"


class LoadedEngine(EngineClient, Protocol):
    """What the pool needs of an engine beyond requests: to share the cores, and whether it
    still runs (shutdown is EngineClient's)."""

    def set_threads(self, n_threads: int) -> None: ...

    @property
    def running(self) -> bool: ...


@dataclass(frozen=True)
class PoolModel:
    """A model the pool may load: its name in requests, the memory a load takes (bytes), and
    what the engine factory needs to load it (opaque to the pool: LoadSettings for a real one)."""

    name: str
    memory_bytes: int
    load: object = None


# (model, CPU threads it may use, a callback for the load's progress from 0 to 1) -> its
# engine, loaded; raises if it cannot load.
EngineFactory = Callable[[PoolModel, int, Callable[[float], None]], LoadedEngine]


class ModelState(str, enum.Enum):
    NOT_LOADED = "not loaded"
    LOADING = "loading"
    LOADED = "loaded"
    UNLOADING = "unloading"

    def __str__(self) -> str:
        return self.value


class PoolError(RuntimeError):
    """A model the pool cannot give: one line a person can act on."""


class UnknownModel(PoolError):
    def __init__(self, name: str, served: Sequence[str]) -> None:
        super().__init__(f"model {name!r} is not served here; served: {', '.join(served)}")
        self.name, self.served = name, tuple(served)


class ModelTooLarge(PoolError):
    """The model cannot fit the budget even alone."""


class ModelLoadFailed(PoolError):
    """The model's load failed; every request that waited for it gets this."""


@dataclass(frozen=True)
class ModelStatus:
    name: str
    state: ModelState
    memory_bytes: int
    in_flight: int  # requests running on it or waiting for it
    info: ModelInfo | None  # what the engine loaded; None unless loaded
    error: str | None  # why its last load failed, until one succeeds
    progress: float | None = None  # of the load under way, 0 to 1; None unless loading


def _outcome() -> Future[LoadedEngine]:
    """A load's outcome, shared by every request that waits for it: marked running, so that
    no waiter can cancel it for the others (asyncio.wrap_future cancels the future it wraps
    when the awaiting task is cancelled)."""
    future: Future[LoadedEngine] = Future()
    future.set_running_or_notify_cancel()
    return future


class _Slot:
    """One model's life in the pool; every field is guarded by the pool's lock."""

    def __init__(self, model: PoolModel) -> None:
        self.model = model
        self.state = ModelState.NOT_LOADED
        self.engine: LoadedEngine | None = None
        self.ready = _outcome()  # the current (or next) load's
        self.reserved = False  # its memory counts against the budget (loading with room, loaded, unloading)
        self.in_flight = 0
        self.last_used = 0.0
        self.keep_alive_s = 0.0
        self.expires_at: float | None = None  # when idle and past it, unloaded; None: never
        self.error: str | None = None
        self.progress = 0.0  # of the load under way (written by the loading thread alone)
        self.waiting = False  # its load waits for room: every model loaded is busy


class Lease:
    """One request's hold on a model: the model stays loaded (never evicted) until release."""

    def __init__(self, pool: ModelPool, slot: _Slot, ready: Future[LoadedEngine]) -> None:
        self._pool, self._slot, self.ready = pool, slot, ready
        self._released = False

    @property
    def name(self) -> str:
        return self._slot.model.name

    def engine(self, timeout: float | None = None) -> LoadedEngine:
        """Blocks until the model is loaded; raises ModelLoadFailed if it cannot be."""
        return self.ready.result(timeout)

    def release(self) -> None:
        """Once, however often it is called."""
        if not self._released:
            self._released = True
            self._pool._release(self._slot)

    def __enter__(self) -> Lease:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


class ModelPool:
    def __init__(self, models: Sequence[PoolModel], make_engine: EngineFactory, budget_bytes: int,
                 keep_alive_s: float = DEFAULT_KEEP_ALIVE_S, cpu_threads: int | None = None,
                 clock: Callable[[], float] = time.monotonic, sweep_every_s: float | None = SWEEP_EVERY_S) -> None:
        """sweep_every_s: how often a thread unloads models idle past their keep-alive;
        None: no thread (a test calls sweep() after moving its clock)."""
        if not models:
            raise ValueError("a model pool needs at least one model")
        self._slots = {model.name: _Slot(model) for model in models}
        self._make_engine = make_engine
        self.budget_bytes = budget_bytes
        self.keep_alive_s = keep_alive_s
        self.cpu_threads = cpu_threads or physical_cores()
        self._clock = clock
        self._lock = threading.Condition()  # notified whenever memory or busyness changes
        self._closed = False
        self._loads: set[threading.Thread] = set()  # loads under way (shutdown waits for them)
        self._stop = threading.Event()
        if sweep_every_s is not None:
            threading.Thread(target=self._sweep_loop, args=(sweep_every_s,), name="model-pool-sweep",
                             daemon=True).start()

    @property
    def names(self) -> list[str]:
        return list(self._slots)

    def model(self, name: str) -> PoolModel | None:
        slot = self._slots.get(name)
        return slot.model if slot is not None else None

    # ----- requests ----------------------------------------------------------------------

    def acquire(self, name: str, keep_alive_s: float | None = None) -> Lease:
        """A lease on the model, loading it if needed (lease.engine() waits for it). Raises
        UnknownModel, or ModelTooLarge for a model that cannot fit the budget even alone."""
        slot = self._slots.get(name)
        if slot is None:
            raise UnknownModel(name, self.names)
        if slot.model.memory_bytes > self.budget_bytes:
            need, budget = size_text(slot.model.memory_bytes), size_text(self.budget_bytes)
            raise ModelTooLarge(f"model {name!r} needs about {need} (weights and KV cache), more than the whole "
                                f"memory budget for models, {budget}; raise the budget or give the model a smaller "
                                "context")
        with self._lock:
            if self._closed:
                raise PoolError("the model pool is shut down")
            slot.in_flight += 1
            slot.last_used = self._clock()
            slot.keep_alive_s = self.keep_alive_s if keep_alive_s is None else keep_alive_s
            if slot.state is ModelState.LOADED and not self._alive(slot):
                self._forget_dead(slot)
            if slot.state is ModelState.NOT_LOADED:
                self._begin_load(slot)
            # UNLOADING: ready is the next load's future; the unload starts it (_unloaded)
            return Lease(self, slot, slot.ready)

    def _release(self, slot: _Slot) -> None:
        with self._lock:
            slot.in_flight -= 1
            slot.last_used = now = self._clock()
            slot.expires_at = now + slot.keep_alive_s if slot.keep_alive_s >= 0 else None
            self._lock.notify_all()  # a load waiting for room may evict this one now
            unload_now = slot.in_flight == 0 and slot.keep_alive_s == 0
        if unload_now:  # keep_alive 0: not a second longer (on a thread: release may be on the event loop)
            threading.Thread(target=self.sweep, name="model-pool-unload", daemon=True).start()

    # ----- what is loaded ----------------------------------------------------------------

    def status(self) -> list[ModelStatus]:
        with self._lock:
            return [ModelStatus(s.model.name, s.state, s.model.memory_bytes, s.in_flight,
                                s.engine.info if s.engine is not None and s.state is ModelState.LOADED else None,
                                s.error, s.progress if s.state is ModelState.LOADING else None)
                    for s in self._slots.values()]

    def loaded(self) -> dict[str, LoadedEngine]:
        """The engines loaded now, by model name (for metrics)."""
        with self._lock:
            return {s.model.name: s.engine for s in self._slots.values()
                    if s.state is ModelState.LOADED and s.engine is not None}

    def waiting_for_room(self) -> list[str]:
        """The models whose load waits for a busy model to go idle (a holder that can let
        go, as a batch between its requests, looks here)."""
        with self._lock:
            return [s.model.name for s in self._slots.values() if s.waiting]

    def used_bytes(self) -> int:
        with self._lock:
            return self._reserved_bytes()

    def sweep(self) -> list[str]:
        """Unload every idle model past its keep-alive (and wait for it); returns their names."""
        now = self._clock()
        with self._lock:
            expired = [s for s in self._slots.values()
                       if s.state is ModelState.LOADED and s.in_flight == 0
                       and s.expires_at is not None and s.expires_at <= now]
            engines = [self._begin_unload(s) for s in expired]
        for slot, engine in zip(expired, engines, strict=True):
            log.info("unloading %s: idle past its keep-alive", slot.model.name)
            self._unload(slot, engine)
        return [s.model.name for s in expired]

    def shutdown(self) -> None:
        """Unload every model; a load under way is waited for and its engine stopped."""
        self._stop.set()
        with self._lock:
            self._closed = True
            slots = [s for s in self._slots.values() if s.state is ModelState.LOADED]
            engines = [self._begin_unload(s) for s in slots]
            loads = list(self._loads)
            self._lock.notify_all()
        for slot, engine in zip(slots, engines, strict=True):
            self._unload(slot, engine)
        for load in loads:
            load.join(LOAD_JOIN_S)

    # ----- loading and unloading (the lock held where said) ------------------------------

    def _begin_load(self, slot: _Slot) -> None:
        """Lock held."""
        slot.state = ModelState.LOADING
        if slot.ready.done():  # a finished load's: this load gets a fresh one
            slot.ready = _outcome()
        load = threading.Thread(target=self._load, args=(slot,), name=f"model-load-{slot.model.name}", daemon=True)
        self._loads.add(load)
        load.start()

    def _load(self, slot: _Slot) -> None:
        try:
            self._load_within_budget(slot)
        finally:
            with self._lock:
                self._loads.discard(threading.current_thread())

    def _load_within_budget(self, slot: _Slot) -> None:
        if not self._make_room(slot):
            return
        with self._lock:
            share = self._thread_share()
            slot.progress = 0.0
        name = slot.model.name

        def progress(fraction: float) -> None:  # on the loading thread; a float is written whole
            slot.progress = fraction

        try:
            log.info("loading %s (%s)", name, size_text(slot.model.memory_bytes))
            engine = self._make_engine(slot.model, share, progress)
        except Exception as exc:  # noqa: BLE001 - whatever stops the load ends the requests that waited
            log.error("model %s could not be loaded: %s", name, exc)
            with self._lock:
                slot.state, slot.reserved, slot.error = ModelState.NOT_LOADED, False, str(exc)
                ready = slot.ready
                self._lock.notify_all()
            ready.set_exception(ModelLoadFailed(f"model {name!r} could not be loaded: {exc}"))
            return
        with self._lock:
            closed = self._closed
            if not closed:
                slot.state, slot.engine, slot.error = ModelState.LOADED, engine, None
                slot.last_used = now = self._clock()
                slot.expires_at = now + slot.keep_alive_s if slot.keep_alive_s >= 0 else None
            ready = slot.ready
        if closed:  # the pool shut down while it loaded
            engine.shutdown()
            ready.set_exception(PoolError("the model pool is shut down"))
            return
        ready.set_result(engine)
        self._share_cpu()

    def _make_room(self, slot: _Slot) -> bool:
        """Reserve the model's memory, unloading LRU idle models first; False (and the load
        abandoned) if every request for it went away while it waited, or the pool closed."""
        with self._lock:
            while True:
                if self._closed or slot.in_flight == 0:
                    slot.state = ModelState.NOT_LOADED
                    slot.ready.set_exception(PoolError(f"the load of {slot.model.name!r} was abandoned"))
                    return False
                if self._reserved_bytes() + slot.model.memory_bytes <= self.budget_bytes:
                    slot.reserved = True
                    return True
                victim = self._least_recently_used_idle()
                if victim is None:  # all busy: wait for one to go idle (or unload)
                    slot.waiting = True
                    try:
                        self._lock.wait()
                    finally:
                        slot.waiting = False
                    continue
                engine = self._begin_unload(victim)
                self._lock.release()
                try:
                    log.info("unloading %s (idle longest) to make room for %s", victim.model.name, slot.model.name)
                    self._unload(victim, engine)
                finally:
                    self._lock.acquire()

    def _least_recently_used_idle(self) -> _Slot | None:
        """Lock held."""
        idle = [s for s in self._slots.values() if s.state is ModelState.LOADED and s.in_flight == 0]
        return min(idle, key=lambda s: s.last_used, default=None)

    @staticmethod
    def _alive(slot: _Slot) -> bool:
        try:
            return slot.engine is not None and bool(slot.engine.running)
        except Exception:  # noqa: BLE001 - an engine that cannot say is not serving
            return False

    def _forget_dead(self, slot: _Slot) -> None:
        """Lock held: a loaded model whose engine stopped by itself (its thread died): let go,
        so the request that found it loads it again instead of failing on a dead engine."""
        log.warning("the engine of %s stopped by itself: loading it again", slot.model.name)
        engine, slot.engine = slot.engine, None
        slot.state, slot.reserved = ModelState.NOT_LOADED, False
        if slot.ready.done():
            slot.ready = _outcome()
        if engine is not None:  # whatever it still holds (a stopped engine's shutdown returns at once)
            threading.Thread(target=self._stop_quietly, args=(slot.model.name, engine),
                             name="model-pool-dead", daemon=True).start()

    @staticmethod
    def _stop_quietly(name: str, engine: LoadedEngine) -> None:
        try:
            engine.shutdown()
        except Exception:  # noqa: BLE001 - it is gone either way
            log.info("stopping the dead engine of %s: it had stopped already", name)

    def _begin_unload(self, slot: _Slot) -> LoadedEngine:
        """Lock held: the slot is UNLOADING (its memory still counted until the engine is
        gone); requests that come meanwhile wait for the load that follows."""
        assert slot.engine is not None
        engine, slot.engine = slot.engine, None
        slot.state = ModelState.UNLOADING
        slot.ready = _outcome()
        return engine

    def _unload(self, slot: _Slot, engine: LoadedEngine) -> None:
        try:
            engine.shutdown()
        except Exception:
            log.exception("stopping the engine of %s failed", slot.model.name)
        with self._lock:
            slot.state, slot.reserved = ModelState.NOT_LOADED, False
            if slot.in_flight > 0 and not self._closed:  # asked for while it unloaded
                self._begin_load(slot)
            self._lock.notify_all()
        self._share_cpu()

    def _reserved_bytes(self) -> int:
        return sum(s.model.memory_bytes for s in self._slots.values() if s.reserved)

    def _thread_share(self) -> int:
        """Lock held: each engine's share of the cores, counting those loaded and loading."""
        running = sum(1 for s in self._slots.values() if s.reserved)
        return max(1, self.cpu_threads // max(1, running))

    def _share_cpu(self) -> None:
        with self._lock:
            share = self._thread_share()
            engines = [s.engine for s in self._slots.values() if s.state is ModelState.LOADED and s.engine is not None]
        for engine in engines:
            try:
                engine.set_threads(share)
            except Exception as exc:  # noqa: BLE001 - an engine stopping meanwhile keeps its threads
                log.debug("could not set threads: %s", exc)

    def _sweep_loop(self, every_s: float) -> None:
        while not self._stop.wait(every_s):
            try:
                self.sweep()
            except Exception:
                log.exception("unloading idle models failed")
