"""`chorus bench-serve`'s client and report, against canned answers from a loopback socket
server (no model), and once end to end on the real model."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import socketserver
import struct
import time

import pytest

from app.bench import raw_http
from app.bench.load_report import LoadReport
from app.bench.raw_http import ClientResult, SseParser, Target, chat_body, stream_chat
from app.cli.main import main
from tests.support.net import serving_on_a_thread


def sse(*events: object) -> bytes:
    return b"".join(b"data: " + (e if isinstance(e, bytes) else json.dumps(e).encode()) + b"\n\n" for e in events)


def token(text: str) -> dict:
    return {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]}


ROLE = {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]}
USAGE = {"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 5, "total_tokens": 14}}


def chunked(body: bytes, piece: int = 7) -> bytes:
    """`body` in chunks of `piece` bytes, cut anywhere (inside events too), then the last chunk."""
    parts = [body[i:i + piece] for i in range(0, len(body), piece)]
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts) + b"0\r\n\r\n"


def head(status: str, *headers: str) -> bytes:
    return ("\r\n".join([f"HTTP/1.1 {status}", *headers]) + "\r\n\r\n").encode()


# ----- a loopback server with one canned behaviour ----------------------------------------------


class _Handler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        data = b""
        while b"\r\n\r\n" not in data:
            piece = self.request.recv(65536)
            if not piece:
                return
            data += piece
        head_bytes, body = data.split(b"\r\n\r\n", 1)
        length = int(next(line.split(b":")[1] for line in head_bytes.split(b"\r\n")
                          if line.lower().startswith(b"content-length")))
        while len(body) < length:
            body += self.request.recv(65536)
        self.server.requests.append(json.loads(body))  # type: ignore[attr-defined]
        self.server.behaviour(self.request)  # type: ignore[attr-defined]


@contextlib.contextmanager
def canned(behaviour):
    """A server that reads each request, then lets `behaviour(sock)` answer it."""
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    server.behaviour = behaviour  # type: ignore[attr-defined]
    server.requests = []  # type: ignore[attr-defined]
    with serving_on_a_thread(server):
        yield server


def ask(server, timeout_s: float = 10.0, api_key: str | None = None) -> ClientResult:
    target = Target("127.0.0.1", server.server_address[1], api_key)
    return asyncio.run(stream_chat(target, chat_body(5), timeout_s))


def sender(data: bytes):
    return lambda sock: sock.sendall(data)


# ----- SSE -------------------------------------------------------------------------------------


def test_sse_events_come_whole_whatever_the_pieces():
    stream = b": a comment\r\n\r\ndata: one\r\n\r\ndata: two\ndata: lines\n\nevent: x\ndata:three\n\ndata: [DONE]\n\n"
    parser = SseParser()
    events = [e for i in range(len(stream)) for e in parser.feed(stream[i:i + 1])]
    assert events == ["one", "two\nlines", "three", "[DONE]"]
    assert SseParser().feed(b"data: partial") == []


# ----- one client against canned answers --------------------------------------------------------


def test_a_chunked_stream_completes_with_usage_tokens_and_ttft():
    body = sse(ROLE, token("one"), token(" two"), token(" three"), USAGE, b"[DONE]")
    answer = head("200 OK", "Content-Type: text/event-stream", "Transfer-Encoding: chunked") + chunked(body)
    with canned(sender(answer)) as server:
        result = ask(server, api_key="k")
    assert result.completed and not result.rejected and result.failure is None
    assert result.tokens == 5  # the usage block's count wins over the 3 content chunks
    assert 0 < result.ttft_s <= result.latency_s
    sent = server.requests[0]
    assert sent["stream"] is True and sent["max_tokens"] == 5 and sent["stream_options"] == {"include_usage": True}


def test_a_stream_read_until_close_counts_content_chunks():
    body = sse(ROLE, token("a"), token("b"), {"choices": [{"delta": {}, "finish_reason": "length"}]}, b"[DONE]")
    with canned(sender(head("200 OK", "Content-Type: text/event-stream", "Connection: close") + body)) as server:
        result = ask(server)
    assert result.completed and result.tokens == 2


def test_a_429_is_a_clean_refusal_with_its_retry_after():
    error = json.dumps({"error": {"message": "busy, come back later", "type": "rate_limit"}}).encode()
    answer = head("429 Too Many Requests", "Retry-After: 2", f"Content-Length: {len(error)}") + error
    with canned(sender(answer)) as server:
        result = ask(server)
    assert result.rejected and not result.completed and result.failure is None
    assert (result.status, result.retry_after, result.detail) == (429, "2", "busy, come back later")


def test_a_5xx_fails_with_the_servers_message():
    error = json.dumps({"error": {"message": "the engine stopped"}}).encode()
    with canned(sender(head("503 Service Unavailable", f"Content-Length: {len(error)}") + error)) as server:
        result = ask(server)
    assert (result.failure, result.status) == (raw_http.SERVER_ERROR, 503)
    assert "the engine stopped" in result.detail


def test_a_4xx_or_an_error_event_or_a_cut_stream_is_other():
    bad = head("400 Bad Request", "Content-Length: 2") + b"{}"
    error_event = head("200 OK", "Connection: close") + sse(ROLE, {"error": {"message": "prompt too long"}})
    cut = head("200 OK", "Transfer-Encoding: chunked") + chunked(sse(ROLE, token("a")))[:-5]  # no last chunk
    no_done = head("200 OK", "Connection: close") + sse(ROLE, token("a"))
    details = []
    for answer in (bad, error_event, cut, no_done):
        with canned(sender(answer)) as server:
            result = ask(server)
        assert result.failure == raw_http.OTHER and not result.completed
        details.append(result.detail)
    assert "HTTP 400" in details[0] and "prompt too long" in details[1]
    assert "closed in the middle" in details[2] and "without [DONE]" in details[3]


def test_a_reset_connection_is_counted_as_a_reset():
    def reset(sock):  # linger 0: close() sends RST, as a server dropping the connection does
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()

    with canned(reset) as server:
        result = ask(server)
    assert result.failure == raw_http.RESET and result.status is None


def test_a_closed_port_is_refused():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: connections are refused
        result = asyncio.run(stream_chat(Target("127.0.0.1", port), chat_body(5), 5))
    assert result.failure == raw_http.REFUSED


def test_a_silent_server_times_out_and_says_where():
    with canned(lambda sock: time.sleep(3)) as server:  # what is tested: a server silent for 3 s
        result = ask(server, timeout_s=0.5)
    assert result.failure == raw_http.TIMEOUT
    assert "waiting for the response headers" in result.detail and result.latency_s < 3


def test_target_from_url():
    assert Target.from_url("http://127.0.0.1:8080/", "k") == Target("127.0.0.1", 8080, "k")
    assert Target.from_url("localhost:9000") == Target("localhost", 9000)
    with pytest.raises(ValueError, match="https"):
        Target.from_url("https://example.com")


# ----- the report -------------------------------------------------------------------------------


def test_the_report_adds_up_completions_429s_and_failures_by_kind():
    results = [
        *(ClientResult(status=200, ttft_s=t, latency_s=t + 1, tokens=16) for t in (0.1, 0.2, 0.3, 0.4)),
        ClientResult(status=429, retry_after="1", latency_s=0.01),
        ClientResult(status=429, latency_s=0.01),
        ClientResult(failure=raw_http.RESET, detail="ConnectionResetError"),
        ClientResult(failure=raw_http.RESET, detail="ConnectionResetError"),
        ClientResult(failure=raw_http.RESET, detail="closed"),
        ClientResult(status=500, failure=raw_http.SERVER_ERROR, detail="HTTP 500: boom"),
    ]
    after = ClientResult(status=200, ttft_s=0.05, latency_s=0.2, tokens=16)
    report = LoadReport.of(results, max_tokens=16, wall_s=2.0, after=after)
    assert (report.clients, report.completed, report.rejected_429, report.retry_after_seen) == (10, 4, 2, 1)
    assert report.failed == {"reset": 3, "refused": 0, "timeout": 0, "5xx": 1, "other": 0}
    assert report.examples["reset"] == "2x ConnectionResetError"
    assert (report.ttft_s.p50, report.ttft_s.max) == (0.3, 0.4)  # nearest rank
    assert report.latency_s.p95 == 1.4
    assert report.generated_tokens == 64 and report.tok_s == 32.0
    data = report.as_dict()
    assert data["failed"]["total"] == 4 and data["after_load"]["completed"] is True
    assert json.loads(json.dumps(data)) == data  # one JSON object, as --json prints
    text = "\n".join(report.lines())
    assert "completed 4/10, 429 2 (Retry-After on 1), failed 4" in text and "served in 0.20 s" in text


def test_a_report_of_nothing_completed_has_no_percentiles():
    failed = ClientResult(failure=raw_http.TIMEOUT, detail="no answer", latency_s=5.0)
    report = LoadReport.of([failed], max_tokens=4, wall_s=5.0, after=failed)
    assert report.ttft_s.p50 is None and report.tok_s == 0.0
    assert "TTFT     none" in report.lines() and "FAILED" in report.lines()[-1]


# ----- the command ------------------------------------------------------------------------------


def test_bench_serve_against_a_given_server_prints_one_json_object(capsys):
    body = sse(ROLE, token("x"), b"[DONE]")
    with canned(sender(head("200 OK", "Transfer-Encoding: chunked") + chunked(body))) as server:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        assert main(["bench-serve", "--server", url, "--clients", "5", "--max-tokens", "3", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["completed"] == 5 and out["failed"]["total"] == 0 and out["generated_tokens"] == 5
    assert out["after_load"]["completed"] is True
    assert {"rejected_429", "retry_after_seen", "ttft_s", "latency_s", "tok_s"} <= out.keys()
    assert len(server.requests) == 6  # the clients and the one after


def test_bench_serve_sends_the_same_requests_again_each_round_with_the_shared_system_prompt(capsys):
    body = sse(ROLE, token("x"), b"[DONE]")
    with canned(sender(head("200 OK", "Transfer-Encoding: chunked") + chunked(body))) as server:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        argv = ["bench-serve", "--server", url, "--clients", "3", "--max-tokens", "2", "--rounds", "3",
                "--system-words", "120", "--json"]
        assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert len(out["earlier_rounds"]) == 2 and all(r["completed"] == 3 for r in out["earlier_rounds"])
    assert out["completed"] == 3 and out["after_load"]["completed"] is True
    bodies = server.requests
    assert len(bodies) == 3 * 3 + 1  # the request after the load only after the last round
    loads = [b for b in bodies if b["messages"][-1]["content"] != "After the load: say hello."]
    systems = {b["messages"][0]["content"] for b in loads}
    assert len(systems) == 1 and all(b["messages"][0]["role"] == "system" for b in loads)
    assert 120 <= len(systems.pop().split()) < 140  # about the words asked
    questions = sorted(b["messages"][-1]["content"] for b in loads)
    assert questions == sorted([f"Client {i}: count from one to twenty in words." for i in range(3)] * 3)


def test_bench_serve_says_when_the_server_cannot_be_reached(capsys):
    assert main(["bench-serve", "--server", "https://example.invalid", "--clients", "1"]) == 2
    assert "only plain http://" in capsys.readouterr().err


@pytest.mark.model
def test_bench_serve_starts_a_server_and_loads_it(model_path, capsys):
    argv = ["bench-serve", "--model", str(model_path), "--ctx", "2048", "--parallel", "4",
            "--clients", "8", "--max-tokens", "4", "--json"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["completed"] == 8 and out["failed"]["total"] == 0
    assert 8 <= out["generated_tokens"] <= 32 and out["ttft_s"]["max"] <= out["latency_s"]["max"]
    assert out["after_load"]["completed"] is True
