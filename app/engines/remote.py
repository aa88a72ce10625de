"""A remote OpenAI-compatible endpoint (vLLM, llama.cpp's server, Ollama, another Chorus)
behind the engine client interface (inference.EngineClient): a request's deltas to its sink.

One thread per request streams the server-sent events over httpx. Stop cuts that request's
connection from whichever thread asks, so the reader wakes at once even while the server is
still silent (prefilling). Every request ends with exactly one finished delta: CANCELLED
after Stop, otherwise a one-line reason for any failure (wrong URL, refused connection, bad
key, busy or broken server, a stream cut mid-reply, silence). The API key goes in a header
and nowhere else. Proxies come from the environment (HTTP_PROXY, HTTPS_PROXY, NO_PROXY),
except for a server on this machine's loopback, which no proxy elsewhere could reach.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import replace
from typing import Any

import httpx

from app.documents.tokens import guessed_tokens
from app.engines.protocol import EngineState, EngineStatus, StateCallback
from app.engines.remote_errors import RemoteError, event_error, explain, http_error
from app.engines.remote_http import Line, RemoteEndpoint, http_client
from app.engines.remote_reading import Reading, is_json, json_object
from app.engines.sse import events
from inference import (
    SAMPLING_FIELDS,
    ChatRequest,
    Delta,
    DeltaSink,
    EngineError,
    FinishReason,
    MetricsSnapshot,
    ModelInfo,
    Phase,
    RequestError,
    new_request_id,
)

__all__ = ["RemoteClient", "RemoteEndpoint", "RemoteEngine", "RemoteError"]

log = logging.getLogger(__name__)

ERROR_BODY_BYTES = 64 * 1024  # enough for any error message; an HTML page is cut there


class RemoteClient:
    def __init__(self, endpoint: RemoteEndpoint) -> None:
        endpoint.check()
        self.endpoint = endpoint
        self._http = http_client(endpoint)
        self._lines: dict[str, Line] = {}
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

    def stream(self, chat: ChatRequest, sink: DeltaSink) -> str:
        request_id = chat.request_id or new_request_id()
        chat = replace(chat, request_id=request_id)
        line = Line()
        with self._lock:  # before the thread starts, so that an early Stop finds it
            self._lines[request_id] = line
        threading.Thread(target=self._run, args=(chat, line, sink), name=f"remote-{request_id}",
                         daemon=True).start()
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

    def _run(self, chat: ChatRequest, line: Line, sink: DeltaSink) -> None:
        rid = chat.request_id
        assert rid is not None  # submit gave it one
        reading = Reading()
        error: str | None = None
        try:
            reason = self._read(chat, line, reading, sink)
        except Exception as exc:  # noqa: BLE001 - every request ends with a finished delta
            if line.cancelled:  # whatever the cut connection raised
                reason = FinishReason.CANCELLED
            else:
                reason, error = FinishReason.ERROR, self._why(exc, reading)
        finally:
            with self._lock:
                self._lines.pop(rid, None)
        sink(Delta.finished_with(rid, reason, error, reading.stats()))

    def _read(self, chat: ChatRequest, line: Line, reading: Reading, sink: DeltaSink) -> FinishReason:
        if line.cancelled:  # Stop before the thread got going
            return FinishReason.CANCELLED
        rid = chat.request_id
        assert rid is not None
        response = self._open(self._body(chat), line)
        try:
            if is_json(response):  # a server that ignored stream: true answered all at once
                piece = reading.take(json_object(response.read()))
                if piece:
                    sink(Delta(rid, text=piece, token_ids=(), phase=Phase.DECODING))
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
                    sink(Delta(rid, text=piece, token_ids=(), phase=Phase.DECODING))
        finally:
            response.close()
        if line.cancelled:
            return FinishReason.CANCELLED
        if reading.reason is not None:  # finished, only the [DONE] line is missing
            return reading.reason
        raise RemoteError(f"{self.endpoint.base_url} closed the stream in the middle of the reply "
                          "(no end of stream: did the server stop?)")

    def _open(self, body: dict, line: Line) -> httpx.Response:
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

    def _post(self, body: dict, line: Line) -> httpx.Response:
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

    def _why(self, exc: Exception, reading: Reading) -> str:
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
        }
        for field in SAMPLING_FIELDS:  # OpenAI's own (the table's forward): another server may refuse the rest
            value = getattr(s, field.name)
            if field.forward is not None and field.forward(value):
                body[field.name] = value
        if s.stop:
            body["stop"] = list(s.stop)
        return body

    def _url(self, path: str) -> str:
        return self.endpoint.base_url.rstrip("/") + path


class RemoteEngine:
    """A remote endpoint as the app's engines are (ManagedEngine): ready at once (the server is
    checked with /models), no process of its own, no KV cache to pin into, no CPU cores to
    share, no tokenizer here (token counts are guessed low, from the characters)."""

    is_local = False

    def __init__(self, endpoint: RemoteEndpoint, on_state: StateCallback = lambda s: None) -> None:
        self.endpoint = endpoint
        # A bad URL or proxy setting is refused by start(), as ManagedEngine says (state
        # FAILED and why), rather than here, where the app's connecting thread would just die.
        self._client: RemoteClient | None = None
        self._refused: str | None = None
        try:
            self._client = RemoteClient(endpoint)
        except ValueError as exc:
            self._refused = str(exc)
        self._on_state = on_state
        self.state = EngineState(EngineStatus.STOPPED)
        self.settings = None
        self.pid = None

    @property
    def info(self) -> ModelInfo | None:
        return None  # the server's model file is not this process's to see

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

    def stream(self, chat: ChatRequest, sink: DeltaSink) -> str:
        if self._client is None:  # never started: its one delta says why
            rid = chat.request_id or new_request_id()
            sink(Delta.finished_with(rid, FinishReason.ERROR, self._refused))
            return rid
        return self._client.stream(chat, sink)

    def prepare(self, chat: ChatRequest) -> ChatRequest:
        return chat  # the server renders and tokenizes its own prompts

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return [guessed_tokens(text) for text in texts]

    def text_tokens(self, text: str, parse_special: bool = True) -> list[int]:
        raise RequestError("a remote server's prompts are tokenized by the server")

    def embed(self, inputs: list[str | list[int]]) -> Future:
        failed: Future = Future()
        failed.set_exception(RequestError("embeddings are served by local models only"))
        return failed

    def metrics(self) -> MetricsSnapshot | None:
        """None: the server's counters are its own (EngineError while it is not in use)."""
        if self.state.status is not EngineStatus.READY:
            raise EngineError(f"the server is {self.state.status.value}")
        return None

    def cancel(self, request_id: str) -> None:
        if self._client is not None:
            self._client.cancel(request_id)

    def set_priority(self, request_id: str, priority: int) -> None:
        pass  # the remote server orders its own queue

    def pin_system_prompt(self, text: str) -> None:
        pass  # the remote server manages its own cache

    def unpin_system_prompt(self, text: str) -> None:
        pass

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
