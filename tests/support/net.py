"""Loopback helpers for the stand-in servers: a port nothing listens on, a socketserver
served on a thread of its own for the length of a block."""

from __future__ import annotations

import socket
import socketserver
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TypeVar

S = TypeVar("S", bound=socketserver.BaseServer)


def unused_port() -> int:
    """A loopback port nothing listens on (bound, then closed): a connection there is refused
    at once, and a server may take it."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def serving_on_a_thread(server: S, poll_s: float = 0.02) -> Iterator[S]:
    """`server` answers on a daemon thread until the block ends, then is shut down and closed.

    `poll_s` is how often serve_forever looks for shutdown (a connection wakes it at once):
    shutdown() waits up to one poll, so socketserver's 0.5 s cost half a second a test."""
    threading.Thread(target=server.serve_forever, args=(poll_s,), daemon=True).start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
