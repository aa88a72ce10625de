"""`chorus serve --models` (app/cli/serve_models.py) as a user runs it: a process serving the
installed models on loopback, each loaded when a request names it; and what it refuses."""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from app.cli.serve_models import memory_size
from tests.support.net import unused_port
from tests.support.waiting import wait_until


@pytest.fixture
def data_dir(tmp_path, model_path, gemma_path) -> Path:
    models = tmp_path / "models"
    models.mkdir()
    for path in (model_path, gemma_path):
        (models / path.name).symlink_to(path)
    return tmp_path


def serve(data_dir: Path, *args: str) -> subprocess.Popen:
    env = {**os.environ, "CHORUS_DATA_DIR": str(data_dir)}
    return subprocess.Popen([sys.executable, "-m", "app", "serve", *args], stderr=subprocess.PIPE, text=True, env=env)


def get(url: str, body: dict | None = None) -> dict:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=180) as answer:
        return json.load(answer)


@pytest.mark.model
def test_serve_models_all_loads_each_model_when_a_request_names_it(data_dir):
    port = unused_port()
    proc = serve(data_dir, "--models", "all", "--port", str(port), "--ctx", "1024", "--parallel", "2",
                 "--models-memory", "8GiB", "--keep-alive", "120")
    try:
        line = proc.stderr.readline()
        assert f"serving gemma3-270m, smollm2-135m at http://127.0.0.1:{port}/v1 (no API key)" in line, line
        assert "within 8.0 GiB, unloaded after 120 s idle" in proc.stderr.readline()
        base = f"http://127.0.0.1:{port}/v1"
        listed = {m["id"]: m for m in get(f"{base}/models")["data"]}
        assert {name: m["state"] for name, m in listed.items()} == {"gemma3-270m": "not loaded",
                                                                    "smollm2-135m": "not loaded"}
        assert listed["gemma3-270m"]["context_length"] == 1024
        answer = get(f"{base}/chat/completions", {"model": "gemma3-270m", "max_tokens": 4,
                                                  "messages": [{"role": "user", "content": "Hi"}]})
        assert answer["model"] == "gemma3-270m" and answer["choices"][0]["message"]["content"]
        states = {m["id"]: m["state"] for m in get(f"{base}/models")["data"]}
        assert states == {"gemma3-270m": "loaded", "smollm2-135m": "not loaded"}
        # The Files and Batch API too, its files in the data folder (issue 40)
        import openai

        c = openai.OpenAI(base_url=base, api_key="none", max_retries=0, timeout=60)
        request = {"custom_id": "a", "method": "POST", "url": "/v1/chat/completions",
                   "body": {"model": "gemma3-270m", "max_tokens": 4, "messages": [{"role": "user", "content": "Hi"}]}}
        uploaded = c.files.create(file=("in.jsonl", json.dumps(request).encode()), purpose="batch")
        batch = c.batches.create(input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h")
        done = wait_until(lambda: (b := c.batches.retrieve(batch.id)).status in ("completed", "failed") and b,
                          "the batch done", 180)
        assert done.status == "completed" and done.model == "gemma3-270m"
        assert (data_dir / "files").is_dir()
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 0
        proc.stderr.close()


@pytest.mark.model
@pytest.mark.parametrize("args, said", [
    (["--models", "smollm2-135m,nope"], "--models: not installed: nope; installed: gemma3-270m, smollm2-135m"),
    (["--models", "all", "--mmproj", "x.gguf"], "--mmproj apply to one model"),
    (["--models", "gemma3-270m", "--model", "smollm2-135m"], "--model smollm2-135m is not among the models served"),
])
def test_serve_models_refuses_what_it_cannot_serve_in_one_line(data_dir, args, said):
    proc = serve(data_dir, "--port", str(unused_port()), *args)
    try:
        assert proc.wait(timeout=120) == 2
        err = proc.stderr.read()
    finally:
        proc.stderr.close()
    assert said in err and "Traceback" not in err, err


@pytest.mark.parametrize("text, size", [("4GiB", 4 << 30), ("4G", 4 << 30), ("4gb", 4 * 10**9), ("512MiB", 512 << 20),
                                        ("1.5GiB", 3 << 29), ("1000", 1000)])
def test_models_memory_sizes(text, size):
    assert memory_size(text) == size


@pytest.mark.parametrize("text", ["", "4 parsecs", "-1G", "0"])
def test_models_memory_refuses_what_is_no_size(text):
    with pytest.raises(argparse.ArgumentTypeError):
        memory_size(text)
