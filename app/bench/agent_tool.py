"""The local tool of `chorus bench-agents`: an MCP server over stdio (the SDK's MCPServer),
run by the bench as a child process (`python -m app.bench.agent_tool SECONDS [TOOLS]`), whose
weather tool takes SECONDS to answer, as a web lookup or a test run would. Its answer is fixed
text of a fixed length, so every follow-up turn gets the same number of new tokens.

TOOLS (default 1): how many tools it offers, the weather tool first and then look-ups of other
things (never called by the bench), so that the tool list is as long as a real server's (a
40-tool server's list is some 2,500 tokens of every agent's prompt)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

from mcp.server.mcpserver import MCPServer

server = MCPServer("chorus-bench-agents")
DELAY_S = float(sys.argv[1]) if __name__ == "__main__" and len(sys.argv) > 1 else 0.5
TOOLS = int(sys.argv[2]) if __name__ == "__main__" and len(sys.argv) > 2 else 1

# What the other tools look up: as varied as a real server's, each its own name and text.
THINGS = ("flight", "hotel", "train", "restaurant", "museum", "concert", "invoice", "ticket", "contact", "meeting",
          "document", "photo", "recipe", "book", "film", "song", "podcast", "product", "order", "parcel", "repository",
          "issue", "commit", "server", "database", "table", "dashboard", "alert", "customer", "employee", "course",
          "exam", "patient", "appointment", "vehicle", "charger", "warehouse", "supplier", "contract", "policy",
          "recording", "station", "forecast", "currency", "stock", "article", "event", "venue")


@server.tool()
def weather(city: str) -> str:
    """The weather now in a city."""
    time.sleep(DELAY_S)
    return f"{city}: 14 degrees Celsius, light rain, wind 12 km/h from the west, humidity 81 percent."


def look_up(thing: str) -> Callable[..., str]:
    def find(query: str, limit: int = 5, sort_by: str = "relevance") -> str:
        return f"No {thing} matches {query!r}."
    return find


def add_look_ups(count: int) -> None:
    for thing in THINGS[:count]:
        server.add_tool(look_up(thing), name=f"find_{thing}",
                        description=f"Search the user's {thing} records by free text and return the best matches "
                                    f"(name, date and a short summary of each {thing}), most relevant first.")


if __name__ == "__main__":
    if not 1 <= TOOLS <= len(THINGS) + 1:
        sys.exit(f"agent_tool: TOOLS must be 1 to {len(THINGS) + 1}")
    add_look_ups(TOOLS - 1)
    server.run()
