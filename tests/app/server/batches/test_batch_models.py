"""The Files and Batch API on a server of several models (`chorus serve --models`, issues 37
and 40): the real SmolLM2 and Gemma 3 in a model pool, driven by the official `openai`
client over loopback. Each batch runs on the model its lines name; lines naming two models
fail validation; a batch lets its model go when a chat for another model waits for the
room; a model that cannot load fails its batch with the load's error; a restarted server
takes a batch up on its own model."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from dataclasses import replace

import pytest

from app.engines.model_pool import ModelPool, PoolModel
from app.models.capacity import load_bytes
from app.server.config import ServerConfig
from app.server.pooled_models import PooledModels
from app.server.uvicorn_server import HttpServer
from inference import LoadSettings
from inference.gguf import read_gguf_header
from tests.support.served import KEY, client
from tests.support.waiting import wait_until

openai = pytest.importorskip("openai")
pytestmark = pytest.mark.model

SMOL, GEMMA = "smollm2-135m", "gemma3-270m"
PROMPT = "Name a colour."


def pool_models(*named) -> list[PoolModel]:
    models = []
    for name, path in named:
        settings = LoadSettings(model_path=path, n_ctx=512, n_seq_max=2, reproducible=True)
        size = load_bytes(settings, read_gguf_header(path), False) if name != "broken" else 1 << 20
        models.append(PoolModel(name, size, settings))
    return models


def start_engine(model: PoolModel, threads: int, progress):
    from inference import Engine

    assert isinstance(model.load, LoadSettings)
    return Engine.start(replace(model.load, n_threads=threads, n_threads_batch=threads), on_progress=progress)


@contextlib.contextmanager
def serving_pool(models: list[PoolModel], folder, budget: int | None = None) -> Iterator[HttpServer]:
    pool = ModelPool(models, start_engine, budget_bytes=budget or sum(m.memory_bytes for m in models),
                     sweep_every_s=None)
    config = ServerConfig(port=0, api_key=KEY, model_id=SMOL, responses_db=folder / "chorus.db",
                          files_dir=folder / "files")
    server = HttpServer(None, config, models=PooledModels(pool, SMOL, aliases={"gemma": GEMMA})).start()
    server.pool = pool  # type: ignore[attr-defined]  # the tests look at it too
    try:
        yield server
    finally:
        server.stop()
        pool.shutdown()


def line(custom_id: str, model: str | None, text: str = PROMPT, **fields) -> dict:
    body = {"messages": [{"role": "user", "content": text}], "temperature": 0, "max_tokens": 8, **fields}
    if model is not None:
        body["model"] = model
    return {"custom_id": custom_id, "method": "POST", "url": "/v1/chat/completions", "body": body}


def submit(c, lines: list[dict]):
    data = "".join(json.dumps(x) + "\n" for x in lines).encode()
    uploaded = c.files.create(file=("in.jsonl", data), purpose="batch")
    return c.batches.create(input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h")


def until_status(c, batch_id: str, *statuses: str, timeout: float = 300):
    return wait_until(lambda: (b := c.batches.retrieve(batch_id)).status in statuses and b,
                      f"batch {batch_id} {'/'.join(statuses)}", timeout)


def jsonl_of(c, file_id: str) -> list[dict]:
    return [json.loads(x) for x in c.files.content(file_id).text.splitlines()]


def greedy(c, model: str) -> str:
    answer = c.chat.completions.create(model=model, messages=[{"role": "user", "content": PROMPT}], temperature=0,
                                       max_tokens=8)
    return answer.choices[0].message.content


def test_two_batches_each_run_on_the_model_their_lines_name(model_path, gemma_path, tmp_path):
    with serving_pool(pool_models((SMOL, model_path), (GEMMA, gemma_path)), tmp_path) as server:
        c = client(server)
        smol = submit(c, [line("s0", SMOL), line("s1", None)])  # no model: the default's
        gemma = submit(c, [line("g0", "gemma"), line("g1", GEMMA)])  # an alias, as in calls
        live = {SMOL: greedy(c, SMOL), GEMMA: greedy(c, GEMMA)}
        assert live[SMOL] != live[GEMMA]  # the two models' greedy answers tell them apart
        for batch, model in ((smol, SMOL), (gemma, GEMMA)):
            done = until_status(c, batch.id, "completed", "failed")
            assert done.status == "completed" and done.model == model
            assert (done.request_counts.completed, done.request_counts.failed) == (2, 0)
            for out in jsonl_of(c, done.output_file_id):
                body = out["response"]["body"]
                assert body["model"] == model and body["choices"][0]["message"]["content"] == live[model]


def test_lines_naming_two_models_or_one_not_served_fail_validation_naming_them(model_path, gemma_path, tmp_path):
    with serving_pool(pool_models((SMOL, model_path), (GEMMA, gemma_path)), tmp_path) as server:
        c = client(server)
        mixed = until_status(c, submit(c, [line("a", SMOL), line("b", GEMMA), line("c", "llama-70b")]).id,
                             "failed", "in_progress", "completed")
        assert mixed.status == "failed" and mixed.request_counts.total == 0
        errors = [(e.line, e.code, e.param) for e in mixed.errors.data]
        assert errors == [(2, "mismatched_model", "body.model"), (3, "model_not_found", "body.model")]
        assert f"'{GEMMA}'" in mixed.errors.data[0].message and f"'{SMOL}'" in mixed.errors.data[0].message
        assert f"served: '{SMOL}', '{GEMMA}'" in mixed.errors.data[1].message
        assert server.pool.loaded() == {}  # validation loads nothing


def test_a_chat_for_another_model_is_answered_while_a_batch_holds_the_only_room(model_path, gemma_path, tmp_path):
    models = pool_models((SMOL, model_path), (GEMMA, gemma_path))
    with serving_pool(models, tmp_path, budget=max(m.memory_bytes for m in models)) as server:
        c = client(server)
        total = 40
        batch = submit(c, [line(f"r{i}", SMOL, f"Count from {i}.", max_tokens=16, ignore_eos=True)
                           for i in range(total)])
        wait_until(lambda: c.batches.retrieve(batch.id).request_counts.completed >= 2, "the batch running", 240)
        chat = c.chat.completions.create(model=GEMMA, messages=[{"role": "user", "content": PROMPT}],
                                         temperature=0, max_tokens=8)
        assert chat.model == GEMMA and chat.choices[0].message.content
        # The batch let SMOL go for it (else the chat would have waited for the whole batch).
        assert c.batches.retrieve(batch.id).request_counts.completed < total
        done = until_status(c, batch.id, "completed", "failed")
        assert done.status == "completed" and done.model == SMOL
        output = jsonl_of(c, done.output_file_id)
        assert sorted(o["custom_id"] for o in output) == sorted(f"r{i}" for i in range(total))  # each once
        assert all(o["response"]["body"]["model"] == SMOL for o in output)
        assert all(o["response"]["body"]["usage"]["completion_tokens"] == 16 for o in output)
        assert server.pool.used_bytes() <= server.pool.budget_bytes


def test_a_batch_whose_model_cannot_load_fails_with_the_load_error(model_path, tmp_path):
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF" + b"\0" * 64)
    with serving_pool(pool_models((SMOL, model_path), ("broken", broken)), tmp_path) as server:
        c = client(server)
        done = until_status(c, submit(c, [line("a", "broken"), line("b", "broken")]).id, "failed", "completed")
        (error,) = done.errors.data
        assert error.code == "model_load_failed" and "'broken' could not be loaded" in error.message
        assert done.model == "broken" and done.failed_at and done.output_file_id is None
        unrun = jsonl_of(c, done.error_file_id)
        assert [(e["custom_id"], e["error"]["code"]) for e in unrun] == [("a", "model_load_failed"),
                                                                         ("b", "model_load_failed")]


def test_a_restarted_server_takes_a_batch_up_on_its_own_model(model_path, gemma_path, tmp_path):
    models = pool_models((SMOL, model_path), (GEMMA, gemma_path))
    lines = [line(f"k{i}", GEMMA, f"Count from {i}.", max_tokens=16, ignore_eos=True) for i in range(12)]
    with serving_pool(models, tmp_path) as first:
        c = client(first)
        batch = submit(c, lines)
        wait_until(lambda: c.batches.retrieve(batch.id).request_counts.completed >= 2, "two answered", 240)
    with serving_pool(models, tmp_path) as second:
        c = client(second)
        assert c.batches.retrieve(batch.id).request_counts.completed < 12  # stopped mid-batch
        done = until_status(c, batch.id, "completed", "failed")
        assert done.status == "completed" and done.model == GEMMA
        output = jsonl_of(c, done.output_file_id)
        assert [o["custom_id"] for o in output] == [f"k{i}" for i in range(12)]
        assert all(o["response"]["body"]["model"] == GEMMA for o in output)
        assert GEMMA in second.pool.loaded()
