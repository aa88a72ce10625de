"""Models on demand (`chorus serve --models`): one server, the real SmolLM2 and Gemma 3 in a
model pool (app/engines/model_pool.py behind app/server/pooled_models.py), driven by the
official `openai` client over loopback. The pool's policy alone, fast and without a model,
is tests/app/engines/test_model_pool.py."""

from __future__ import annotations

import contextlib
import json
import threading
import urllib.request
from collections.abc import Iterator
from dataclasses import replace

import pytest

from app.engines.model_pool import ModelPool, PoolModel
from app.models.capacity import load_bytes
from app.server.config import ServerConfig
from app.server.pooled_models import PooledModels, model_card
from app.server.uvicorn_server import HttpServer
from inference import LoadSettings
from inference.gguf import read_gguf_header
from tests.support.served import KEY, client, serving

openai = pytest.importorskip("openai")
pytestmark = pytest.mark.model

SMOL, GEMMA = "smollm2-135m", "gemma3-270m"


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def pool_models(model_path, gemma_path) -> list[PoolModel]:
    models = []
    for name, path in ((SMOL, model_path), (GEMMA, gemma_path)):
        settings = LoadSettings(model_path=path, n_ctx=1024, n_seq_max=2, reproducible=True)
        models.append(PoolModel(name, load_bytes(settings, read_gguf_header(path), False), settings))
    return models


def start_engine(model: PoolModel, threads: int, progress):
    from inference import Engine

    assert isinstance(model.load, LoadSettings)
    return Engine.start(replace(model.load, n_threads=threads, n_threads_batch=threads), on_progress=progress)


@contextlib.contextmanager
def serving_pool(models: list[PoolModel], budget: int, clock=None, keep_alive: float = 300) -> Iterator[HttpServer]:
    pool = ModelPool(models, start_engine, budget_bytes=budget, keep_alive_s=keep_alive, clock=clock or Clock(),
                     sweep_every_s=None)
    cards = {m.name: model_card(m.load, read_gguf_header(m.load.model_path)) for m in models if m.name != "broken"}
    server = HttpServer(None, ServerConfig(port=0, api_key=KEY, model_id=SMOL),
                        models=PooledModels(pool, SMOL, cards)).start()
    server.pool = pool  # type: ignore[attr-defined]  # the tests look at it too
    try:
        yield server
    finally:
        server.stop()
        pool.shutdown()


def states(server) -> dict[str, str]:
    return {m.id: m.state for m in client(server).models.list()}


def say(server, model: str, text: str = "Name a colour.", **kw):
    return client(server).chat.completions.create(model=model, messages=[{"role": "user", "content": text}],
                                                  temperature=0, max_tokens=8, **kw)


@pytest.fixture(scope="module")
def both(model_path, gemma_path):
    """Room for both models at once."""
    models = pool_models(model_path, gemma_path)
    with serving_pool(models, budget=sum(m.memory_bytes for m in models)) as server:
        yield server


def test_models_lists_every_model_served_with_its_state_and_context(both):
    listed = {m.id: m for m in client(both).models.list()}
    assert set(listed) == {SMOL, GEMMA}
    for model in listed.values():
        assert model.state in ("not loaded", "loaded") and model.context_length == 1024
        assert model.vision is False and model.owned_by == "chorus"


def test_a_client_naming_each_model_in_turn_gets_each_ones_answer(model_path, both):
    answers = {name: say(both, name) for name in (GEMMA, SMOL, GEMMA)}
    assert {name: a.model for name, a in answers.items()} == {GEMMA: GEMMA, SMOL: SMOL}
    assert all(a.choices[0].message.content for a in answers.values())
    assert states(both) == {SMOL: "loaded", GEMMA: "loaded"}
    # Each model's own answer: what a server of that model alone says (greedy, reproducible).
    from inference import Engine

    with Engine.start(LoadSettings(model_path=model_path, n_ctx=1024, n_seq_max=2, reproducible=True)) as alone:
        with serving(alone) as server:
            assert say(server, "anything").choices[0].message.content == answers[SMOL].choices[0].message.content


