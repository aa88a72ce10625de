"""MCP servers for the tools tests: the manager, the SDK-made test server over stdio, and the
same server over streamable HTTP on a loopback port (a child process each)."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from app.tools import HttpServer, McpManager, StdioServer
from tests.support.net import unused_port
from tests.support.waiting import wait_until

TEST_SERVER = Path(__file__).parents[2] / "support" / "mcp_test_server.py"


@pytest.fixture
def manager():
    with McpManager(start_timeout_s=20) as m:
        yield m


@pytest.fixture
def test_server() -> StdioServer:
    return StdioServer("test", sys.executable, (str(TEST_SERVER), "stdio"))


@pytest.fixture
def time_server() -> StdioServer:
    return StdioServer("time", sys.executable, ("-m", "mcp_server_time", "--local-timezone", "UTC"))


@pytest.fixture
def http_server():
    port = unused_port()
    proc = subprocess.Popen([sys.executable, str(TEST_SERVER), "http", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: _accepts(port) or proc.poll() is not None, "the HTTP MCP server to listen")
        assert proc.poll() is None, "the HTTP MCP server exited"
        yield HttpServer("web", f"http://127.0.0.1:{port}/mcp")
    finally:
        proc.terminate()
        proc.wait(10)


def _accepts(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0
