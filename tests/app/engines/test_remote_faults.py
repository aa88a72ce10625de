"""The remote client against stand-in servers on loopback: usage, refusals, error pages,
streams cut or gone silent, Stop while the server says nothing, proxies. Each failure must
end the request with exactly one finished delta and a one-line reason."""

from __future__ import annotations

import importlib.util
import logging
import os
import queue
import shutil
import subprocess
import sys
import threading
import time

import pytest

from app.engines.remote import RemoteClient, RemoteEndpoint, RemoteEngine
from app.engines.remote_errors import retry_after_s
from inference import ChatRequest, FinishReason, SamplingParams
from tests.support.remote_standins import Handler, piece, recording_proxy, reply, self_signed, standin, trickle, usage
from tests.support.waiting import wait_until

KEY = "standin-key-0042"


def ask(client: RemoteClient, deltas: queue.SimpleQueue, text: str = "hi"):
    """One request to the end: the text, the final delta, and every delta seen."""
    rid = client.stream(ChatRequest(messages=({"role": "user", "content": text},),
                                    sampling=SamplingParams(temperature=0.0, max_tokens=8)), deltas.put)
    seen = []
    while True:
        d = deltas.get(timeout=30)
        assert d.request_id == rid
        seen.append(d)
        if d.finished:
            break
    # Nothing may follow the finished delta: the request's own thread, the only one that
    # sends its deltas, ends right after it.
    for thread in threading.enumerate():
        if thread.name == f"remote-{rid}":
            thread.join(10)
            assert not thread.is_alive(), "the request's thread outlived its finished delta"
    assert deltas.empty(), "a second delta after the finished one"
    return "".join(d.text for d in seen), seen[-1], seen


def client_for(url: str, **kw) -> tuple[RemoteClient, queue.SimpleQueue]:
    deltas: queue.SimpleQueue = queue.SimpleQueue()
    return RemoteClient(RemoteEndpoint(url, "m", **kw)), deltas


def run_once(url: str, **kw):
    client, deltas = client_for(url, **kw)
    return ask(client, deltas)


# ----- usage ---------------------------------------------------------------------------

def test_token_counts_come_from_the_servers_usage():
    with standin(reply(["Hel", "lo", " there"], send_usage=usage(prompt=11, completion=7))) as srv:
        text, final, _ = run_once(srv.url)
    assert text == "Hello there" and final.finish_reason is FinishReason.STOP
    assert final.stats.prompt_tokens == 11 and final.stats.generated_tokens == 7
    assert srv.seen[0].body["stream_options"] == {"include_usage": True}


def test_the_server_is_sent_openai_s_sampling_fields_and_not_llama_cpps():
    """temperature and top_p always, seed and the reply's length when set, stop when any;
    the chat's top-k, min-p and repeat penalty are not OpenAI's fields, and stay home."""
    def sent(sampling: SamplingParams) -> dict:
        with standin(reply(["ok"])) as srv:
            client, deltas = client_for(srv.url)
            client.stream(ChatRequest(messages=({"role": "user", "content": "hi"},), sampling=sampling), deltas.put)
            while not deltas.get(timeout=30).finished:
                pass
            body = srv.seen[0].body
        return {k: v for k, v in body.items() if k not in ("model", "messages", "stream", "stream_options")}

    chosen = SamplingParams(temperature=0.3, top_p=0.9, seed=5, max_tokens=40, stop=("END",), top_k=7, min_p=0.2)
    assert sent(chosen) == {"temperature": 0.3, "top_p": 0.9, "seed": 5, "max_tokens": 40, "stop": ["END"]}
    assert sent(SamplingParams(max_tokens=-1)) == {"temperature": 0.7, "top_p": 0.95}
    assert sent(SamplingParams(max_tokens=0)) == {"temperature": 0.7, "top_p": 0.95}


def test_without_usage_each_chunk_counts_as_a_token():
    with standin(reply(["a", "b", "c"], end="length")) as srv:
        _, final, _ = run_once(srv.url)
    assert final.finish_reason is FinishReason.LENGTH
    assert final.stats.generated_tokens == 3 and final.stats.prompt_tokens == 0


