"""Tools in a job (issue 37): the MCP servers and built-in web tools its model may call, kept
in the job's spec so that a job resumed after a restart (or by another process) calls the
same ones; started for the length of one run and stopped after it.

A job runs unattended: choosing tools for it is the approval of every call its items make
(the chat's "Always" given at once), so only the tools named here are offered."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Any

from app.tools import McpConfigError, ServerConfig, mcp_servers_json, parse_mcp_servers
from app.tools.rounds import DEFAULT_MAX_ROUNDS

DEFAULT_TIMEOUT_S = 60.0


class JobToolsError(RuntimeError):
    """The job's tools cannot be offered (a server that does not start): the job does not
    run, rather than answer without the tools it was made with."""


@dataclass(frozen=True, slots=True)
class JobTools:
    mcp_servers: dict  # an mcpServers document (app/tools/mcp_config.py), {} for none
    web: dict | None = None  # WebSettings' fields (fetch; web_search with a searxng_url), None: off
    choice: str = "auto"  # tool_choice: auto, or required (each item's first turn calls)
    max_rounds: int = DEFAULT_MAX_ROUNDS  # model turns per item at most, the last answering in text
    timeout_s: float = DEFAULT_TIMEOUT_S  # a call's
    enabled: list[str] | None = None  # the tools offered, by their own names; None: every one

    def __post_init__(self) -> None:
        if self.choice not in ("auto", "required"):  # "none" is a job without tools
            raise McpConfigError(f"a job's tool_choice is auto or required, got {self.choice!r}")
        if self.max_rounds < 1:
            raise McpConfigError("a job's tool rounds must be at least 1")
        if not self.servers() and self.web is None:
            raise McpConfigError("a job with tools needs an MCP server or the web tools")

    @classmethod
    def of(cls, servers: tuple[ServerConfig, ...] | list[ServerConfig], **settings: Any) -> JobTools:
        return cls(mcp_servers=mcp_servers_json(servers), **settings)

    def servers(self) -> tuple[ServerConfig, ...]:
        return parse_mcp_servers(self.mcp_servers) if self.mcp_servers else ()

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> JobTools:
        return cls(**data)


@contextmanager
def started(tools: JobTools) -> Iterator[Any]:
    """The job's toolbox (app.tools.Toolbox), its servers running until the block ends;
    JobToolsError naming each server that failed to start."""
    from app.tools import McpManager, ServerStatus, Toolbox  # the MCP SDK, only for a job that calls tools
    from app.tools.toolbox import tools_named
    from app.tools.web import WebSettings, WebTools

    manager = McpManager()
    try:
        failed = [f"{state.name}: {state.summary()}" for state in manager.start_all(tools.servers())
                  if state.status is ServerStatus.FAILED]
        if failed:
            raise JobToolsError("the job's tools did not start (" + "; ".join(failed) + ")")
        web = WebTools(WebSettings(**tools.web)) if tools.web is not None else None
        yield Toolbox(manager, tools_named(manager, tools.enabled), timeout_s=tools.timeout_s, web=web)
    finally:
        manager.shutdown()
