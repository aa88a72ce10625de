"""The OpenAI-compatible server, driven by the official `openai` client over loopback."""

from __future__ import annotations

import contextlib
import threading
import urllib.error
import urllib.request

import pytest

from app.server.openai_api import ChorusHTTPServer, ServerConfig

openai = pytest.importorskip("openai")
pytestmark = pytest.mark.model  # a server on a real engine


@contextlib.contextmanager
def serving(engine):
    srv = ChorusHTTPServer(engine, ServerConfig(port=0, api_key="sekrit", model_id="smollm2"))
    srv.serve_in_thread()
    try:
        yield srv
    finally:
        srv.shutdown()
        srv.server_close()


@pytest.fixture
def server(shared_engine):
    with serving(shared_engine) as srv:
        yield srv


def client(srv, key="sekrit"):
    return openai.OpenAI(base_url=f"{srv.url}/v1", api_key=key, max_retries=0, timeout=60)


def ask(text, **kw):
    return dict(model="smollm2", messages=[{"role": "user", "content": text}], temperature=0, **kw)


def test_models_and_a_plain_completion(server):
    c = client(server)
    assert [m.id for m in c.models.list()] == ["smollm2"]
    out = c.chat.completions.create(**ask("Say hello.", max_tokens=8))
    assert out.choices[0].message.role == "assistant" and out.choices[0].message.content
    assert out.usage.completion_tokens <= 8 and out.usage.prompt_tokens > 5
    assert out.choices[0].finish_reason in ("stop", "length")


def test_streaming_gives_the_same_text_as_a_plain_completion(server):
    c = client(server)
    plain = c.chat.completions.create(**ask("Name three colours.", max_tokens=24)).choices[0].message.content
    parts, finishes = [], []
    for chunk in c.chat.completions.create(**ask("Name three colours.", max_tokens=24), stream=True):
        parts.append(chunk.choices[0].delta.content or "")
        finishes.append(chunk.choices[0].finish_reason)
    assert "".join(parts) == plain
    assert finishes[-1] in ("stop", "length")


def test_concurrent_requests_share_one_batch(make_engine):
    # An engine of its own: its largest batch is these requests' (the shared engine's
    # running maximum may come from any earlier test).
    engine = make_engine(n_ctx=2048, n_seq_max=4)
    assert engine.metrics(fresh=True).max_step_seqs == 0
    results = []
    start = threading.Barrier(4)

    def one(i):
        start.wait(30)
        out = c.chat.completions.create(**ask(f"Count to {i + 5}.", max_tokens=48))
        results.append(out.usage.completion_tokens)

    with serving(engine) as srv:
        c = client(srv)
        threads = [threading.Thread(target=one, args=(i,)) for i in range(4)]
        [t.start() for t in threads]
        [t.join(120) for t in threads]
    assert len(results) == 4
    assert engine.metrics(fresh=True).max_step_seqs >= 3


def test_a_missing_or_wrong_key_is_401(server):
    with pytest.raises(openai.AuthenticationError):
        client(server, key="wrong").models.list()
    request = urllib.request.Request(f"{server.url}/v1/models")
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(request, timeout=10)
    assert err.value.code == 401


def test_bad_requests_are_400_with_a_reason(server):
    c = client(server)
    with pytest.raises(openai.BadRequestError, match="temperature"):
        c.chat.completions.create(**{**ask("hi"), "temperature": -1})
    with pytest.raises(openai.BadRequestError, match="context holds"):
        c.chat.completions.create(**ask("word " * 5000, max_tokens=4))


def test_metrics_are_prometheus_text(server):
    client(server).chat.completions.create(**ask("Hi", max_tokens=4))
    request = urllib.request.Request(f"{server.url}/metrics", headers={"Authorization": "Bearer sekrit"})
    text = urllib.request.urlopen(request, timeout=10).read().decode()
    assert "# TYPE chorus_decode_tokens_per_second gauge" in text
    values = dict(line.split() for line in text.splitlines() if not line.startswith("#"))
    assert float(values["chorus_generated_tokens_total"]) > 0
    assert float(values["chorus_kv_cells_total"]) == 4096
