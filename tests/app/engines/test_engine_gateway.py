"""The gateway between the app's engine and the HTTP server, with a scripted engine (fast):
deltas of HTTP requests reach their handles, every other delta reaches the app."""

from __future__ import annotations

import re

import pytest

from app.engines.gateway import EngineGateway
from inference import ChatRequest, DeltaRouter
from inference.errors import EngineError
from inference.outputs import Delta, FinishReason


class ScriptedEngine:
    def __init__(self, refuse: bool = False) -> None:
        self.submitted: list[ChatRequest] = []
        self.cancelled: list[str] = []
        self.refuse = refuse

    def submit(self, chat: ChatRequest) -> str:
        if self.refuse:
            raise EngineError("the engine is stopped")
        self.submitted.append(chat)
        return str(chat.request_id)

    def cancel(self, request_id: str) -> None:
        self.cancelled.append(request_id)


def chat() -> ChatRequest:
    return ChatRequest(messages=({"role": "user", "content": "hi"},))


def test_http_deltas_reach_their_handle_and_the_others_the_app():
    engine, to_app = ScriptedEngine(), []
    router = DeltaRouter(fallback=to_app.append)  # the app's router: the views get what is not the gateway's
    gateway = EngineGateway(lambda: engine, lambda: None, router)
    handle = gateway.submit(chat())
    assert re.fullmatch(r"http-[0-9a-f]{12}", handle.request_id)
    assert [c.request_id for c in engine.submitted] == [handle.request_id]
    tab = Delta("tab-1", text="for a tab")
    router.route(tab)
    router.route(Delta(handle.request_id, text="Hi"))
    router.route(Delta.finished_with(handle.request_id, FinishReason.STOP))
    assert to_app == [tab]
    assert handle.result(timeout=1).text == "Hi" and gateway.open_requests() == 0
    handle.cancel()
    assert engine.cancelled == [handle.request_id]


def test_a_refused_submit_leaves_no_open_request():
    gateway = EngineGateway(lambda: ScriptedEngine(refuse=True), lambda: None, router := DeltaRouter())
    with pytest.raises(EngineError):
        gateway.submit(chat())
    assert gateway.open_requests() == 0 and not router.open_ids()


def test_metrics_before_the_first_snapshot_are_an_engine_error():
    gateway = EngineGateway(lambda: ScriptedEngine(), lambda: None, DeltaRouter())
    with pytest.raises(EngineError):
        gateway.metrics()


class LocalEngine(ScriptedEngine):
    """A ready local engine on a model file, as EngineClient reports itself."""

    def __init__(self, path, is_local: bool = True) -> None:
        from app.engines.protocol import EngineState, EngineStatus
        from inference import ModelInfo

        super().__init__()
        self.is_local = is_local
        info = ModelInfo(path=path, description="", n_params=0, size_bytes=0, n_ctx_train=0, n_ctx=256,
                         n_seq_max=1, n_gpu_layers=0, gpu_offload_supported=False)
        self.state = EngineState(EngineStatus.READY, info=info)


@pytest.mark.model
def test_prepare_tokenizes_with_the_local_models_vocabulary(model_path):
    from inference.errors import RequestError
    from inference.worker.vocab_loader import load_input_processor

    gateway = EngineGateway(lambda: LocalEngine(model_path), lambda: None, lambda d: None)
    prepared = gateway.prepare(chat())
    reference = load_input_processor(model_path, n_ctx=256)
    try:
        assert prepared.prompt_tokens == tuple(reference.chat_tokens([{"role": "user", "content": "hi"}]))
    finally:
        reference.close()
    with pytest.raises(RequestError, match="context holds 256"):
        gateway.prepare(ChatRequest(messages=({"role": "user", "content": "word " * 300},)))
    with pytest.raises(RequestError, match="longer than the context"):
        gateway.text_tokens("x" * 1_000_000)
    assert gateway.text_tokens("<|im_start|>")[0] == 1
    remote = EngineGateway(lambda: LocalEngine(model_path, is_local=False), lambda: None, lambda d: None)
    assert remote.prepare(chat()).prompt_tokens is None  # the remote server tokenizes
