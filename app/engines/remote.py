"""A remote OpenAI-compatible endpoint (vLLM, llama.cpp's server, Ollama, another Chorus)
behind the same interface as the local engine client: submit, cancel, deltas out.

One thread per request streams the server-sent events over httpx. Stop cuts that request's
connection from whichever thread asks, so the reader wakes at once even while the server is
still silent (prefilling). Every request ends with exactly one finished delta: CANCELLED
after Stop, otherwise a one-line reason for any failure (wrong URL, refused connection, bad
key, busy or broken server, a stream cut mid-reply, silence). The API key goes in a header
and nowhere else. Proxies come from the environment (HTTP_PROXY, HTTPS_PROXY, NO_PROXY),
except for a server on this machine's loopback, which no proxy elsewhere could reach.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import httpx

from app.engines.finish import from_openai
from app.engines.protocol import EngineState, EngineStatus, StateCallback
from app.engines.remote_errors import RemoteError, event_error, explain, http_error
from app.engines.sse import events
from inference.ids import new_request_id
from inference.outputs import Delta, FinishReason, Phase, RequestStats
from inference.params import ChatRequest

__all__ = ["RemoteClient", "RemoteEndpoint", "RemoteEngine", "RemoteError"]

log = logging.getLogger(__name__)

ERROR_BODY_BYTES = 64 * 1024  # enough for any error message; an HTML page is cut there


@dataclass(frozen=True)
class RemoteEndpoint:
    base_url: str  # e.g. http://127.0.0.1:8080/v1
    model: str
    api_key: str | None = None
    timeout_s: float = 60.0  # the longest silence accepted: before the answer, between chunks
    connect_timeout_s: float = 10.0

    def __repr__(self) -> str:  # keeps the key out of logs and tracebacks
        return f"RemoteEndpoint({self.base_url!r}, model={self.model!r}, api_key={'***' if self.api_key else None})"

    def check(self) -> None:
        try:
            url = httpx.URL(self.base_url)
        except (httpx.InvalidURL, TypeError) as exc:
            raise ValueError(f"not an http(s) URL: {self.base_url!r} ({exc})") from None
        if url.scheme not in ("http", "https") or not url.host:
            raise ValueError(f"not an http(s) URL: {self.base_url!r} (for example http://127.0.0.1:8080/v1)")
        if url.userinfo:  # a password in the address would end up in every log line
            raise ValueError("put the API key in its own field, not in the URL")

    @property
    def timeouts(self) -> httpx.Timeout:
        return httpx.Timeout(self.timeout_s, connect=self.connect_timeout_s, pool=self.connect_timeout_s)

    @property
    def on_loopback(self) -> bool:
        host = httpx.URL(self.base_url).host
        if host == "localhost":
            return True
        try:
            return ipaddress.ip_address(host).is_loopback
        except ValueError:
            return False


class _Line:
    """One request's connection, so that Stop can cut it from another thread.

    Closing an httpx response from another thread only closes the socket's file: a reader
    blocked in recv() stays blocked until the server next sends something, which may be a
    minute away while it prefills. shutdown() wakes it at once. httpx reports each socket it
    opens through the `trace` extension; that is where the socket is caught."""

    def __init__(self) -> None:
        self.cancelled = False
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()

    def trace(self, event: str, info: dict[str, Any]) -> None:
        if not event.endswith((".connect_tcp.complete", ".start_tls.complete")):
            return
        sock = info["return_value"].get_extra_info("socket")
        with self._lock:
            self._sockets.append(sock)
            cut = self.cancelled
        if cut:  # Stop came while connecting
            _shut(sock)

    def cancel(self) -> None:
        with self._lock:
            self.cancelled = True
            sockets = list(self._sockets)
        for sock in sockets:
            _shut(sock)


def _shut(sock: socket.socket) -> None:
    try:
        # socket.socket's own shutdown even for a TLS socket: ssl.SSLSocket.shutdown would
        # also drop its TLS state under the reader, which then fails in odd ways.
        socket.socket.shutdown(sock, socket.SHUT_RDWR)
    except OSError:
        pass  # already closed (the reply ended as Stop came), or detached by TLS


@dataclass
class _Reading:
    """What one reply has brought so far."""

    started: float = field(default_factory=time.perf_counter)
    first: float | None = None
    chunks: int = 0
    reason: FinishReason | None = None  # the server's finish_reason, once sent
    usage: dict | None = None

    def take(self, payload: dict) -> str:
        """The text piece of one event; raises RemoteError for an error event."""
        if "error" in payload and not payload.get("choices"):
            raise RemoteError(event_error(payload))
        if isinstance(payload.get("usage"), dict):
            self.usage = payload["usage"]
        choices = payload.get("choices")
        choice = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else {}
        # "delta" in a stream; "message" in an answer sent all at once
        part = choice.get("delta") or choice.get("message") or {}
        piece = part.get("content") if isinstance(part, dict) else None
        piece = piece if isinstance(piece, str) else ""
        if piece:
            self.first = self.first or time.perf_counter()
            self.chunks += 1
        if choice.get("finish_reason"):
            self.reason = from_openai(choice["finish_reason"])
        return piece

    def stats(self) -> RequestStats:
        """Token counts from the server's usage where it sent one, else one token a chunk."""
        now = time.perf_counter()
        usage = self.usage or {}
        generated = _count(usage.get("completion_tokens"), self.chunks)
        cached = _count((usage.get("prompt_tokens_details") or {}).get("cached_tokens"), 0)
        decode_s = now - self.first if self.first else 0.0
        return RequestStats(
            prompt_tokens=_count(usage.get("prompt_tokens"), 0), cached_tokens=cached,
            generated_tokens=generated, queue_s=0.0,
            ttft_s=(self.first - self.started) if self.first else None,
            decode_tok_s=(generated - 1) / decode_s if decode_s > 0 and generated > 1 else None,
            itl_p50_s=None, itl_p95_s=None, total_s=now - self.started,
        )


