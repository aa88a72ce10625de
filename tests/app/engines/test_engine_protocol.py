"""Every engine declares what its protocol asks: inference.EngineClient (the one interface to an
engine, wherever it runs) and the app's ManagedEngine on top of it (app/engines/protocol.py);
engine status is an enum that still compares equal to the strings ui/ uses until it migrates."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from app.engines.main_engine import MainEngine
from app.engines.pool import PooledEngine
from app.engines.process import EngineProcess
from app.engines.protocol import EngineState, EngineStatus, ManagedEngine
from app.engines.remote import RemoteEndpoint, RemoteEngine
from app.engines.sources import ModelSource
from inference import EngineClient
from inference.core.engine import Engine
from inference.params import LoadSettings

if TYPE_CHECKING:  # what mypy checks: each class is assignable to its protocol

    def _conforms(process: EngineProcess, remote: RemoteEngine, pooled: PooledEngine,
                  engine: Engine, main: MainEngine) -> None:
        local: ManagedEngine = process
        far: ManagedEngine = remote
        shared: ManagedEngine = pooled
        in_process: EngineClient = engine
        served: EngineClient = main
        del local, far, shared, in_process, served


def members(protocol: type) -> list[str]:
    return sorted(name for name in vars(protocol) if not name.startswith("_"))


def engines() -> dict[str, ManagedEngine]:
    """One of each, built but not started (no process, no network)."""
    process = EngineProcess(LoadSettings(model_path=Path("/models/none.gguf")))
    remote = RemoteEngine(RemoteEndpoint("http://127.0.0.1:9/v1", "m"))
    pooled = PooledEngine(ModelSource.local("/models/none.gguf"), engine=process)
    return {"EngineProcess": process, "RemoteEngine": remote, "PooledEngine": pooled}


def test_the_protocols_name_what_their_callers_call():
    assert members(EngineClient) == ["cancel", "count_tokens", "embed", "info", "metrics", "pin_system_prompt",
                                     "prepare", "set_priority", "shutdown", "stream", "text_tokens",
                                     "unpin_system_prompt"]
    assert members(ManagedEngine) == ["is_local", "set_threads", "start", "state"]


def accepts_protocol_call(implementation, declared) -> bool:
    """True when the implementation takes every argument the protocol's method names,
    positionally and by name (it may take more, with defaults)."""
    params = [p for p in inspect.signature(declared).parameters.values() if p.name != "self"]
    signature = inspect.signature(implementation)
    try:
        signature.bind(*(object() for _ in params))
        signature.bind(**{p.name: object() for p in params})
    except TypeError:
        return False
    return True


def has_every_member(engine: object, protocol: type) -> None:
    name = type(engine).__name__
    for member in members(protocol):
        declared = vars(protocol)[member]
        assert hasattr(engine, member), f"{name} has no {member}"
        if callable(declared):
            assert accepts_protocol_call(getattr(engine, member), declared), f"{name}.{member} differs"


@pytest.mark.parametrize("name", ["EngineProcess", "RemoteEngine", "PooledEngine"])
def test_each_managed_engine_has_every_member_of_both_protocols(name):
    engine = engines()[name]
    has_every_member(engine, EngineClient)
    has_every_member(engine, ManagedEngine)
    assert isinstance(engine.state, EngineState) and isinstance(engine.state.status, EngineStatus)
    assert engine.is_local is (name != "RemoteEngine")
    assert engine.info is None  # nothing loaded yet


def test_the_in_process_engine_and_the_main_engine_are_engine_clients():
    for engine in (Engine(LoadSettings(model_path=Path("/models/none.gguf"))),  # built, not started: no thread yet
                   MainEngine(lambda: engines()["RemoteEngine"])):
        has_every_member(engine, EngineClient)
        assert engine.info is None


def test_the_signature_check_can_fail():
    class Narrow:
        def start(self) -> None: ...

    assert not accepts_protocol_call(Narrow().start, ManagedEngine.start)


def test_engine_status_is_an_enum_equal_to_its_old_strings():
    assert [s.value for s in EngineStatus] == ["starting", "ready", "crashed", "stopped", "failed"]
    assert EngineStatus.READY == "ready" and EngineStatus("failed") is EngineStatus.FAILED
    assert {"ready": 1}.get(EngineStatus.READY) == 1  # dict lookups by the old strings still work
    assert f"engine {EngineStatus.CRASHED}" == "engine crashed" and str(EngineStatus.STOPPED) == "stopped"


def test_a_pooled_engine_reports_its_own_status_with_the_inner_details():
    client = EngineProcess(LoadSettings(model_path=Path("/models/none.gguf")))
    pooled = PooledEngine(ModelSource.local("/models/none.gguf"), engine=client,
                          status=EngineStatus.FAILED, error="bad file")
    assert pooled.state == EngineState(EngineStatus.FAILED, error="bad file")
    assert client.state.status is EngineStatus.STOPPED