def test_a_server_that_refuses_stream_options_is_asked_again_without():
    def old_server(h: Handler) -> None:
        if "stream_options" in h.body:
            h.answer(400, {"error": {"message": "Unrecognized request argument supplied: stream_options"}})
        else:
            reply(["old", " but", " fine"])(h)

    with standin(old_server) as srv:
        client, deltas = client_for(srv.url)
        text, final, _ = ask(client, deltas)
        assert text == "old but fine" and final.error is None and final.stats.generated_tokens == 3
        assert ["stream_options" in s.body for s in srv.seen] == [True, False]
        ask(client, deltas)  # the next request does not ask again
        assert ["stream_options" in s.body for s in srv.seen] == [True, False, False]


def test_a_400_for_another_reason_is_reported():
    with standin(lambda h: h.answer(400, {"error": {"message": "temperature must be <= 2"}})) as srv:
        _, final, _ = run_once(srv.url)
    assert final.finish_reason is FinishReason.ERROR
    assert final.error == "the server answered 400: temperature must be <= 2"
    assert len(srv.seen) == 2  # once with stream_options, once without


# ----- refusals and error pages --------------------------------------------------------

@pytest.mark.parametrize(("status", "body", "content_type", "headers", "expected"), [
    (401, {"error": {"message": "Invalid API key"}}, "application/json", {},
     "the server refused the API key (401): Invalid API key"),
    (404, "<html><body>Not here</body></html>", "text/html", {},
     "no such endpoint (http://127.0.0.1:PORT/v1/chat/completions); is the base URL right (…/v1)?"),
    (404, {"error": {"message": "The model `m` does not exist."}}, "application/json", {},
     "the server answered 404: The model `m` does not exist."),
    (429, {"error": {"message": "too many requests"}}, "application/json", {"Retry-After": "7"},
     "the server is busy (429): too many requests; try again in 7 s"),
    (429, "", "text/plain", {}, "the server is busy (429); try again later"),
    (500, {"detail": "CUDA out of memory"}, "application/json", {}, "the server failed (500): CUDA out of memory"),
    (502, "<html><head><title>502 Bad Gateway</title></head><body><h1>nginx</h1></body></html>",
     "text/html", {}, "the server failed (502): 502 Bad Gateway"),
    (503, "<html><body><h1>Service\n  Unavailable</h1><p>loading</p></body></html>", "text/html", {},
     "the server failed (503): Service Unavailable loading"),
])
def test_http_errors_are_one_clear_line(status, body, content_type, headers, expected):
    with standin(lambda h: h.answer(status, body, content_type, headers)) as srv:
        _, final, _ = run_once(srv.url, api_key=KEY)
    assert final.finish_reason is FinishReason.ERROR
    assert final.error == expected.replace("PORT", str(srv.server_port))
    assert "\n" not in final.error and KEY not in final.error


def test_retry_after_as_an_http_date():
    when = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(time.time() + 120))
    assert 100 <= retry_after_s(when) <= 121
    assert retry_after_s("soon") is None


def test_an_error_event_mid_stream():
    def script(h: Handler) -> None:
        h.start_stream()
        h.send_event(piece("Hal"))
        h.send_event({"error": {"message": "the model crashed", "type": "server_error"}})

    with standin(script) as srv:
        text, final, _ = run_once(srv.url)
    assert text == "Hal" and final.finish_reason is FinishReason.ERROR and final.error == "the model crashed"


def test_llama_cpp_style_error_field():
    def script(h: Handler) -> None:
        h.start_stream()
        h.send_raw(b'error: {"code": 500, "message": "context overflow", "type": "server_error"}\n\n')

    with standin(script) as srv:
        _, final, _ = run_once(srv.url)
    assert final.error == "context overflow"


def test_a_dns_failure_is_a_clear_error():
    _, final, _ = run_once("http://no-such-host.invalid/v1")
    assert final.finish_reason is FinishReason.ERROR
    assert final.error.startswith("cannot find the host of http://no-such-host.invalid/v1")


