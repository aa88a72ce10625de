"""The HTTP side of a remote endpoint: where it is, the httpx client for it (timeouts, key,
proxies from the environment), and a connection that Stop can cut from another thread."""

from __future__ import annotations

import ipaddress
import socket
import threading
from dataclasses import dataclass
from typing import Any

import httpx


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


class Line:
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


def http_client(endpoint: RemoteEndpoint) -> httpx.Client:
    """The client for one endpoint: its timeouts, its key, proxies from the environment.

    No keep-alive: each reply has a connection of its own, so that Stop can cut it (see
    Line) without harming a connection the pool would hand to the next request."""
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
