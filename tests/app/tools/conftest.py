"""MCP servers for the tools tests: the manager, the SDK-made test server over stdio, and the
same server over streamable HTTP on a loopback port (a child process each)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from app.tools import HttpServer, McpManager, StdioServer
from tests.support.mcp_http import serving_the_test_server_over_http

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
    with serving_the_test_server_over_http() as url:
        yield HttpServer("web", url)
