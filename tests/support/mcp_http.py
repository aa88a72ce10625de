"""The SDK-made test MCP server (tests/support/mcp_test_server.py) over streamable HTTP on a
loopback port, a child process for the length of a block.

Starting the server costs about 1.4 s of CPU (the MCP SDK's import), so the window's tool
tests share one per test process (`shared_mcp_server` in tests/ui/controllers/conftest.py)
instead of a stdio child per test: its tools keep no state between calls. The stdio
transport keeps its own tests (tests/app/tools/test_mcp_servers.py)."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support.net import unused_port
from tests.support.waiting import wait_until

TEST_SERVER = Path(__file__).parent / "mcp_test_server.py"


@contextmanager
def serving_the_test_server_over_http() -> Iterator[str]:
    """The test server listening; yields its endpoint's URL (http://127.0.0.1:PORT/mcp)."""
    port = unused_port()
    proc = subprocess.Popen([sys.executable, str(TEST_SERVER), "http", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: _accepts(port) or proc.poll() is not None, "the HTTP MCP server to listen")
        assert proc.poll() is None, "the HTTP MCP server exited"
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:  # its shutdown waits on a call a test stopped while it ran
            proc.kill()
            proc.wait(10)


def _accepts(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0
