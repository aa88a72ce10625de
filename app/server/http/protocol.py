"""uvicorn's h11 protocol, with OpenAI-shaped answers to malformed HTTP and a deadline for
a request's headers.

Why h11 (and not httptools): it is what uvicorn runs here (httptools is not installed),
and it bounds the request line plus headers with h11_max_incomplete_event_size (a 70 KB
header gets 431, not a buffer that grows). What uvicorn lacks is added here:
- its answer to a request h11 cannot parse (a bad Content-Length, headers too large) is a
  plain-text 400; here it is OpenAI's JSON error with h11's status hint (400 or 431).
- it has no header timeout: a client sending its headers a byte a second holds the
  connection for ever. Here the request line and headers must arrive within
  header_timeout_s of the connection opening (or of the first byte of a later request on a
  kept-alive connection), else 408 and the connection closes. Idle kept-alive connections
  are uvicorn's (timeout_keep_alive)."""

from __future__ import annotations

import asyncio
import http
import logging
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from app.server.http.errors import error_bytes

log = logging.getLogger(__name__)


class _Connection(h11.Connection):
    """Remembers the last parse error, for the answer to it."""

    last_error: h11.RemoteProtocolError | None = None

    def next_event(self) -> Any:
        try:
            return super().next_event()
        except h11.RemoteProtocolError as exc:
            self.last_error = exc
            raise


class ChorusH11Protocol(H11Protocol):
    header_timeout_s = 10.0  # set per server by a subclass (uvicorn_server.protocol_class)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        assert self.config.h11_max_incomplete_event_size is not None  # always set by uvicorn_server
        self.conn: _Connection = _Connection(h11.SERVER, self.config.h11_max_incomplete_event_size)
        self._header_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_header_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_header_timer()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self._arm_header_timer()  # (part of) a request line: its headers are due
        else:
            self._cancel_header_timer()

    def _arm_header_timer(self) -> None:
        if self._header_timer is None:
            self._header_timer = self.loop.call_later(self.header_timeout_s, self._headers_too_slow)

    def _cancel_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_too_slow(self) -> None:
        self._header_timer = None
        if self.conn.their_state is not h11.IDLE or self.transport.is_closing():
            return
        if self.conn.our_state is not h11.IDLE:  # mid-cycle: nothing can be answered, just close
            self.transport.close()
            return
        log.info("closed a connection whose request headers did not arrive within %g s", self.header_timeout_s)
        self._answer_and_close(408, f"the request headers did not arrive within {self.header_timeout_s:g} s")

    def send_400_response(self, msg: str) -> None:
        """h11 could not parse the request: answer in OpenAI's shape and close."""
        error = self.conn.last_error
        status = error.error_status_hint if error is not None else 400
        if status == 431:
            limit = self.config.h11_max_incomplete_event_size
            message = f"the request line and headers are over this server's limit of {limit} bytes"
        else:
            message = f"malformed HTTP request: {error or msg}"
        self._answer_and_close(status, message)

    def _answer_and_close(self, status: int, message: str) -> None:
        body = error_bytes(status, message)
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                   (b"connection", b"close")]
        head = h11.Response(status_code=status, headers=headers, reason=http.HTTPStatus(status).phrase.encode())
        try:
            self.transport.write(self.conn.send(head) or b"")
            self.transport.write(self.conn.send(h11.Data(data=body)) or b"")
            self.transport.write(self.conn.send(h11.EndOfMessage()) or b"")
        except h11.LocalProtocolError:  # a response was already under way
            pass
        self.transport.close()