def _is_json(response: httpx.Response) -> bool:
    kind = response.headers.get("content-type", "").lower()
    return "json" in kind and "event-stream" not in kind


def _json_object(body: bytes) -> dict:
    try:
        payload = json.loads(body)
    except ValueError:
        payload = None
    if not isinstance(payload, dict):
        raise RemoteError("the server answered with JSON that is not a chat completion")
    return payload


def _count(value: object, default: int) -> int:
    return value if isinstance(value, int) and value >= 0 else default


def http_client(endpoint: RemoteEndpoint) -> httpx.Client:
    """The client for one endpoint: its timeouts, its key, proxies from the environment.

    No keep-alive: each reply has a connection of its own, so that Stop can cut it (see
    _Line) without harming a connection the pool would hand to the next request."""
    headers = {"Accept": "text/event-stream, application/json"}
    if endpoint.api_key:
        headers["Authorization"] = f"Bearer {endpoint.api_key}"
    # httpx would send even 127.0.0.1 through HTTP_PROXY unless NO_PROXY names it; a proxy
    # on another machine cannot reach this one's loopback.
    host = httpx.URL(endpoint.base_url).host
    mounts = {f"all://{f'[{host}]' if ':' in host else host}": None} if endpoint.on_loopback else None
    try:
        return httpx.Client(
            headers=headers, timeout=endpoint.timeouts, trust_env=True, mounts=mounts,
            limits=httpx.Limits(max_keepalive_connections=0),
        )
    except ImportError:  # ALL_PROXY=socks5://… needs an extra httpx does not bring
        raise ValueError("the environment names a SOCKS proxy (ALL_PROXY), which needs the socksio package "
                         "(pip install 'httpx[socks]'); or name this server in NO_PROXY") from None
    except httpx.InvalidURL as exc:  # a malformed *_PROXY variable
        raise ValueError(f"a proxy variable in the environment is not a URL: {exc}") from None


