"""The engine pool's bookkeeping, with a scripted engine (fast), then real engine
processes: one on a broken GGUF file, one on the real model."""

from __future__ import annotations

import re
import threading
from pathlib import Path

import pytest

from app.engines.pool import EnginePool
from app.engines.protocol import EngineState, EngineStatus
from app.engines.router import EngineRouter
from app.engines.sources import ModelSource, SourceError, source_of
from inference import ChatRequest, LoadSettings, SamplingParams
from inference.outputs import FinishReason
from tests.support.waiting import wait_until


class ScriptedEngine:
    """A ManagedEngine that starts when told to (or fails), records what it is asked."""

    def __init__(self, fail_with: str | None = None, is_local: bool = True) -> None:
        self.go = threading.Event()
        self.fail_with = fail_with
        self.is_local = is_local
        self.submitted: list[str] = []
        self.cancelled: list[str] = []
        self.priorities: list[tuple[str, int]] = []  # submitted with, then set
        self.pinned: list[str] = []
        self.threads: int | None = None
        self.stopped = False
        self.state = EngineState(EngineStatus.STOPPED)

    def start(self, wait: bool = True) -> None:
        assert self.go.wait(10)
        if self.fail_with:
            raise RuntimeError(self.fail_with)

    def stream(self, chat: ChatRequest, sink) -> str:
        self.submitted.append(chat.request_id)
        self.priorities.append((chat.request_id, chat.priority))
        return chat.request_id

    def cancel(self, request_id: str) -> None:
        self.cancelled.append(request_id)

    def set_priority(self, request_id: str, priority: int) -> None:
        self.priorities.append((request_id, priority))

    def pin_system_prompt(self, text: str) -> None:
        self.pinned.append(text)

    def unpin_system_prompt(self, text: str) -> None:
        self.pinned.remove(text)

    def set_threads(self, n_threads: int) -> None:
        self.threads = n_threads

    def shutdown(self) -> None:
        self.stopped = True


def ignore(delta) -> None:
    pass


def chat(rid: str) -> ChatRequest:
    return ChatRequest(messages=({"role": "user", "content": "hi"},), request_id=rid)



@pytest.fixture
def pool_parts():
    made: dict[str, ScriptedEngine] = {}
    failed = []

    def make(source, on_state):
        engine = ScriptedEngine(fail_with="bad file" if "broken" in source.path else None)
        made[source.key] = engine
        return engine

    return EnginePool(make), made, failed


def test_requests_wait_for_the_engine_then_go_in_order(pool_parts):
    pool, made, failed = pool_parts
    source = ModelSource.local("/models/a.gguf")
    pooled = pool.acquire(source)
    pooled.stream(chat("r1"), failed.append)
    pooled.stream(chat("r2"), failed.append)
    pooled.cancel("r2")  # cancelled while it waited: never reaches the engine
    engine = made[source.key]
    assert engine.submitted == []
    engine.go.set()
    assert pooled.wait_started(5)
    assert pooled.status == "ready" and engine.submitted == ["r1"]
    assert [(d.request_id, d.finish_reason) for d in failed] == [("r2", FinishReason.CANCELLED)]
    pooled.stream(chat("r3"), failed.append)
    assert engine.submitted == ["r1", "r3"]
    assert pooled.status is EngineStatus.READY and pooled.state.status is EngineStatus.READY


def test_priorities_go_with_waiting_requests_then_to_the_engine(pool_parts):
    pool, made, _ = pool_parts
    pooled = pool.acquire(ModelSource.local("/models/a.gguf"))
    engine = made[pooled.source.key]
    pooled.stream(chat("r1"), ignore)
    pooled.stream(chat("r2"), ignore)
    pooled.set_priority("r2", 10)  # while the engine starts: r2 is sent raised
    engine.go.set()
    assert pooled.wait_started(5)
    assert engine.priorities == [("r1", 0), ("r2", 10)]
    pooled.set_priority("r1", 1)
    assert engine.priorities[-1] == ("r1", 1)


def test_a_pooled_engine_is_a_managed_engine(pool_parts):
    pool, made, _ = pool_parts
    pooled = pool.acquire(ModelSource.local("/models/a.gguf"))
    engine = made[pooled.source.key]
    pooled.pin_system_prompt("early")  # while it starts: only a head start, dropped
    minted = pooled.stream(ChatRequest(messages=({"role": "user", "content": "hi"},)), ignore)
    assert re.fullmatch(r"[0-9a-f]{12}", minted)
    engine.go.set()
    assert pooled.wait_started(5) and engine.submitted == [minted]
    pooled.pin_system_prompt("You are terse.")
    pooled.set_threads(3)
    assert engine.pinned == ["You are terse."] and engine.threads == 3 and pooled.is_local
    assert not pool.acquire(ModelSource.remote("http://127.0.0.1:9/v1", "m")).is_local
    pooled.shutdown()
    assert engine.stopped and pooled.state.status is EngineStatus.STOPPED


def test_a_crashed_engine_of_the_pool_starts_again():
    engine, told = ScriptedEngine(), []
    pool = EnginePool(lambda source, on_state: told.append(on_state) or engine)
    pooled = pool.acquire(ModelSource.local("/models/a.gguf"))
    engine.go.set()
    assert pooled.wait_started(5)
    engine.go.clear()  # the restart waits here, so that we see it happen
    told[0](EngineState(EngineStatus.CRASHED, error="exit code -9"))  # what the engine reports
    assert pooled.status is EngineStatus.STARTING and not pooled.wait_started(0.05)
    pooled.stream(chat("after"), ignore)
    assert engine.submitted == []  # it waits for the new process
    engine.go.set()
    assert pooled.wait_started(5) and pooled.status is EngineStatus.READY and engine.submitted == ["after"]


