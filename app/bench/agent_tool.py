"""The local tool of `chorus bench-agents`: an MCP server over stdio (the SDK's MCPServer),
run by the bench as a child process (`python -m app.bench.agent_tool SECONDS`), whose one
tool takes SECONDS to answer, as a web lookup or a test run would. Its answer is fixed text
of a fixed length, so every follow-up turn gets the same number of new tokens."""

from __future__ import annotations

import sys
import time

from mcp.server.mcpserver import MCPServer

server = MCPServer("chorus-bench-agents")
DELAY_S = float(sys.argv[1]) if __name__ == "__main__" and len(sys.argv) > 1 else 0.5


@server.tool()
def weather(city: str) -> str:
    """The weather now in a city."""
    time.sleep(DELAY_S)
    return f"{city}: 14 degrees Celsius, light rain, wind 12 km/h from the west, humidity 81 percent."


if __name__ == "__main__":
    server.run()