# ----- streams that end badly ----------------------------------------------------------

@pytest.mark.parametrize("chunked", [True, False])
def test_a_server_dying_mid_reply_is_an_error_not_a_quiet_stop(chunked):
    """Chunked or read-until-close: either way, no [DONE] and no finish_reason means the
    reply did not end, and the tab must not show it as done."""
    def script(h: Handler) -> None:
        h.start_stream(chunked=chunked)
        h.send_event(piece("Once"))
        h.send_event(piece(" upon"))
        h.die()

    with standin(script) as srv:
        text, final, _ = run_once(srv.url)
    assert text == "Once upon" and final.finish_reason is FinishReason.ERROR
    assert "in the middle of the reply" in final.error and "did the server stop?" in final.error
    assert final.stats.generated_tokens == 2


def test_a_server_going_silent_mid_reply_times_out():
    def script(h: Handler) -> None:
        h.start_stream()
        h.send_event(piece("Once"))
        time.sleep(5)  # what is tested: a server silent for longer than the client's timeout

    with standin(script) as srv:
        text, final, _ = run_once(srv.url, timeout_s=1.0)
    assert text == "Once" and final.finish_reason is FinishReason.ERROR
    assert final.error == f"{srv.url} went silent for 1 s in the middle of the reply"


def test_a_non_json_event_is_a_clear_error():
    def script(h: Handler) -> None:
        h.start_stream()
        h.send_raw(b"data: <html>oops</html>\n\n")

    with standin(script) as srv:
        _, final, _ = run_once(srv.url)
    assert final.finish_reason is FinishReason.ERROR and "not JSON: <html>oops</html>" in final.error


def test_not_an_openai_server_at_models():
    with standin(lambda h: h.answer(200, "<html>router login</html>", "text/html")) as srv:
        client, _ = client_for(srv.url)
        with pytest.raises(RuntimeError, match="did not answer with a model list"):
            client.models()


# ----- Stop ----------------------------------------------------------------------------

def test_stop_wakes_a_reader_while_the_server_is_silent():
    """Stop while the server says nothing (a long prefill): closing the response alone left
    the reader blocked until the server next spoke. timeout_s is a minute: the CANCELLED
    delta long before it shows the socket was cut, not timed out."""
    release = threading.Event()

    def silent(h: Handler) -> None:
        h.start_stream()
        release.wait(60)

    with standin(silent) as srv:
        client, deltas = client_for(srv.url, timeout_s=60.0)
        rid = client.stream(ChatRequest(messages=({"role": "user", "content": "hi"},)), deltas.put)
        wait_until(lambda: srv.seen, "the request at the server")
        time.sleep(0.2)  # part of the test: the reader is blocked in its read when Stop comes
        client.cancel(rid)
        final = deltas.get(timeout=20)
        release.set()
    assert final.finished and final.finish_reason is FinishReason.CANCELLED and final.error is None


def test_stop_before_the_answers_headers():
    release = threading.Event()
    with standin(lambda h: release.wait(60)) as srv:  # reads the request, never answers
        client, deltas = client_for(srv.url, timeout_s=60.0)
        rid = client.stream(ChatRequest(messages=({"role": "user", "content": "hi"},)), deltas.put)
        wait_until(lambda: srv.seen, "the request at the server")
        client.cancel(rid)
        final = deltas.get(timeout=20)
        release.set()
    assert final.finish_reason is FinishReason.CANCELLED


def test_stop_right_after_submit():
    with standin(trickle) as srv:
        client, deltas = client_for(srv.url)
        rid = client.stream(ChatRequest(messages=({"role": "user", "content": "hi"},)), deltas.put)
        client.cancel(rid)
        while not (final := deltas.get(timeout=20)).finished:
            pass
    assert final.finish_reason is FinishReason.CANCELLED


