"""Tool calling, shared by the HTTP server, the terminal chat and the desktop app: the tool
and call types, the generic tool format in the prompt, reading a reply back as calls, the
grammar of a forced call, MCP server configurations (all cheap to import), and the MCP
servers' manager, and the tool loop that runs their tools between a model's turns: one state
machine (machine.py) the window drives from its events and the terminal drives blocking
(agent.py), each turn offered what rounds.py says (imported on first use: they bring the
MCP SDK)."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from app.tools.grammar import MAX_PARALLEL, ToolSchemaError, call_grammar
from app.tools.mcp_config import (
    HttpServer,
    McpConfigError,
    ServerConfig,
    StdioServer,
    mcp_servers_json,
    parse_mcp_servers,
    read_mcp_servers_file,
    server_from_command,
)
from app.tools.parsing import might_be_call, parse_calls
from app.tools.prompt import add_result, calls_text, plain_turns, result_text, tools_prompt, with_tools_prompt
from app.tools.types import TOOL_CHOICES, Tool, ToolCall, ToolUse, new_call_id

if TYPE_CHECKING:
    from app.tools.agent import Approver, ToolLoop
    from app.tools.history import call_records, chat_message, result_record
    from app.tools.machine import (
        DENIED,
        AgentEvent,
        Approval,
        ApprovalMemory,
        CallFinished,
        CallStarted,
        Notice,
        TextDelta,
        ToolLoopMachine,
        TurnDone,
        always_allow,
        result_content,
    )
    from app.tools.mcp_results import DEFAULT_OUTPUT_CAP, McpTool, ToolResult
    from app.tools.mcp_servers import McpManager, ServerState, ServerStatus
    from app.tools.toolbox import Toolbox

# name -> the module that defines it, imported when the name is first used.
_LAZY = {
    **dict.fromkeys(["Approver", "ToolLoop"], "app.tools.agent"),
    **dict.fromkeys(["DENIED", "AgentEvent", "Approval", "ApprovalMemory", "CallFinished", "CallStarted",
                     "Notice", "TextDelta", "ToolLoopMachine", "TurnDone", "always_allow", "result_content"],
                    "app.tools.machine"),
    **dict.fromkeys(["DEFAULT_OUTPUT_CAP", "McpTool", "ToolResult"], "app.tools.mcp_results"),
    **dict.fromkeys(["McpManager", "ServerState", "ServerStatus"], "app.tools.mcp_servers"),
    **dict.fromkeys(["call_records", "chat_message", "result_record"], "app.tools.history"),
    "Toolbox": "app.tools.toolbox",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'app.tools' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "DEFAULT_OUTPUT_CAP", "DENIED", "MAX_PARALLEL", "TOOL_CHOICES", "AgentEvent", "Approval",
    "ApprovalMemory", "Approver", "CallFinished", "CallStarted", "HttpServer", "McpConfigError", "McpManager",
    "McpTool", "Notice", "ServerConfig", "ServerState", "ServerStatus", "StdioServer", "TextDelta", "Tool",
    "ToolCall", "ToolLoop", "ToolLoopMachine", "ToolResult", "ToolSchemaError", "ToolUse", "Toolbox",
    "TurnDone", "add_result", "always_allow", "call_grammar", "call_records", "calls_text", "chat_message",
    "mcp_servers_json", "might_be_call", "new_call_id", "parse_calls", "parse_mcp_servers", "plain_turns",
    "read_mcp_servers_file", "result_content", "result_record", "result_text", "server_from_command",
    "tools_prompt", "with_tools_prompt",
]
