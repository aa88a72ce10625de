"""The tools a chat has on, as the model sees them: each MCP tool under one name (its own,
or "server__tool" when two servers offer the same name), its description and schema, and
the call that runs it on its server through the manager."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Collection, Iterable

from app.tools.mcp_results import McpTool, ToolResult
from app.tools.mcp_servers import DEFAULT_CALL_TIMEOUT_S, McpManager
from app.tools.types import Tool
from app.tools.web import BUILT_IN, WebTools

UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def tools_named(manager: McpManager, names: Collection[str] | None) -> tuple[McpTool, ...]:
    """The ready servers' tools whose own names are among names (None: every one)."""
    return tuple(t for t in manager.tools() if names is None or t.name in names)


class Toolbox:
    def __init__(self, manager: McpManager, tools: Iterable[McpTool] | None = None,
                 timeout_s: float = DEFAULT_CALL_TIMEOUT_S, web: WebTools | None = None) -> None:
        """tools: those on (default: every ready server's); web: the built-in web tools on,
        whose names win over an MCP tool's of the same name."""
        self.manager = manager
        self.web = web
        self.timeout_s = timeout_s
        chosen = tuple(manager.tools() if tools is None else tools)
        repeated = Counter(t.name for t in chosen)
        self.by_name: dict[str, McpTool] = {}
        for tool in chosen:
            name = tool.name if repeated[tool.name] == 1 else f"{tool.server}__{tool.name}"
            self.by_name[UNSAFE.sub("_", name)[:64]] = tool
        for tool in web.tools() if web else ():
            self.by_name[tool.name] = tool

    def __bool__(self) -> bool:
        return bool(self.by_name)

    def specs(self) -> tuple[Tool, ...]:
        return tuple(Tool(name, t.description, t.input_schema) for name, t in self.by_name.items())

    def call(self, name: str, arguments: dict) -> ToolResult:
        tool = self.by_name[name]
        if self.web and tool.server == BUILT_IN:
            return self.web.call(name, arguments)
        return self.manager.call(tool.server, tool.name, arguments, self.timeout_s)
