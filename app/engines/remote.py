"""A remote OpenAI-compatible endpoint (vLLM, llama.cpp's server, Ollama, another Chorus)
behind the same interface as the local engine client: submit, cancel, deltas out.

One thread per request reads the server-sent events; stopping closes the connection. Every
failure (wrong URL, refused connection, bad key, timeout, a server error) ends that request
with a clear message. The API key goes in a header and nowhere else (never in a message).
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, replace
from urllib.parse import urlparse

from app.engines.finish import from_openai
from app.engines.protocol import EngineState, EngineStatus, StateCallback
from inference.ids import new_request_id
from inference.outputs import Delta, FinishReason, Phase, RequestStats
from inference.params import ChatRequest

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RemoteEndpoint:
    base_url: str  # e.g. http://127.0.0.1:8080/v1
    model: str
    api_key: str | None = None
    timeout_s: float = 60.0

    def __repr__(self) -> str:  # keeps the key out of logs and tracebacks
        return f"RemoteEndpoint({self.base_url!r}, model={self.model!r}, api_key={'***' if self.api_key else None})"

    def check(self) -> None:
        url = urlparse(self.base_url)
        if url.scheme not in ("http", "https") or not url.netloc:
            raise ValueError(f"not an http(s) URL: {self.base_url!r}")


class RemoteClient:
    def __init__(self, endpoint: RemoteEndpoint, on_delta: Callable[[Delta], None]) -> None:
        endpoint.check()
        self.endpoint = endpoint
        self._on_delta = on_delta
        self._responses: dict[str, object] = {}
        self._cancelled: set[str] = set()
        self._lock = threading.Lock()

    def models(self) -> list[str]:
        with self._open("GET", "/models", None) as response:
            return [m["id"] for m in json.load(response).get("data", [])]

    def submit(self, chat: ChatRequest) -> str:
        request_id = chat.request_id or new_request_id()
        chat = replace(chat, request_id=request_id)
        threading.Thread(target=self._run, args=(chat,), name=f"remote-{request_id}", daemon=True).start()
        return request_id

    def cancel(self, request_id: str) -> None:
        with self._lock:
            self._cancelled.add(request_id)
            response = self._responses.get(request_id)
        if response is not None:
            try:
                response.close()
            except Exception:  # noqa: BLE001, S110  (already closed by the reader)
                pass

    # ----- one request ---------------------------------------------------------------

    def _run(self, chat: ChatRequest) -> None:
        rid = chat.request_id
        started = time.perf_counter()
        first: float | None = None
        tokens = 0
        text_parts: list[str] = []
        reason = FinishReason.STOP
        try:
            with self._open("POST", "/chat/completions", self._body(chat)) as response:
                with self._lock:
                    self._responses[rid] = response
                for event in _events(response):
                    if rid in self._cancelled:
                        reason = FinishReason.CANCELLED
                        break
                    if "error" in event:
                        raise RemoteError(event["error"].get("message", "the server reported an error"))
                    choice = (event.get("choices") or [{}])[0]
                    piece = (choice.get("delta") or {}).get("content") or ""
                    if piece:
                        first = first or time.perf_counter()
                        tokens += 1
                        text_parts.append(piece)
                        self._on_delta(Delta(rid, text=piece, token_ids=(), phase=Phase.DECODING))
                    if choice.get("finish_reason"):
                        reason = from_openai(choice["finish_reason"])
        except RemoteError as exc:
            self._finish(rid, FinishReason.ERROR, str(exc))
            return
        except Exception as exc:  # noqa: BLE001 - every request ends with a finished delta
            if rid in self._cancelled:
                # Stop closed the response under the reader. http.client then fails in more
                # ways than OSError: a chunked read raises AttributeError on its closed file.
                reason = FinishReason.CANCELLED
            elif isinstance(exc, (OSError, ValueError)):
                self._finish(rid, FinishReason.ERROR, self._explain(exc))
                return
            else:
                log.exception("remote request %s failed", rid)
                self._finish(rid, FinishReason.ERROR, f"the connection to the server failed: {exc}")
                return
        finally:
            with self._lock:
                self._responses.pop(rid, None)
        stats = _stats(started, first, tokens)
        self._finish(rid, reason, None, stats)

    def _finish(self, rid: str, reason: FinishReason, error: str | None, stats: RequestStats | None = None) -> None:
        with self._lock:
            self._cancelled.discard(rid)
        self._on_delta(Delta.finished_with(rid, reason, error, stats))

    def _body(self, chat: ChatRequest) -> dict:
        s = chat.sampling
        body = {
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

    def _open(self, method: str, path: str, body: dict | None):
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.endpoint.base_url.rstrip("/") + path, data=data, method=method)
        request.add_header("Content-Type", "application/json")
        if self.endpoint.api_key:
            request.add_header("Authorization", f"Bearer {self.endpoint.api_key}")
        try:
            return urllib.request.urlopen(request, timeout=self.endpoint.timeout_s)
        except urllib.error.HTTPError as exc:
            raise RemoteError(_http_error(exc)) from None

    def _explain(self, exc: Exception) -> str:
        where = self.endpoint.base_url
        reason = getattr(exc, "reason", exc)
        if isinstance(reason, ConnectionRefusedError):
            return f"{where} refused the connection: is the server running?"
        if isinstance(reason, (socket.timeout, TimeoutError)):
            return f"{where} did not answer within {self.endpoint.timeout_s:.0f} s"
        if isinstance(reason, socket.gaierror):
            return f"cannot find the host of {where}"
        return f"cannot reach {where}: {reason}"


class RemoteError(RuntimeError):
    pass


def _http_error(exc: urllib.error.HTTPError) -> str:
    try:
        detail = json.loads(exc.read()).get("error", {}).get("message", "")
    except Exception:  # noqa: BLE001  (not JSON)
        detail = ""
    if exc.code == 401:
        return "the server refused the API key (401)" + (f": {detail}" if detail else "")
    if exc.code == 404:
        return f"no such endpoint ({exc.url}); is the base URL right (…/v1)?"
    return f"the server answered {exc.code}" + (f": {detail}" if detail else "")


def _events(response):
    """The JSON payloads of a server-sent event stream, until [DONE]."""
    for raw in response:
        line = raw.decode("utf-8", "replace").strip()
        if not line.startswith("data:"):
            continue
        payload = line[5:].strip()
        if payload == "[DONE]":
            return
        yield json.loads(payload)


def _stats(started: float, first: float | None, tokens: int) -> RequestStats:
    now = time.perf_counter()
    decode_s = now - first if first else 0.0
    return RequestStats(
        prompt_tokens=0, cached_tokens=0, generated_tokens=tokens, queue_s=0.0,
        ttft_s=(first - started) if first else None,
        decode_tok_s=(tokens - 1) / decode_s if decode_s > 0 and tokens > 1 else None,
        itl_p50_s=None, itl_p95_s=None, total_s=now - started,
    )


class RemoteEngine:
    """An EngineLike for a remote endpoint: ready at once (the server is checked with
    /models), no process of its own, no KV cache to pin into, no CPU cores to share."""

    is_local = False

    def __init__(self, endpoint: RemoteEndpoint, on_delta: Callable[[Delta], None],
                 on_state: StateCallback = lambda s: None) -> None:
        self.endpoint = endpoint
        self._client = RemoteClient(endpoint, on_delta)
        self._on_state = on_state
        self.state = EngineState(EngineStatus.STOPPED)
        self.settings = None
        self.pid = None

    def start(self, wait: bool = True) -> None:
        try:
            models = self._client.models()
        except (OSError, RemoteError) as exc:
            message = self._client._explain(exc) if isinstance(exc, OSError) else str(exc)
            self._set(EngineState(EngineStatus.FAILED, error=message))
            raise RemoteError(message) from None
        if self.endpoint.model not in models:
            message = f"{self.endpoint.base_url} has no model {self.endpoint.model!r} (it has: {', '.join(models)})"
            self._set(EngineState(EngineStatus.FAILED, error=message))
            raise RemoteError(message)
        self._set(EngineState(EngineStatus.READY))

    def submit(self, chat: ChatRequest) -> str:
        return self._client.submit(chat)

    def cancel(self, request_id: str) -> None:
        self._client.cancel(request_id)

    def pin_system_prompt(self, text: str) -> None:
        pass  # the remote server manages its own cache

    def set_threads(self, n_threads: int) -> None:
        pass  # the remote server has cores of its own

    def shutdown(self) -> None:
        self._set(EngineState(EngineStatus.STOPPED))

    def kill(self) -> None:
        pass

    def _set(self, state: EngineState) -> None:
        self.state = state
        self._on_state(state)
