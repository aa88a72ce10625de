"""A small MCP server made with the SDK's MCPServer (FastMCP in mcp 1.x), run by the tools
tests as a child process: `python tests/support/mcp_test_server.py stdio` or `... http PORT`
(streamable HTTP on 127.0.0.1:PORT/mcp). Its tools: add, slow (sleeps: a server that
hangs on a call; with clock, when it ran: calls that run at once), big (a long output),
wait (a bound the grammar cannot hold), fail (a tool error), picture (an image)."""

from __future__ import annotations

import base64
import sys
import time
from typing import Annotated

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.utilities.types import Image
from pydantic import Field

server = MCPServer("chorus-test")
PIXEL = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGA"
                         "hKmMIQAAAABJRU5ErkJggg==")


@server.tool()
def add(a: int, b: int) -> int:
    """Adds two whole numbers."""
    return a + b


@server.tool()
def slow(seconds: float, clock: bool = False) -> str:
    """Sleeps, then says so (clock: and when it began and ended, on the wall clock)."""
    began = time.time()
    time.sleep(seconds)
    return f"slept {seconds} s" + (f" from {began:.6f} to {time.time():.6f}" if clock else "")


@server.tool()
def big(characters: int) -> str:
    """Returns that many characters."""
    return "x" * characters


@server.tool()
def wait(seconds: Annotated[float, Field(ge=0, json_schema_extra={"not": {"const": 0}})]) -> str:
    """Says how long it would wait (a `not` in its schema: no forced call's grammar can hold it)."""
    return f"would wait {seconds} s"


@server.tool()
def fail() -> str:
    """Always fails."""
    raise ToolError("this tool always fails")  # its message reaches the client (an exception's does not)


@server.tool()
def picture() -> Image:
    """A one-pixel PNG."""
    return Image(data=PIXEL, format="png")


if __name__ == "__main__":
    if sys.argv[1] == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
