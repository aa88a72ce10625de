"""Every engine class declares what its protocol asks (app/engines/protocol.py), and engine
status is an enum that still compares equal to the strings ui/ uses until it migrates."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from app.engines.gateway import EngineGateway
from app.engines.host import EngineClient
from app.engines.pool import PooledEngine
from app.engines.protocol import EngineLike, EngineState, EngineStatus, ServedEngine
from app.engines.remote import RemoteEndpoint, RemoteEngine
from app.engines.sources import ModelSource
from inference.core.engine import Engine
from inference.params import LoadSettings

if TYPE_CHECKING:  # what mypy checks: each class is assignable to its protocol

    def _conforms(client: EngineClient, remote: RemoteEngine, pooled: PooledEngine,
                  engine: Engine, gateway: EngineGateway) -> None:
        local: EngineLike = client
        far: EngineLike = remote
        shared: EngineLike = pooled
        served: ServedEngine = engine
        routed: ServedEngine = gateway
        del local, far, shared, served, routed


def members(protocol: type) -> list[str]:
    return sorted(name for name in vars(protocol) if not name.startswith("_"))


def engines() -> dict[str, EngineLike]:
    """One of each, built but not started (no process, no network)."""
    client = EngineClient(LoadSettings(model_path=Path("/models/none.gguf")), on_delta=lambda d: None)
    remote = RemoteEngine(RemoteEndpoint("http://127.0.0.1:9/v1", "m"), on_delta=lambda d: None)
    pooled = PooledEngine(ModelSource.local("/models/none.gguf"), fail=lambda d: None, engine=client)
    return {"EngineClient": client, "RemoteEngine": remote, "PooledEngine": pooled}


def test_the_protocols_name_what_the_app_calls():
    assert members(EngineLike) == ["cancel", "is_local", "pin_system_prompt", "set_priority", "set_threads", "shutdown",
                                   "start", "state", "submit", "unpin_system_prompt"]
    assert members(ServedEngine) == ["cancel", "chat_template", "info", "metrics", "prepare", "submit", "text_tokens"]


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


@pytest.mark.parametrize("name", ["EngineClient", "RemoteEngine", "PooledEngine"])
def test_each_engine_has_every_member_of_engine_like(name):
    engine = engines()[name]
    for member in members(EngineLike):
        declared = vars(EngineLike)[member]
        assert hasattr(engine, member), f"{name} has no {member}"
        if callable(declared):
            assert accepts_protocol_call(getattr(engine, member), declared), f"{name}.{member} differs"
    assert isinstance(engine.state, EngineState) and isinstance(engine.state.status, EngineStatus)
    assert engine.is_local is (name != "RemoteEngine")


def test_what_the_server_serves_has_every_member_of_served_engine():
    served = [Engine(LoadSettings(model_path=Path("/models/none.gguf"))),  # built, not started: no thread yet
              EngineGateway(lambda: None, lambda: None, lambda d: None)]
    for engine in served:
        for member in members(ServedEngine):
            declared = vars(ServedEngine)[member]
            assert hasattr(engine, member), f"{type(engine).__name__} has no {member}"
            if callable(declared):
                assert accepts_protocol_call(getattr(engine, member), declared), f"{type(engine).__name__}.{member}"
        assert engine.info is None  # nothing loaded yet


def test_the_signature_check_can_fail():
    class Narrow:
        def start(self) -> None: ...

    assert not accepts_protocol_call(Narrow().start, EngineLike.start)


def test_engine_status_is_an_enum_equal_to_its_old_strings():
    assert [s.value for s in EngineStatus] == ["starting", "ready", "crashed", "stopped", "failed"]
    assert EngineStatus.READY == "ready" and EngineStatus("failed") is EngineStatus.FAILED
    assert {"ready": 1}.get(EngineStatus.READY) == 1  # dict lookups by the old strings still work
    assert f"engine {EngineStatus.CRASHED}" == "engine crashed" and str(EngineStatus.STOPPED) == "stopped"


def test_a_pooled_engine_reports_its_own_status_with_the_inner_details():
    client = EngineClient(LoadSettings(model_path=Path("/models/none.gguf")), on_delta=lambda d: None)
    pooled = PooledEngine(ModelSource.local("/models/none.gguf"), fail=lambda d: None, engine=client,
                          status=EngineStatus.FAILED, error="bad file")
    assert pooled.state == EngineState(EngineStatus.FAILED, error="bad file")
    assert client.state.status is EngineStatus.STOPPED