def test_two_models_stream_at_once_on_shared_cores(both):
    replies: dict[str, str] = {}

    def stream(name: str) -> None:
        chunks = client(both).chat.completions.create(
            model=name, messages=[{"role": "user", "content": "Count to ten."}], temperature=0, max_tokens=24,
            stream=True)
        replies[name] = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)

    threads = [threading.Thread(target=stream, args=(name,)) for name in (SMOL, GEMMA)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(240)
    assert set(replies) == {SMOL, GEMMA} and all(replies.values())
    assert set(both.pool.loaded()) == {SMOL, GEMMA}  # each on its share of the cores (test_model_pool.py)


def test_an_unknown_model_is_a_404_listing_those_served(both):
    with pytest.raises(openai.NotFoundError) as caught:
        say(both, "llama-70b")
    error = caught.value.body
    assert caught.value.status_code == 404 and error["code"] == "model_not_found" and error["param"] == "model"
    assert f"served: {GEMMA}, {SMOL}" in error["message"] or f"served: {SMOL}, {GEMMA}" in error["message"]


def test_a_request_without_a_model_gets_the_default(both):
    request = urllib.request.Request(f"{both.url}/v1/chat/completions", method="POST", data=json.dumps(
        {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2}).encode(),
        headers={"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=120) as answer:
        assert json.load(answer)["model"] == SMOL


def test_a_budget_for_one_model_evicts_the_idle_one_and_reloads_it_when_asked_again(model_path, gemma_path):
    models = pool_models(model_path, gemma_path)
    with serving_pool(models, budget=max(m.memory_bytes for m in models)) as server:
        assert say(server, SMOL).model == SMOL
        assert states(server) == {SMOL: "loaded", GEMMA: "not loaded"}
        assert say(server, GEMMA).model == GEMMA  # SMOL, idle, makes room
        assert states(server) == {SMOL: "not loaded", GEMMA: "loaded"}
        assert say(server, SMOL).model == SMOL  # loaded again, GEMMA out
        assert states(server) == {SMOL: "loaded", GEMMA: "not loaded"}
        assert server.pool.used_bytes() <= server.pool.budget_bytes


def test_an_idle_model_unloads_after_its_keep_alive_and_a_request_keep_alive_wins(model_path, gemma_path):
    clock = Clock()
    models = pool_models(model_path, gemma_path)
    with serving_pool(models, budget=sum(m.memory_bytes for m in models), clock=clock, keep_alive=60) as server:
        say(server, SMOL)
        say(server, GEMMA, extra_body={"keep_alive": "10m"})
        clock.now += 61
        assert server.pool.sweep() == [SMOL]
        assert states(server) == {SMOL: "not loaded", GEMMA: "loaded"}
        clock.now += 600
        assert server.pool.sweep() == [GEMMA]
        assert states(server) == {SMOL: "not loaded", GEMMA: "not loaded"}
        assert say(server, GEMMA).choices[0].message.content  # back on the next request


def test_a_model_that_cannot_fit_alone_is_a_clear_error_naming_the_budget(model_path, gemma_path):
    models = pool_models(model_path, gemma_path)
    sizes = {m.name: m.memory_bytes for m in models}
    assert sizes[GEMMA] > sizes[SMOL]
    with serving_pool(models, budget=sizes[SMOL]) as server:
        with pytest.raises(openai.BadRequestError) as caught:
            say(server, GEMMA)
        error = caught.value.body
        assert error["code"] == "model_too_large" and error["param"] == "model"
        assert "more than the whole memory budget for models" in error["message"] and "MiB" in error["message"]
        assert say(server, SMOL).model == SMOL  # the other still serves


def test_a_model_that_fails_to_load_fails_its_requests_with_the_error(model_path, tmp_path):
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF" + b"\0" * 64)
    settings = LoadSettings(model_path=broken, n_ctx=1024, n_seq_max=2)
    models = [*pool_models(model_path, model_path)[:1], PoolModel("broken", 1 << 20, settings)]
    with serving_pool(models, budget=1 << 34) as server:
        with pytest.raises(openai.InternalServerError) as caught:
            say(server, "broken")
        assert caught.value.status_code == 503 and "'broken' could not be loaded" in caught.value.body["message"]
        listed = {m.id: m for m in client(server).models.list()}
        assert listed["broken"].state == "not loaded" and listed["broken"].load_error
        assert say(server, SMOL).model == SMOL


def test_metrics_has_a_lane_per_loaded_model(both):
    say(both, SMOL)
    say(both, GEMMA)
    request = urllib.request.Request(f"{both.url}/metrics", headers={"Authorization": f"Bearer {KEY}"})
    text = urllib.request.urlopen(request, timeout=30).read().decode()
    assert f'chorus_generated_tokens_total{{model="{SMOL}"}}' in text
    assert f'chorus_generated_tokens_total{{model="{GEMMA}"}}' in text


def test_an_unreadable_keep_alive_is_a_400_naming_it(both):
    with pytest.raises(openai.BadRequestError) as caught:
        say(both, SMOL, extra_body={"keep_alive": "forever"})
    assert caught.value.body["param"] == "keep_alive" and "5m" in caught.value.body["message"]
