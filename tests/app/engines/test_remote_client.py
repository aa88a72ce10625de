"""The remote model source, over loopback HTTP to Chorus's own server on the real model."""

from __future__ import annotations

import json
import queue
import socket
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from app.engines.remote import RemoteClient, RemoteEndpoint
from app.server.config import ServerConfig
from app.server.uvicorn_server import HttpServer
from inference import ChatRequest, FinishReason, SamplingParams
from tests.support.net import serving_on_a_thread, unused_port
from tests.support.waiting import wait_until

KEY = "sekrit-key-123"


@pytest.fixture(scope="module")
def engine(model_path):
    """An engine of this module's own: the greedy answers compared below must not depend
    on what earlier tests left in a shared cache (see README, Reproducible mode)."""
    from inference.core.engine import Engine
    from inference.params import LoadSettings

    started = Engine.start(LoadSettings(model_path=model_path, n_ctx=4096, n_seq_max=8, reproducible=True))
    yield started
    started.shutdown()


@pytest.fixture
def server(engine):
    srv = HttpServer(engine, ServerConfig(port=0, api_key=KEY, model_id="smollm2")).start()
    yield srv
    srv.stop()


def run(endpoint: RemoteEndpoint, text: str, n: int = 16, cancel_after: int | None = None):
    deltas: queue.SimpleQueue = queue.SimpleQueue()
    client = RemoteClient(endpoint)
    chat = ChatRequest(messages=({"role": "user", "content": text},),
                       sampling=SamplingParams(temperature=0.0, max_tokens=n))
    rid = client.stream(chat, deltas.put)
    parts, seen = [], 0
    while True:
        d = deltas.get(timeout=60)
        assert d.request_id == rid
        parts.append(d.text)
        seen += bool(d.text)
        if cancel_after is not None and seen == cancel_after:
            client.cancel(rid)
        if d.finished:
            return "".join(parts), d


@pytest.mark.model
def test_streams_from_a_chorus_server(server):
    endpoint = RemoteEndpoint(f"{server.url}/v1", "smollm2", KEY)
    assert RemoteClient(endpoint).models() == ["smollm2"]
    text, final = run(endpoint, "Name three fruits.", 24)
    assert text and final.finish_reason in (FinishReason.STOP, FinishReason.LENGTH)
    assert final.stats.ttft_s is not None and final.stats.generated_tokens > 0
    again, _ = run(endpoint, "Name three fruits.", 24)
    assert again == text  # greedy: the same answer twice


@pytest.mark.model
def test_cancel_closes_the_stream(server):
    endpoint = RemoteEndpoint(f"{server.url}/v1", "smollm2", KEY)
    text, final = run(endpoint, "Tell a very long story.", 400, cancel_after=3)
    assert final.finish_reason is FinishReason.CANCELLED
    assert text


def test_a_refused_connection_is_a_clear_error():
    port = unused_port()
    _, final = run(RemoteEndpoint(f"http://127.0.0.1:{port}/v1", "m"), "hi")
    assert final.finish_reason is FinishReason.ERROR
    assert "refused the connection" in final.error


@pytest.mark.model
def test_a_bad_key_and_a_wrong_path_are_clear_errors(server):
    _, final = run(RemoteEndpoint(f"{server.url}/v1", "smollm2", "wrong-key"), "hi")
    assert final.finish_reason is FinishReason.ERROR and "refused the API key (401)" in final.error
    assert "wrong-key" not in final.error
    _, final = run(RemoteEndpoint(server.url, "smollm2", KEY), "hi")  # forgot /v1
    assert "no such endpoint" in final.error


def test_a_silent_server_times_out():
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)  # accepts the connection, never answers
        port = listener.getsockname()[1]
        _, final = run(RemoteEndpoint(f"http://127.0.0.1:{port}/v1", "m", timeout_s=1.0), "hi")
    assert final.finish_reason is FinishReason.ERROR
    assert "did not answer within 1 s" in final.error


def test_the_key_stays_out_of_reprs_and_bad_urls_are_refused():
    endpoint = RemoteEndpoint("http://127.0.0.1:1/v1", "m", KEY)
    assert KEY not in repr(endpoint)
    with pytest.raises(ValueError, match="not an http"):
        RemoteClient(RemoteEndpoint("ftp://example/v1", "m"))


class _Trickle(BaseHTTPRequestHandler):
    """A stand-in OpenAI-compatible server that streams one word every 50 ms for a minute,
    chunked over HTTP/1.1 as vLLM's and llama.cpp's servers send it."""

    protocol_version = "HTTP/1.1"

    def do_POST(self):  # noqa: N802 - http.server's name
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        chunk = {"choices": [{"index": 0, "delta": {"content": " word"}, "finish_reason": None}]}
        try:
            for _ in range(1200):
                event = f"data: {json.dumps(chunk)}\n\n".encode()
                self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
                self.wfile.flush()
                time.sleep(0.05)
        except OSError:
            pass  # the client went away

    def log_message(self, *args):  # quiet
        pass


