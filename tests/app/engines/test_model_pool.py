"""The model pool's policy (app/engines/model_pool.py) with a scripted engine factory: loads
on demand, LRU eviction of idle models only, the budget, keep-alive on a fake clock, load
failures released to every waiter. Fast: no model. The real models are in
tests/app/server/test_models_on_demand.py."""

from __future__ import annotations

import threading

import pytest

from app.engines.model_pool import (
    ModelLoadFailed,
    ModelPool,
    ModelState,
    ModelTooLarge,
    PoolError,
    PoolModel,
    UnknownModel,
)
from tests.support.waiting import wait_until

MB = 1 << 20  # sizes in MiB, as the pool writes them
WAIT = 10.0


class StandIn:
    """An engine as the pool sees it: threads set, shut down once."""

    def __init__(self, name: str, threads: int) -> None:
        self.name, self.threads, self.stopped = name, threads, False
        self.info = None
        self.running = True  # False: its thread died (a real engine's running says so)

    def set_threads(self, n: int) -> None:
        self.threads = n

    def shutdown(self) -> None:
        assert not self.stopped
        self.stopped = True
        self.running = False


class Factory:
    """Loads what it is asked; a name in `fail` raises; a name in `gates` waits for its event."""

    def __init__(self) -> None:
        self.made: list[StandIn] = []
        self.fail: dict[str, str] = {}
        self.gates: dict[str, threading.Event] = {}
        self.entered = threading.Event()  # a load reached the factory

    def __call__(self, model: PoolModel, threads: int, progress) -> StandIn:
        progress(0.5)
        self.entered.set()
        gate = self.gates.get(model.name)
        if gate is not None:
            assert gate.wait(WAIT)
        if model.name in self.fail:
            raise RuntimeError(self.fail[model.name])
        engine = StandIn(model.name, threads)
        self.made.append(engine)
        return engine


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def make_pool(factory, budget_mb=250, keep_alive=300.0, clock=None, sizes=(("a", 100), ("b", 100), ("c", 100)),
              threads=4) -> ModelPool:
    models = [PoolModel(name, size * MB) for name, size in sizes]
    return ModelPool(models, factory, budget_bytes=budget_mb * MB, keep_alive_s=keep_alive, cpu_threads=threads,
                     clock=clock or Clock(), sweep_every_s=None)


def states(pool: ModelPool) -> dict[str, str]:
    return {s.name: s.state.value for s in pool.status()}


def use(pool: ModelPool, name: str, clock: Clock | None = None) -> StandIn:
    """One request on the model, start to end."""
    with pool.acquire(name) as lease:
        engine = lease.engine(WAIT)
    if clock is not None:
        clock.now += 1
    return engine


def test_a_model_loads_on_its_first_request_and_is_reused():
    factory = Factory()
    pool = make_pool(factory)
    assert states(pool) == {"a": "not loaded", "b": "not loaded", "c": "not loaded"}
    first = use(pool, "a")
    assert use(pool, "a") is first and len(factory.made) == 1
    assert states(pool)["a"] == "loaded" and pool.used_bytes() == 100 * MB


def test_the_least_recently_used_idle_model_is_evicted_for_a_load_past_the_budget():
    factory, clock = Factory(), Clock()
    pool = make_pool(factory, clock=clock)
    a = use(pool, "a", clock)
    b = use(pool, "b", clock)
    use(pool, "a", clock)  # a is now the more recent
    c = use(pool, "c", clock)
    assert b.stopped and not a.stopped and not c.stopped
    assert states(pool) == {"a": "loaded", "b": "not loaded", "c": "loaded"}
    assert pool.used_bytes() <= pool.budget_bytes


def test_a_busy_model_is_never_evicted_the_load_waits_for_it_to_go_idle():
    factory, clock = Factory(), Clock()
    pool = make_pool(factory, budget_mb=150, clock=clock)  # one model at a time
    use(pool, "b", clock)  # b: idle, the older
    busy = pool.acquire("a")  # a: in flight, the newer... evicts b
    a = busy.engine(WAIT)
    assert pool.waiting_for_room() == []
    waiting = pool.acquire("c")
    assert not waiting.ready.done()  # a is busy: c waits rather than evicting it
    assert states(pool)["c"] == "loading" and not a.stopped
    # said, for a holder that can let go (a batch between its requests)
    wait_until(lambda: pool.waiting_for_room() == ["c"], "c waits for room", WAIT)
    busy.release()
    c = waiting.engine(WAIT)
    assert a.stopped and not c.stopped and pool.waiting_for_room() == []
    waiting.release()


def test_a_model_that_cannot_fit_alone_is_refused_naming_the_budget():
    pool = make_pool(Factory(), budget_mb=250, sizes=(("a", 100), ("huge", 900)))
    with pytest.raises(ModelTooLarge, match=r"huge.*900 MiB.*budget for models, 250 MiB"):
        pool.acquire("huge")
    assert states(pool)["huge"] == "not loaded"


def test_an_unknown_model_names_those_served():
    pool = make_pool(Factory())
    with pytest.raises(UnknownModel, match="'nope' is not served here; served: a, b, c"):
        pool.acquire("nope")