def test_shutdown_ends_every_running_reply_as_cancelled():
    with standin(trickle) as srv:
        deltas: queue.SimpleQueue = queue.SimpleQueue()
        engine = RemoteEngine(RemoteEndpoint(srv.url, "m"))
        rids = {engine.stream(ChatRequest(messages=({"role": "user", "content": f"hi {i}"},)), deltas.put)
                for i in range(3)}
        texts: set[str] = set()
        while len(texts) < 3:  # each has begun
            texts.add(deltas.get(timeout=10).request_id)
        engine.shutdown()
        finals = {}
        while len(finals) < 3:
            d = deltas.get(timeout=20)
            if d.finished:
                finals[d.request_id] = d.finish_reason
    assert finals == dict.fromkeys(rids, FinishReason.CANCELLED)


# ----- the key -------------------------------------------------------------------------

def test_the_key_is_sent_as_a_bearer_header_and_logged_nowhere(caplog):
    caplog.set_level(logging.DEBUG)  # httpx and httpcore log at DEBUG too
    with standin(reply(["ok"])) as srv:
        text, final, seen = run_once(srv.url, api_key=KEY)
    assert srv.seen[0].headers["Authorization"] == f"Bearer {KEY}"
    assert text == "ok" and caplog.records  # something was logged, none of it the key
    assert KEY not in caplog.text and all(KEY not in repr(d) for d in seen)


@pytest.mark.parametrize("url", ["ftp://example/v1", "example.com/v1", "http:///v1", "http://user:pw@host/v1"])
def test_bad_urls_are_refused(url):
    with pytest.raises(ValueError, match="not an http|API key in its own field"):
        RemoteClient(RemoteEndpoint(url, "m"))


# ----- proxies -------------------------------------------------------------------------

PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY")


@pytest.fixture
def proxy_env(monkeypatch):
    """No proxy settings but the test's own (lowercase ones win over uppercase: both go)."""
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    return monkeypatch


def test_http_proxy_from_the_environment_is_used(proxy_env):
    with recording_proxy() as proxy:
        proxy_env.setenv("HTTP_PROXY", proxy.url)
        text, final, _ = run_once("http://llm.chorus-test.example/v1")
    assert proxy.lines == ["POST http://llm.chorus-test.example/v1/chat/completions HTTP/1.1"]
    assert text == "via the proxy" and final.finish_reason is FinishReason.STOP


def test_no_proxy_and_loopback_go_direct(proxy_env):
    with recording_proxy() as proxy, standin(reply(["direct"])) as srv:
        proxy_env.setenv("HTTP_PROXY", proxy.url)
        proxy_env.setenv("NO_PROXY", "llm.chorus-test.example")
        _, final, _ = run_once("http://llm.chorus-test.example/v1")  # named in NO_PROXY
        assert final.error.startswith("cannot find the host")  # went direct, found no such host
        proxy_env.delenv("NO_PROXY")
        text, _, _ = run_once(srv.url)  # loopback: never through a proxy
        assert text == "direct" and len(srv.seen) == 1
    assert proxy.lines == []


def test_the_engine_refuses_a_bad_url_at_start_as_enginelike_says():
    """The app builds the engine in its connecting thread: a bad URL raising there killed the
    thread and left "connecting…" on screen; start() says why and the state is FAILED."""
    deltas: queue.SimpleQueue = queue.SimpleQueue()
    engine = RemoteEngine(RemoteEndpoint("localhost:8080/v1", "m"))
    with pytest.raises(RuntimeError, match="not an http"):
        engine.start()
    assert engine.state.status == "failed" and "not an http" in engine.state.error
    rid = engine.stream(ChatRequest(messages=({"role": "user", "content": "hi"},)), deltas.put)
    final = deltas.get(timeout=5)
    assert final.request_id == rid and final.finish_reason is FinishReason.ERROR and "not an http" in final.error


def test_a_socks_proxy_without_its_package_is_a_clear_refusal(proxy_env):
    if importlib.util.find_spec("socksio") is not None:
        pytest.skip("socksio is installed: SOCKS proxies work")
    proxy_env.setenv("ALL_PROXY", "socks5://127.0.0.1:1080")
    with pytest.raises(ValueError, match="SOCKS proxy .* socksio"):
        RemoteClient(RemoteEndpoint("http://llm.chorus-test.example/v1", "m"))


