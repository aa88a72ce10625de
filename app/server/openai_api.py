"""An OpenAI-compatible HTTP server over one engine: /v1/models, /v1/chat/completions
(streaming and not) and /metrics (Prometheus text).

Every HTTP request becomes an engine request, so concurrent clients share one batch with
each other (and with anything else using the engine). Bound to loopback unless told
otherwise; with an API key, requests without it get 401. Standard library only.
"""

from __future__ import annotations

import hmac
import json
import logging
import socket
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from app.engines.finish import openai_finish_reason
from app.engines.protocol import ServedEngine
from inference import ChatRequest, FinishReason, SamplingParams
from inference.errors import EngineError, RequestError
from inference.metrics import MetricsSnapshot

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class ServerConfig:
    host: str = "127.0.0.1"
    port: int = 8080
    api_key: str | None = None
    model_id: str = "chorus"


def sampling_from(body: dict) -> SamplingParams:
    """OpenAI request fields to engine sampling (unknown fields are ignored, as OpenAI's
    own clients send many)."""
    stop = body.get("stop") or ()
    if isinstance(stop, str):
        stop = (stop,)
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    params = SamplingParams(
        temperature=float(body.get("temperature", 1.0)),
        top_p=float(body.get("top_p", 1.0)),
        seed=body.get("seed"),
        max_tokens=int(max_tokens) if max_tokens is not None else 512,
        stop=tuple(stop),
        repeat_penalty=1.0,
        top_k=0,
        min_p=0.0,
    )
    params.validate()
    return params


def prometheus(m: MetricsSnapshot) -> str:
    rows = [
        ("chorus_prefill_tokens_per_second", "gauge", m.prefill_tok_s),
        ("chorus_decode_tokens_per_second", "gauge", m.decode_tok_s),
        ("chorus_batch_sequences", "gauge", m.last_step_seqs),
        ("chorus_requests_running", "gauge", m.running),
        ("chorus_requests_queued", "gauge", m.queued),
        ("chorus_kv_cells_used", "gauge", m.kv_cells_used),
        ("chorus_kv_cells_total", "gauge", m.kv_cells_total),
        ("chorus_kv_cells_shared", "gauge", m.kv_cells_shared),
        ("chorus_prefix_hits_total", "counter", m.prefix_hits),
        ("chorus_prompt_tokens_saved_total", "counter", m.prompt_tokens_saved),
        ("chorus_prompt_tokens_computed_total", "counter", m.prompt_tokens_computed),
        ("chorus_generated_tokens_total", "counter", m.generated_tokens),
        ("chorus_requests_finished_total", "counter", m.requests_finished),
        ("chorus_requests_failed_total", "counter", m.requests_failed),
    ]
    lines = []
    for name, kind, value in rows:
        lines += [f"# TYPE {name} {kind}", f"{name} {float(value):.6g}"]
    for name, value in (("chorus_ttft_seconds_p50", m.ttft_p50_s), ("chorus_ttft_seconds_p95", m.ttft_p95_s),
                        ("chorus_itl_seconds_p50", m.itl_p50_s), ("chorus_itl_seconds_p95", m.itl_p95_s)):
        if value is not None:
            lines += [f"# TYPE {name} gauge", f"{name} {value:.6g}"]
    return "\n".join(lines) + "\n"