class RemoteClient:
    def __init__(self, endpoint: RemoteEndpoint, on_delta: Callable[[Delta], None]) -> None:
        endpoint.check()
        self.endpoint = endpoint
        self._on_delta = on_delta
        self._http = http_client(endpoint)
        self._lines: dict[str, _Line] = {}
        self._lock = threading.Lock()
        # Usage in streams is asked for until a server refuses the field (older servers
        # reject unknown ones with 400); then chunks are counted instead.
        self._usage_in_streams = True

    def models(self) -> list[str]:
        url = self._url("/models")
        try:
            response = self._http.get(url)
        except httpx.HTTPError as exc:
            raise RemoteError(explain(exc, self.endpoint.base_url, self.endpoint.timeouts)) from None
        if response.is_error:
            raise RemoteError(http_error(response.status_code, response.headers, response.content, url))
        try:
            return [str(m["id"]) for m in response.json()["data"]]
        except (ValueError, KeyError, TypeError):
            raise RemoteError(f"{url} did not answer with a model list: is it an OpenAI-compatible server?") from None

    def submit(self, chat: ChatRequest) -> str:
        request_id = chat.request_id or new_request_id()
        chat = replace(chat, request_id=request_id)
        line = _Line()
        with self._lock:  # before the thread starts, so that an early Stop finds it
            self._lines[request_id] = line
        threading.Thread(target=self._run, args=(chat, line), name=f"remote-{request_id}", daemon=True).start()
        return request_id

    def cancel(self, request_id: str) -> None:
        with self._lock:
            line = self._lines.get(request_id)
        if line is not None:
            line.cancel()

    def close(self) -> None:
        """Stop every request still running; they end CANCELLED."""
        with self._lock:
            lines = list(self._lines.values())
        for line in lines:
            line.cancel()

    # ----- one request ---------------------------------------------------------------

    def _run(self, chat: ChatRequest, line: _Line) -> None:
        rid = chat.request_id
        assert rid is not None  # submit gave it one
        reading = _Reading()
        error: str | None = None
        try:
            reason = self._stream(chat, line, reading)
        except Exception as exc:  # noqa: BLE001 - every request ends with a finished delta
            if line.cancelled:  # whatever the cut connection raised
                reason = FinishReason.CANCELLED
            else:
                reason, error = FinishReason.ERROR, self._why(exc, reading)
        finally:
            with self._lock:
                self._lines.pop(rid, None)
        self._on_delta(Delta.finished_with(rid, reason, error, reading.stats()))

    def _stream(self, chat: ChatRequest, line: _Line, reading: _Reading) -> FinishReason:
        if line.cancelled:  # Stop before the thread got going
            return FinishReason.CANCELLED
        rid = chat.request_id
        assert rid is not None
        response = self._open(self._body(chat), line)
        try:
            if _is_json(response):  # a server that ignored stream: true answered all at once
                piece = reading.take(_json_object(response.read()))
                if piece:
                    self._on_delta(Delta(rid, text=piece, token_ids=(), phase=Phase.DECODING))
                return reading.reason or FinishReason.STOP
            for event in events(response.iter_lines()):
                if line.cancelled:
                    return FinishReason.CANCELLED
                if event.done:
                    return reading.reason or FinishReason.STOP
                if event.field == "error":
                    raise RemoteError(event_error(event.payload))
                piece = reading.take(event.payload)
                if piece:
                    self._on_delta(Delta(rid, text=piece, token_ids=(), phase=Phase.DECODING))
        finally:
            response.close()
        if line.cancelled:
            return FinishReason.CANCELLED
        if reading.reason is not None:  # finished, only the [DONE] line is missing
            return reading.reason
        raise RemoteError(f"{self.endpoint.base_url} closed the stream in the middle of the reply "
                          "(no end of stream: did the server stop?)")

    def _open(self, body: dict, line: _Line) -> httpx.Response:
        """The streaming response, once the server has said 200."""
        if self._usage_in_streams:
            response = self._post({**body, "stream_options": {"include_usage": True}}, line)
            if response.status_code not in (400, 422):
                return self._checked(response)
            response.close()
            log.info("%s refused stream_options; asking again without it", self.endpoint.base_url)
            response = self._checked(self._post(body, line))
            self._usage_in_streams = False  # the field was what it refused: never ask again
            return response
        return self._checked(self._post(body, line))

    def _post(self, body: dict, line: _Line) -> httpx.Response:
        request = self._http.build_request("POST", self._url("/chat/completions"), json=body,
                                           extensions={"trace": line.trace})
        return self._http.send(request, stream=True)

    def _checked(self, response: httpx.Response) -> httpx.Response:
        if not response.is_error:
            return response
        try:
            body = b""
            for chunk in response.iter_bytes():
                body += chunk
                if len(body) >= ERROR_BODY_BYTES:
                    break
        except httpx.HTTPError:
            pass  # the reason is the status; the body is only its detail
        finally:
            response.close()
        raise RemoteError(http_error(response.status_code, response.headers, body, str(response.url)))

    def _why(self, exc: Exception, reading: _Reading) -> str:
        if isinstance(exc, RemoteError):
            return str(exc)
        if isinstance(exc, httpx.HTTPError):
            return explain(exc, self.endpoint.base_url, self.endpoint.timeouts, replying=reading.chunks > 0)
        if isinstance(exc, ValueError):  # an event that is not JSON
            return f"{self.endpoint.base_url}: {exc}"
        log.error("remote request to %s failed: %r", self.endpoint.base_url, exc)  # a bug: say what, no traceback
        return f"the connection to {self.endpoint.base_url} failed: {type(exc).__name__}: {exc}"

    def _body(self, chat: ChatRequest) -> dict:
        s = chat.sampling
        body: dict[str, Any] = {
            "model": self.endpoint.model,
            # Continue (continue_final): the partial reply goes as the last assistant message,
            # which servers that prefill assistant turns (llama.cpp, vLLM) carry on; others
            # may answer it as a new turn.
            "messages": list(chat.messages),
            "stream": True,
            "temperature": s.temperature,
            "top_p": s.top_p,
        }
        if s.max_tokens > 0:
            body["max_tokens"] = s.max_tokens
        if s.stop:
            body["stop"] = list(s.stop)
        if s.seed is not None:
            body["seed"] = s.seed
        return body

    def _url(self, path: str) -> str:
        return self.endpoint.base_url.rstrip("/") + path