# ----- TLS -----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def certificate(tmp_path_factory):
    if shutil.which("openssl") is None:
        pytest.skip("no openssl command to make a certificate")
    return self_signed(tmp_path_factory.mktemp("tls"))


def test_an_untrusted_certificate_is_a_clear_error(certificate):
    _, context = certificate
    with standin(reply(["secret"]), tls=context) as srv:
        _, final, _ = run_once(srv.url)
    assert final.finish_reason is FinishReason.ERROR
    assert final.error.startswith(f"{srv.url}: the server's TLS certificate is not trusted")


def test_https_with_a_certificate_from_ssl_cert_file_and_stop_while_silent(certificate, monkeypatch):
    """SSL_CERT_FILE from the environment is trusted (httpx's trust_env); Stop cuts a TLS
    connection as it does a plain one."""
    cert, context = certificate
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    release = threading.Event()

    def first_then_silent(h: Handler) -> None:
        h.start_stream()
        h.send_event(piece("Hello"))
        release.wait(60)

    with standin(first_then_silent, tls=context) as srv:
        client, deltas = client_for(srv.url, timeout_s=60.0)
        rid = client.stream(ChatRequest(messages=({"role": "user", "content": "hi"},)), deltas.put)
        assert deltas.get(timeout=20).text == "Hello"
        time.sleep(0.2)  # part of the test: the reader is blocked in its read when Stop comes
        client.cancel(rid)
        final = deltas.get(timeout=20)
        release.set()
    assert final.finish_reason is FinishReason.CANCELLED and final.error is None


def test_a_server_that_ignores_stream_true_is_read_all_at_once():
    completion = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "All at once."},
                               "finish_reason": "length"}], "usage": usage(5, 3)["usage"]}
    with standin(lambda h: h.answer(200, completion)) as srv:
        text, final, _ = run_once(srv.url)
    assert text == "All at once." and final.finish_reason is FinishReason.LENGTH
    assert (final.stats.prompt_tokens, final.stats.generated_tokens) == (5, 3)


def test_odd_event_shapes_are_skipped_not_fatal():
    def script(h: Handler) -> None:
        h.start_stream()
        for odd in ({"choices": {"0": 1}}, {"choices": ["x"]}, {"choices": [{"delta": "text"}]},
                    {"choices": [{"delta": {"content": 7}}]}, {"object": "keep-alive"}):
            h.send_event(odd)
        h.send_raw(b": ping\n\n")
        h.send_event(piece("fine", "stop"))
        h.end_stream()

    with standin(script) as srv:
        text, final, _ = run_once(srv.url)
    assert text == "fine" and final.finish_reason is FinishReason.STOP and final.error is None


# ----- a real server killed mid-reply ----------------------------------------------------

@pytest.mark.model
def test_a_chorus_server_killed_mid_reply_is_an_error(model_path, tmp_path):
    """`chorus serve` killed (SIGKILL) while it streams: the reply must end as an error, not
    look finished (issue 13: the official client saw a quiet end, finish_reason None)."""
    env = {**os.environ, "CHORUS_DATA_DIR": str(tmp_path)}
    serve = subprocess.Popen([sys.executable, "-m", "app", "serve", "--model", str(model_path), "--port", "0"],
                             stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert serve.stderr is not None
        announced = ""
        while " at http" not in announced:  # "serving X at http://127.0.0.1:PORT/v1 (...)"
            announced = serve.stderr.readline()
            assert announced, "chorus serve exited before serving"
        url = announced.split(" at ", 1)[1].split()[0]
        client, deltas = client_for(url)
        rid = client.stream(ChatRequest(messages=({"role": "user", "content": "Tell a very long story."},),
                                        sampling=SamplingParams(max_tokens=4000)), deltas.put)
        assert deltas.get(timeout=60).text  # it is streaming
        serve.kill()
        while not (final := deltas.get(timeout=60)).finished:
            pass
    finally:
        serve.kill()
        serve.wait(30)
    assert final.request_id == rid and final.finish_reason is FinishReason.ERROR
    assert "in the middle of the reply" in final.error