class _Handler(BaseHTTPRequestHandler):
    server: ChorusHTTPServer
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt: str, *args: Any) -> None:  # keys must never reach logs
        log.debug("%s %s", self.address_string(), fmt % args)

    # ----- routing -------------------------------------------------------------------

    def do_GET(self) -> None:
        if not self._authorized():
            return
        if self.path.rstrip("/") == "/v1/models":
            model = {"id": self.server.config.model_id, "object": "model", "created": 0, "owned_by": "chorus"}
            self._json(200, {"object": "list", "data": [model]})
        elif self.path == "/metrics":
            try:
                snapshot = self.server.engine.metrics(fresh=True)
            except EngineError as exc:  # e.g. the app's engine is still loading
                self._error(503, str(exc), "server_error")
                return
            self._text(200, prometheus(snapshot), "text/plain; version=0.0.4")
        else:
            self._error(404, f"no route for GET {self.path}")

    def do_POST(self) -> None:
        if not self._authorized():
            return
        if self.path.rstrip("/") != "/v1/chat/completions":
            self._error(404, f"no route for POST {self.path}")
            return
        body = self._body()
        if body is None:
            return
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            self._error(400, "messages must be a non-empty list")
            return
        try:
            sampling = sampling_from(body)
        except (RequestError, TypeError, ValueError) as exc:
            self._error(400, str(exc))
            return
        chat = ChatRequest(messages=tuple(_plain(m) for m in messages), sampling=sampling, fit_context=False)
        if body.get("stream"):
            self._stream(chat)
        else:
            self._complete(chat)

    # ----- completions -----------------------------------------------------------------

    def _complete(self, chat: ChatRequest) -> None:
        handle = self.server.engine.submit(chat)
        result = handle.result()
        if result.finish_reason is FinishReason.ERROR:
            self._error(400, result.error or "the request failed")
            return
        stats = result.stats
        self._json(200, {
            "id": f"chatcmpl-{handle.request_id}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.server.config.model_id,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": result.text},
                         "finish_reason": openai_finish_reason(result.finish_reason)}],
            "usage": {"prompt_tokens": stats.prompt_tokens, "completion_tokens": stats.generated_tokens,
                      "total_tokens": stats.prompt_tokens + stats.generated_tokens},
        })

    def _stream(self, chat: ChatRequest) -> None:
        handle = self.server.engine.submit(chat)
        chunk_id = f"chatcmpl-{handle.request_id}"
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        try:
            self._event(_chunk(chunk_id, self.server.config.model_id, {"role": "assistant", "content": ""}, None))
            for delta in handle:
                if delta.finish_reason is FinishReason.ERROR:
                    self._event({"error": {"message": delta.error, "type": "invalid_request_error"}})
                    break
                if delta.text:
                    self._event(_chunk(chunk_id, self.server.config.model_id, {"content": delta.text}, None))
                if delta.finished:
                    self._event(_chunk(chunk_id, self.server.config.model_id, {},
                                       openai_finish_reason(delta.finish_reason)))
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            handle.cancel()  # the client went away: free its sequence for the others

    # ----- plumbing --------------------------------------------------------------------

    def _authorized(self) -> bool:
        key = self.server.config.api_key
        if key is None:
            return True
        given = self.headers.get("Authorization", "")
        if given.startswith("Bearer ") and hmac.compare_digest(given[7:].encode(), key.encode()):
            return True
        self._error(401, "missing or wrong API key", "authentication_error")
        return False

    def _body(self) -> dict | None:
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY_BYTES:
            self._error(413, f"request body over {MAX_BODY_BYTES} bytes")
            return None
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except json.JSONDecodeError as exc:
            self._error(400, f"the body is not JSON: {exc.msg}")
            return None
        if not isinstance(body, dict):
            self._error(400, "the body must be a JSON object")
            return None
        return body

    def _event(self, payload: dict) -> None:
        self.wfile.write(b"data: " + json.dumps(payload).encode() + b"\n\n")
        self.wfile.flush()

    def _json(self, status: int, payload: dict) -> None:
        self._text(status, json.dumps(payload), "application/json")

    def _text(self, status: int, text: str, content_type: str) -> None:
        data = text.encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, message: str, kind: str = "invalid_request_error") -> None:
        self._json(status, {"error": {"message": message, "type": kind, "code": status}})


def _plain(message: Any) -> dict:
    if not isinstance(message, dict):
        return {"role": "", "content": ""}  # the chat template refuses it with a clear error
    content = message.get("content")
    if isinstance(content, list):  # OpenAI's content parts: keep the text ones
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return {"role": message.get("role"), "content": content if isinstance(content, str) else ""}


def _chunk(chunk_id: str, model: str, delta: dict, finish: str | None) -> dict:
    return {"id": chunk_id, "object": "chat.completion.chunk", "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


class ChorusHTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, engine: ServedEngine, config: ServerConfig) -> None:
        self.engine = engine
        self.config = config
        self._connections: set[socket.socket] = set()
        self._connections_lock = threading.Lock()
        super().__init__((config.host, config.port), _Handler)

    # Open connections are tracked so that stopping the server also ends kept-alive ones:
    # closing the listening socket alone leaves their threads serving.
    def get_request(self):
        sock, address = super().get_request()
        with self._connections_lock:
            self._connections.add(sock)
        return sock, address

    def shutdown_request(self, request) -> None:
        with self._connections_lock:
            self._connections.discard(request)
        super().shutdown_request(request)

    def close(self) -> None:
        """Stop listening and end every open connection."""
        self.shutdown()
        self.server_close()
        with self._connections_lock:
            connections = list(self._connections)
        for sock in connections:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # already closed by its client

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}"

    def serve_in_thread(self) -> threading.Thread:
        thread = threading.Thread(target=self.serve_forever, name="openai-server", daemon=True)
        thread.start()
        return thread
