"""MCP servers as the user configures them: a command run over stdio (args, env, working
folder) or a streamable-HTTP URL (headers); read from the `mcpServers` JSON that Claude
Desktop, Cursor and LM Studio use, or from a command line such as `--mcp "uvx
mcp-server-time"`, and written back in that JSON shape.

A malformed entry is one McpConfigError naming where it is (`mcpServers.time.args: must be
a list of strings, got 3`), before anything starts."""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any
from urllib.parse import urlparse

# Launchers whose first real argument names the server better than they do.
LAUNCHERS = {"npx", "uvx", "uv", "pipx", "bunx", "node", "deno", "docker", "python", "python3"}
HTTP_TYPES = {"http", "streamable-http", "streamable_http", "streamableHttp"}


class McpConfigError(ValueError):
    pass


@dataclass(frozen=True)
class StdioServer:
    name: str
    command: str
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)  # over a minimal default environment (the SDK's)
    cwd: str | None = None

    def describe(self) -> str:
        return shlex.join([self.command, *self.args])


@dataclass(frozen=True)
class HttpServer:
    name: str
    url: str
    headers: Mapping[str, str] = field(default_factory=dict)

    def describe(self) -> str:
        return self.url


ServerConfig = StdioServer | HttpServer


def parse_mcp_servers(text: str | Mapping[str, Any]) -> tuple[ServerConfig, ...]:
    """The servers of an mcpServers document (its text or its parsed JSON). VS Code's
    `servers` key is read too; entries with `"disabled": true` are left out."""
    if isinstance(text, str):
        try:
            document: Any = json.loads(text)
        except ValueError as exc:
            raise McpConfigError(f"not JSON: {exc}") from None
    else:
        document = text
    if not isinstance(document, Mapping):
        raise McpConfigError(f'must be a JSON object {{"mcpServers": {{...}}}}, got {_shown(document)}')
    key = "mcpServers" if "mcpServers" in document else "servers" if "servers" in document else None
    if key is None:
        raise McpConfigError('has no "mcpServers" object')
    servers = document[key]
    if not isinstance(servers, Mapping):
        raise McpConfigError(f"{key}: must be an object of servers by name, got {_shown(servers)}")
    return tuple(_server(name, entry, f"{key}.{name}") for name, entry in servers.items()
                 if not (isinstance(entry, Mapping) and entry.get("disabled") is True))


def read_mcp_servers_file(path: str | PurePath) -> tuple[ServerConfig, ...]:
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise McpConfigError(f"cannot read {path}: {exc}") from None
    try:
        return parse_mcp_servers(text)
    except McpConfigError as exc:
        raise McpConfigError(f"{path}: {exc}") from None


def mcp_servers_json(servers: Iterable[ServerConfig]) -> dict:
    """The servers as an mcpServers document (what parse_mcp_servers reads back)."""
    out: dict[str, dict] = {}
    for s in servers:
        if isinstance(s, HttpServer):
            out[s.name] = {"url": s.url, **({"headers": dict(s.headers)} if s.headers else {})}
        else:
            entry: dict[str, Any] = {"command": s.command, "args": list(s.args)}
            if s.env:
                entry["env"] = dict(s.env)
            if s.cwd:
                entry["cwd"] = s.cwd
            out[s.name] = entry
    return {"mcpServers": out}


def server_from_command(line: str, taken: Iterable[str] = ()) -> StdioServer:
    """A server from one command line ("uvx mcp-server-time --local-timezone UTC"), named
    after what it runs, with a number added when that name is taken."""
    try:
        words = shlex.split(line)
    except ValueError as exc:
        raise McpConfigError(f"--mcp {line!r}: {exc}") from None
    if not words:
        raise McpConfigError("--mcp: the command is empty")
    name, used, n = _name_of(words), set(taken), 2
    unique = name
    while unique in used:
        unique, n = f"{name}-{n}", n + 1
    return StdioServer(unique, words[0], tuple(words[1:]))


def _name_of(words: list[str]) -> str:
    program = PurePath(words[0]).name
    if not (program in LAUNCHERS or program.startswith("python")):
        return program or "server"
    rest = [w for w in words[1:] if w not in ("-m", "run", "exec", "-y", "--yes")]
    first = next((w for w in rest if not w.startswith("-")), program)
    return PurePath(first).name.split("@")[0] or program


def _server(name: Any, entry: Any, where: str) -> ServerConfig:
    if not isinstance(name, str) or not name.strip():
        raise McpConfigError(f"{where}: a server needs a non-empty name")
    if not isinstance(entry, Mapping):
        raise McpConfigError(f'{where}: must be an object {{"command", "args", ...}} or {{"url"}}, '
                             f"got {_shown(entry)}")
    kind = entry.get("type", entry.get("transport"))
    if kind == "sse":
        raise McpConfigError(f"{where}: the SSE transport is not supported; use the server's streamable-HTTP URL")
    has_command, has_url = "command" in entry, "url" in entry
    if has_command == has_url:
        raise McpConfigError(f'{where}: needs either "command" (a program run over stdio) or "url" '
                             "(streamable HTTP)" + (", not both" if has_command else ""))
    if kind is not None and kind not in HTTP_TYPES | {"stdio"}:
        raise McpConfigError(f"{where}.type: must be \"stdio\" or \"http\", got {_shown(kind)}")
    if has_url:
        return HttpServer(name, _url(entry["url"], f"{where}.url"), _strings(entry.get("headers"), f"{where}.headers"))
    command = entry["command"]
    if not isinstance(command, str) or not command.strip():
        raise McpConfigError(f"{where}.command: must be a non-empty string, got {_shown(command)}")
    args = entry.get("args", [])
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise McpConfigError(f"{where}.args: must be a list of strings, got {_shown(args)}")
    cwd = entry.get("cwd")
    if cwd is not None and (not isinstance(cwd, str) or not cwd):
        raise McpConfigError(f"{where}.cwd: must be a folder's path, got {_shown(cwd)}")
    return StdioServer(name, command, tuple(args), _strings(entry.get("env"), f"{where}.env"), cwd)


def _url(url: Any, where: str) -> str:
    parsed = urlparse(url) if isinstance(url, str) else None
    if parsed is None or parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise McpConfigError(f"{where}: must be an http:// or https:// URL, got {_shown(url)}")
    return str(url)


def _strings(value: Any, where: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise McpConfigError(f"{where}: must be an object of strings, got {_shown(value)}")
    return dict(value)


def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=repr)
    return text if len(text) <= 60 else text[:57] + "..."