def test_panes_on_one_model_share_one_engine_until_the_last_lets_go(pool_parts):
    pool, made, _ = pool_parts
    source = ModelSource.local("/models/a.gguf")
    first, second = pool.acquire(source), pool.acquire(source)
    assert first is second and len(made) == 1 and first.users == 2
    made[source.key].go.set()
    pool.release(source)
    assert pool.get(source) is first and not made[source.key].stopped
    pool.release(source)
    assert pool.get(source) is None
    wait_until(lambda: made[source.key].stopped, "the engine stopped", timeout=10)


def test_an_engine_that_cannot_start_fails_its_requests_with_the_reason(pool_parts):
    pool, made, failed = pool_parts
    source = ModelSource.local("/models/broken.gguf")
    pooled = pool.acquire(source)
    pooled.stream(chat("r1"), failed.append)
    made[source.key].go.set()
    assert pooled.wait_started(5)
    assert pooled.status == "failed"
    assert failed[0].finish_reason is FinishReason.ERROR
    assert "broken.gguf could not be loaded: bad file" in failed[0].error
    pooled.stream(chat("r2"), failed.append)  # later requests fail at once, with the same reason
    assert failed[1].request_id == "r2" and "bad file" in failed[1].error
    # Choosing the model again tries again.
    again = pool.acquire(source)
    assert again is not pooled and again.users == 2


def router_with_scripted_pool(main: ScriptedEngine, threads: int = 8):
    made: dict[str, ScriptedEngine] = {}

    def make(source, on_state):
        made[source.key] = ScriptedEngine(is_local=source.kind == "local")
        made[source.key].go.set()
        return made[source.key]

    router = EngineRouter(lambda: main, lambda: LoadSettings(model_path=Path("/m/main.gguf"), n_threads=threads),
                          on_state=lambda source, state: None)
    router.pool = EnginePool(make)
    return router, made


def test_local_engines_split_the_cores_and_remote_ones_take_none():
    main = ScriptedEngine()
    router, made = router_with_scripted_pool(main)
    a = router.engine_for(1, ModelSource.local("/m/a.gguf"))
    assert main.threads == 4 and made[a.source.key].threads == 4
    router.engine_for(2, ModelSource.remote("http://127.0.0.1:9/v1", "m"))
    assert main.threads == 4 and made[a.source.key].threads == 4
    router.release(1)
    assert main.threads == 8
    router.shutdown()


def test_a_remote_main_engine_leaves_the_cores_to_the_pool():
    router, made = router_with_scripted_pool(ScriptedEngine(is_local=False))
    a = router.engine_for(1, ModelSource.local("/m/a.gguf"))
    assert made[a.source.key].threads == 8
    router.shutdown()


def test_sources_round_trip_and_refuse_garbage():
    remote = ModelSource.remote("http://127.0.0.1:8080/v1/", "smol")
    assert remote.base_url == "http://127.0.0.1:8080/v1" and remote.label == "smol @ 127.0.0.1:8080"
    assert ModelSource.from_dict(remote.to_dict()) == remote
    local = ModelSource.local("/m/x.gguf")
    assert ModelSource.from_dict(local.to_dict()) == local and local.label == "x.gguf"
    assert local.key != remote.key
    assert source_of(remote.key) == remote and source_of(local.key) == local
    assert source_of("SmolLM2-135M-Instruct.Q4_1.gguf") is None and source_of(None) is None
    assert source_of("remote:http://x#") is None and source_of("local:") is None
    for bad in ({}, {"kind": "local"}, {"kind": "remote", "base_url": "http://x"}, ["local"], {"kind": "ftp"}):
        with pytest.raises(SourceError):
            ModelSource.from_dict(bad)


@pytest.mark.model
def test_real_engine_processes_broken_file_and_real_model(model_path, tmp_path):
    from app.engines.process import EngineProcess
    from inference import LoadSettings

    deltas = []
    done = threading.Event()

    def on_delta(delta):
        deltas.append(delta)
        if delta.finished and delta.request_id == "good":
            done.set()

    def make(source, on_state):
        return EngineProcess(LoadSettings(model_path=source.path, n_ctx=1024, n_seq_max=2), on_state=on_state)

    pool = EnginePool(make)
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF" + b"\0" * 64)
    bad = pool.acquire(ModelSource.local(broken))
    bad.stream(chat("bad"), on_delta)
    good = pool.acquire(ModelSource.local(model_path))
    good.stream(ChatRequest(messages=({"role": "user", "content": "Say hello."},), request_id="good",
                            sampling=SamplingParams.greedy(max_tokens=8)), on_delta)
    try:
        assert done.wait(120)
        finished = {d.request_id: d for d in deltas if d.finished}
        assert finished["good"].finish_reason in (FinishReason.LENGTH, FinishReason.STOP)
        assert "".join(d.text for d in deltas if d.request_id == "good").strip()
        assert finished["bad"].finish_reason is FinishReason.ERROR
        assert "broken.gguf could not be loaded" in finished["bad"].error
    finally:
        pool.shutdown()
    assert good.engine.state.status == "stopped"