class RemoteEngine:
    """An EngineLike for a remote endpoint: ready at once (the server is checked with
    /models), no process of its own, no KV cache to pin into, no CPU cores to share."""

    is_local = False

    def __init__(self, endpoint: RemoteEndpoint, on_delta: Callable[[Delta], None],
                 on_state: StateCallback = lambda s: None) -> None:
        self.endpoint = endpoint
        self._on_delta = on_delta
        # A bad URL or proxy setting is refused by start(), as EngineLike says (state FAILED
        # and why), rather than here, where the app's connecting thread would just die.
        self._client: RemoteClient | None = None
        self._refused: str | None = None
        try:
            self._client = RemoteClient(endpoint, on_delta)
        except ValueError as exc:
            self._refused = str(exc)
        self._on_state = on_state
        self.state = EngineState(EngineStatus.STOPPED)
        self.settings = None
        self.pid = None

    def start(self, wait: bool = True) -> None:
        if self._client is None:
            self._set(EngineState(EngineStatus.FAILED, error=self._refused))
            raise RemoteError(self._refused)
        try:
            models = self._client.models()
        except RemoteError as exc:
            self._set(EngineState(EngineStatus.FAILED, error=str(exc)))
            raise
        if self.endpoint.model not in models:
            message = f"{self.endpoint.base_url} has no model {self.endpoint.model!r} (it has: {', '.join(models)})"
            self._set(EngineState(EngineStatus.FAILED, error=message))
            raise RemoteError(message)
        self._set(EngineState(EngineStatus.READY))

    def submit(self, chat: ChatRequest) -> str:
        if self._client is None:  # never started: its one delta says why
            rid = chat.request_id or new_request_id()
            self._on_delta(Delta.finished_with(rid, FinishReason.ERROR, self._refused))
            return rid
        return self._client.submit(chat)

    def cancel(self, request_id: str) -> None:
        if self._client is not None:
            self._client.cancel(request_id)

    def pin_system_prompt(self, text: str) -> None:
        pass  # the remote server manages its own cache

    def set_threads(self, n_threads: int) -> None:
        pass  # the remote server has cores of its own

    def shutdown(self) -> None:
        if self._client is not None:
            self._client.close()
        self._set(EngineState(EngineStatus.STOPPED))

    def kill(self) -> None:
        if self._client is not None:
            self._client.close()

    def _set(self, state: EngineState) -> None:
        self.state = state
        self._on_state(state)