def test_a_failed_load_fails_every_request_that_waited_and_the_next_request_tries_again():
    factory = Factory()
    factory.fail["a"] = "bad magic"
    factory.gates["a"] = gate = threading.Event()
    pool = make_pool(factory)
    leases = [pool.acquire("a") for _ in range(3)]
    assert states(pool)["a"] == "loading"
    gate.set()
    for lease in leases:
        with pytest.raises(ModelLoadFailed, match="'a' could not be loaded: bad magic"):
            lease.engine(WAIT)
        lease.release()
    status = {s.name: s for s in pool.status()}["a"]
    assert status.state is ModelState.NOT_LOADED and status.error == "bad magic" and pool.used_bytes() == 0
    del factory.fail["a"]
    assert use(pool, "a").name == "a"
    assert {s.name: s for s in pool.status()}["a"].error is None


def test_an_idle_model_is_unloaded_after_its_keep_alive_on_the_clock():
    factory, clock = Factory(), Clock()
    pool = make_pool(factory, keep_alive=300, clock=clock)
    a = use(pool, "a")
    clock.now += 299
    assert pool.sweep() == [] and not a.stopped
    clock.now += 2
    assert pool.sweep() == ["a"] and a.stopped
    assert states(pool)["a"] == "not loaded" and pool.used_bytes() == 0
    again = use(pool, "a")  # loaded again on the next request
    assert again is not a and not again.stopped


def test_a_model_in_use_outlives_its_keep_alive_and_the_clock_starts_when_it_ends():
    clock = Clock()
    pool = make_pool(Factory(), keep_alive=10, clock=clock)
    lease = pool.acquire("a")
    engine = lease.engine(WAIT)
    clock.now += 100
    assert pool.sweep() == []  # busy
    lease.release()
    clock.now += 9
    assert pool.sweep() == [] and not engine.stopped
    clock.now += 2
    assert pool.sweep() == ["a"]


def test_a_request_keep_alive_replaces_the_pools_zero_unloads_at_once_negative_never():
    factory, clock = Factory(), Clock()
    pool = make_pool(factory, keep_alive=300, clock=clock)
    with pool.acquire("a", keep_alive_s=-1) as lease:
        a = lease.engine(WAIT)
    with pool.acquire("b", keep_alive_s=5) as lease:
        b = lease.engine(WAIT)
    clock.now += 10_000
    assert pool.sweep() == ["b"] and b.stopped and not a.stopped
    with pool.acquire("c", keep_alive_s=0) as lease:
        c = lease.engine(WAIT)
    for _ in range(100):  # unloaded on a thread of its own right after the release
        if c.stopped:
            break
        threading.Event().wait(0.05)
    assert c.stopped and states(pool)["c"] == "not loaded"


def test_models_loaded_together_split_the_cores():
    factory, clock = Factory(), Clock()
    pool = make_pool(factory, budget_mb=1000, clock=clock, threads=4)
    a = use(pool, "a", clock)
    assert a.threads == 4
    b = use(pool, "b", clock)
    assert (a.threads, b.threads) == (2, 2)
    c = use(pool, "c", clock)
    assert (a.threads, b.threads, c.threads) == (1, 1, 1)
    clock.now += 1000
    pool.sweep()
    d = use(pool, "a", clock)
    assert d.threads == 4  # alone again


def test_a_request_during_an_unload_waits_for_the_load_that_follows():
    factory, clock = Factory(), Clock()
    pool = make_pool(factory, keep_alive=1, clock=clock)
    a = use(pool, "a")
    stopping, resume = threading.Event(), threading.Event()
    original = a.shutdown

    def slow_shutdown() -> None:
        stopping.set()
        assert resume.wait(WAIT)
        original()

    a.shutdown = slow_shutdown  # type: ignore[method-assign]
    clock.now += 5
    sweeper = threading.Thread(target=pool.sweep)
    sweeper.start()
    assert stopping.wait(WAIT)
    assert states(pool)["a"] == "unloading"
    lease = pool.acquire("a")
    resume.set()
    sweeper.join(WAIT)
    again = lease.engine(WAIT)
    assert again is not a and a.stopped and states(pool)["a"] == "loaded"
    lease.release()


def test_shutdown_unloads_every_model():
    factory = Factory()
    pool = make_pool(factory, budget_mb=1000)
    engines = [use(pool, name) for name in ("a", "b")]
    pool.shutdown()
    assert all(e.stopped for e in engines) and pool.used_bytes() == 0


def test_shutdown_during_a_load_waits_for_it_and_stops_its_engine():
    factory = Factory()
    factory.gates["a"] = gate = threading.Event()
    pool = make_pool(factory)
    lease = pool.acquire("a")
    assert factory.entered.wait(WAIT)  # loading, not still waiting for room
    assert {s.name: s.progress for s in pool.status()} == {"a": 0.5, "b": None, "c": None}
    stopper = threading.Thread(target=pool.shutdown)
    stopper.start()
    gate.set()
    stopper.join(WAIT)
    assert not stopper.is_alive()
    assert [e.stopped for e in factory.made] == [True]
    with pytest.raises(PoolError, match="shut down"):
        lease.engine(WAIT)


def test_a_loaded_model_whose_engine_died_is_loaded_again_by_the_next_request():
    """Issue 40's leftover: the pool handed out a dead engine for ever (requests failed with
    'the engine is not running' until the model was evicted)."""
    factory = Factory()
    pool = make_pool(factory)
    first = use(pool, "a")
    first.running = False  # its thread died (a llama.cpp error it could not survive)
    second = use(pool, "a")
    assert second is not first and second.running and len(factory.made) == 2
    assert states(pool)["a"] == "loaded"
    assert pool.used_bytes() == 100 * MB  # counted once, for the live engine
    wait_until(lambda: first.stopped, "the dead engine let go")
    pool.shutdown()
