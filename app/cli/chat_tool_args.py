"""`chorus chat`'s tool options: --mcp "COMMAND ARGS" (repeatable), --mcp-config FILE (the
mcpServers JSON), --tools web (the built-in fetch and web_search, with --searxng URL and
--allow-private-addresses), --tool-choice, --yes, --tool-timeout, --max-tool-rounds; read into server
configurations without importing the MCP SDK (chat_tools.py runs them)."""

from __future__ import annotations

import argparse

from app.tools import TOOL_CHOICES, McpConfigError, ServerConfig, read_mcp_servers_file, server_from_command
from app.tools.web import WebSettings


def add_tool_args(parser: argparse._ActionsContainer, asks: bool = True) -> None:
    """asks: the calls are approved one by one (a chat's --yes approves all); a job's are
    approved by naming its tools."""
    parser.add_argument("--mcp", action="append", default=[], metavar='"COMMAND ARGS"',
                        help="an MCP server run over stdio (repeatable), e.g. --mcp \"uvx mcp-server-time\"")
    parser.add_argument("--mcp-config", default=None, metavar="FILE",
                        help="MCP servers from an mcpServers JSON file (Claude Desktop's, Cursor's, LM Studio's)")
    parser.add_argument("--tools", choices=("web",), default=None,
                        help="web: the built-in tools fetch (a page as Markdown) and web_search (needs --searxng)")
    parser.add_argument("--searxng", default="", metavar="URL",
                        help="the SearXNG instance web_search asks (its JSON API), e.g. http://localhost:8888")
    parser.add_argument("--allow-private-addresses", action="store_true",
                        help="let fetch reach loopback, LAN and link-local addresses (refused by default)")
    parser.add_argument("--tool-choice", choices=TOOL_CHOICES, default="auto",
                        help="auto: the model may call tools; required: its first turn must; none: no tools")
    if asks:
        parser.add_argument("--yes", action="store_true", help="run every tool call without asking")
    parser.add_argument("--tool", action="append", default=None, metavar="NAME", dest="enabled_tools",
                        help="offer only this tool of the servers' (repeatable; default: all of them)")
    parser.add_argument("--tool-timeout", type=float, default=60.0, metavar="SECONDS",
                        help="how long a tool call may take (default 60)")
    parser.add_argument("--max-tool-rounds", type=int, default=5, metavar="N",
                        help="model turns per reply at most, the last one answering in text (default 5)")


def web_settings_of(args: argparse.Namespace) -> WebSettings | None:
    """--tools web: fetch always, web_search once a SearXNG instance is named."""
    if args.tools != "web":
        return None
    return WebSettings(searxng_url=args.searxng, allow_private=args.allow_private_addresses)


def configured_servers(args: argparse.Namespace) -> list[ServerConfig]:
    """The servers asked for, checked (McpConfigError) before anything starts."""
    servers: list[ServerConfig] = list(read_mcp_servers_file(args.mcp_config)) if args.mcp_config else []
    for line in args.mcp:
        servers.append(server_from_command(line, taken=[s.name for s in servers]))
    if args.max_tool_rounds < 1:
        raise McpConfigError("--max-tool-rounds must be at least 1")
    return servers
