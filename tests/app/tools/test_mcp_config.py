"""The mcpServers JSON of Claude Desktop, Cursor and LM Studio, and --mcp command lines, read
into server configurations (app/tools/mcp_config.py); every malformed entry one error
naming where. No model, no server."""

from __future__ import annotations

import json

import pytest

from app.tools import (
    HttpServer,
    McpConfigError,
    StdioServer,
    mcp_servers_json,
    parse_mcp_servers,
    read_mcp_servers_file,
    server_from_command,
)

CLAUDE = {"mcpServers": {
    "time": {"command": "uvx", "args": ["mcp-server-time", "--local-timezone", "UTC"]},
    "files": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"],
              "env": {"DEBUG": "1"}, "cwd": "/tmp"},
    "remote": {"url": "https://example.com/mcp", "headers": {"Authorization": "Bearer k"}},
    "off": {"command": "x", "disabled": True},
}}


def test_a_claude_desktop_document_is_read_whole():
    servers = parse_mcp_servers(json.dumps(CLAUDE))
    assert servers == (
        StdioServer("time", "uvx", ("mcp-server-time", "--local-timezone", "UTC")),
        StdioServer("files", "npx", ("-y", "@modelcontextprotocol/server-filesystem", "/tmp"), {"DEBUG": "1"}, "/tmp"),
        HttpServer("remote", "https://example.com/mcp", {"Authorization": "Bearer k"}),
    )
    assert parse_mcp_servers(mcp_servers_json(servers)) == servers  # written back, read again


def test_vs_codes_servers_key_and_types_are_read():
    doc = {"servers": {"a": {"type": "stdio", "command": "a"}, "b": {"type": "http", "url": "http://127.0.0.1:1/mcp"}}}
    assert [type(s) for s in parse_mcp_servers(doc)] == [StdioServer, HttpServer]


@pytest.mark.parametrize(("document", "message"), [
    ("{not json", "not JSON"),
    ("[1]", "must be a JSON object"),
    ("{}", 'has no "mcpServers" object'),
    ('{"mcpServers": []}', "mcpServers: must be an object of servers by name"),
    ('{"mcpServers": {"t": 3}}', "mcpServers.t: must be an object"),
    ('{"mcpServers": {"t": {}}}', 'mcpServers.t: needs either "command"'),
    ('{"mcpServers": {"t": {"command": "a", "url": "http://x"}}}', "not both"),
    ('{"mcpServers": {"t": {"command": ""}}}', "mcpServers.t.command: must be a non-empty string"),
    ('{"mcpServers": {"t": {"command": "a", "args": 3}}}', "mcpServers.t.args: must be a list of strings, got 3"),
    ('{"mcpServers": {"t": {"command": "a", "args": ["x", 1]}}}', "mcpServers.t.args: must be a list of strings"),
    ('{"mcpServers": {"t": {"command": "a", "env": {"K": 1}}}}', "mcpServers.t.env: must be an object of strings"),
    ('{"mcpServers": {"t": {"command": "a", "cwd": 5}}}', "mcpServers.t.cwd: must be a folder's path"),
    ('{"mcpServers": {"t": {"url": "ftp://x"}}}', "mcpServers.t.url: must be an http:// or https:// URL"),
    ('{"mcpServers": {"t": {"url": "http://x", "headers": ["a"]}}}', "mcpServers.t.headers: must be an object"),
    ('{"mcpServers": {"t": {"type": "sse", "url": "http://x/sse"}}}', "SSE transport is not supported"),
    ('{"mcpServers": {"t": {"type": "grpc", "command": "a"}}}', "mcpServers.t.type: must be"),
    ('{"mcpServers": {"": {"command": "a"}}}', "a server needs a non-empty name"),
])
def test_a_malformed_document_is_one_error_naming_where(document, message):
    with pytest.raises(McpConfigError) as caught:
        parse_mcp_servers(document)
    assert message in str(caught.value)


def test_a_file_that_cannot_be_read_or_parsed_names_the_file(tmp_path):
    with pytest.raises(McpConfigError, match="cannot read"):
        read_mcp_servers_file(tmp_path / "missing.json")
    bad = tmp_path / "mcp.json"
    bad.write_text('{"mcpServers": {"t": {"command": 1}}}')
    with pytest.raises(McpConfigError, match=r"mcp\.json: mcpServers\.t\.command"):
        read_mcp_servers_file(bad)


@pytest.mark.parametrize(("line", "name"), [
    ("uvx mcp-server-time --local-timezone UTC", "mcp-server-time"),
    ("python -m mcp_server_time", "mcp_server_time"),
    ("/usr/bin/python3.11 -m mcp_server_git --repository /tmp/r", "mcp_server_git"),
    ("npx -y @modelcontextprotocol/server-filesystem /tmp", "server-filesystem"),
    ("/opt/bin/my-server --port 3", "my-server"),
])
def test_a_command_line_is_a_server_named_after_what_it_runs(line, name):
    server = server_from_command(line)
    assert server.name == name and server.describe() == line.replace("'", "")


def test_a_taken_name_gets_a_number_and_a_bad_line_is_an_error():
    assert server_from_command("uvx mcp-server-time", taken=["mcp-server-time"]).name == "mcp-server-time-2"
    with pytest.raises(McpConfigError, match="empty"):
        server_from_command("  ")
    with pytest.raises(McpConfigError, match="quotation"):
        server_from_command('uvx "unclosed')