def test_stop_from_another_thread_ends_the_reply():
    """Stop comes from the GUI thread while the reader blocks in a read: closing the response
    under it raised AttributeError inside http.client, the reader died and no finished delta
    ever came (the tab stayed "writing")."""
    with serving_on_a_thread(ThreadingHTTPServer(("127.0.0.1", 0), _Trickle)) as httpd:
        deltas: queue.SimpleQueue = queue.SimpleQueue()
        client = RemoteClient(RemoteEndpoint(f"http://127.0.0.1:{httpd.server_port}/v1", "m"))
        rid = client.stream(ChatRequest(messages=({"role": "user", "content": "hi"},)), deltas.put)
        first = deltas.get(timeout=10)
        assert first.request_id == rid and first.text == " word"
        for _ in range(5):  # several tries: the close must land while the reader is blocked
            client.cancel(rid)
            time.sleep(0.01)  # (part of the test: cancels spread over the reader's reads)
        while not (final := deltas.get(timeout=10)).finished:
            pass
        assert final.finish_reason is FinishReason.CANCELLED and final.error is None


# ----- against a real Chorus server: token counts, Stop reaching the engine, the CLI ----


@pytest.mark.model
def test_stop_ends_the_request_on_the_server_too(server, engine):
    """Stop shuts the connection down; the server sees its client gone and its engine stops
    generating for it (nothing left running)."""
    endpoint = RemoteEndpoint(f"{server.url}/v1", "smollm2", KEY)
    _, final = run(endpoint, "Tell a very long story.", 2000, cancel_after=2)
    assert final.finish_reason is FinishReason.CANCELLED
    wait_until(lambda: engine.metrics(fresh=True).running == 0, "nothing running in the engine")


@pytest.mark.model
def test_token_counts_come_from_a_chorus_servers_usage(server, engine):
    """Chorus's server (HttpServer) sends usage in its streams: the reply's prompt tokens are
    the engine's count of the prompt (without usage they would be 0), and its generated
    tokens what the server reported, within the limit asked for."""
    endpoint = RemoteEndpoint(f"{server.url}/v1", "smollm2", KEY)
    _, final = run(endpoint, "Name three fruits.", 24)
    prompt = engine.inputs.chat_tokens([{"role": "user", "content": "Name three fruits."}])
    assert final.stats.prompt_tokens == len(prompt) > 0
    assert 0 < final.stats.generated_tokens <= 24


@pytest.mark.model
def test_terminal_chat_with_a_chorus_server(server, tmp_path):
    from storage import MessageStatus
    from tests.support.terminal_chat import TerminalChat, saved_chats

    url = f"{server.url}/v1"
    expected, _ = run(RemoteEndpoint(url, "smollm2", KEY), "Name three fruits.", 16)
    chat = TerminalChat(tmp_path, "--server", url, "--api-key", KEY, "--temperature", "0", "--max-tokens", "16")
    chat.type("Name three fruits.")
    chat.wait_for("bot> ")
    chat.wait_for("you> ", after=chat.out.index("bot> "))
    chat.type("/quit")
    assert chat.finish() == 0
    assert KEY not in chat.out + chat.err and "Traceback" not in chat.err
    [(conv, messages)] = saved_chats(tmp_path)
    assert conv.model_ref == f"remote:{url}#smollm2"
    answer = messages[-1]
    assert answer.status is MessageStatus.COMPLETE and answer.content == expected  # greedy: the same answer
    assert answer.model.startswith("smollm2 @ 127.0.0.1:")


@pytest.mark.model
def test_ctrl_c_in_a_terminal_chat_with_a_chorus_server(server, engine, tmp_path):
    from storage import MessageStatus
    from tests.support.terminal_chat import TerminalChat, saved_chats

    url = f"{server.url}/v1"
    greedy, final = run(RemoteEndpoint(url, "smollm2", KEY), "Tell a very long story.", 300)
    assert final.finish_reason is FinishReason.LENGTH  # long enough to be stopped mid-way
    chat = TerminalChat(tmp_path, "--server", url, "--api-key", KEY, "--temperature", "0", "--max-tokens", "300")
    chat.type("Tell a very long story.")
    chat.wait_for("bot> ")
    wait_until(lambda: len(chat.out.split("bot> ", 1)[1]) > 20, "a few words of the reply")  # a few words in
    chat.interrupt()
    chat.wait_for("you> ", after=chat.out.index("bot> "))
    wait_until(lambda: engine.metrics(fresh=True).running == 0, "the server stopped too")
    chat.type("/quit")
    assert chat.finish() == 0
    assert "[stopped]" in chat.err and "Traceback" not in chat.err
    [(_, messages)] = saved_chats(tmp_path)
    answer = messages[-1]
    shown = chat.out.split("bot> ", 1)[1].split("you>", 1)[0].rstrip("\n")
    assert answer.status is MessageStatus.STOPPED and len(answer.content) > 20  # the user stopped it
    # Every word shown was saved (Ctrl-C may land between saving a piece and showing it).
    assert answer.content.startswith(shown) and greedy.startswith(answer.content)
