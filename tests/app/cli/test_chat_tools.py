"""`chorus chat` with MCP servers (app/cli/chat_tools.py, chat_tool_args.py), run as a
process on the real model: --mcp with --yes calls the real mcp-server-time, prints the call
and its result, and stores the call and the result in the history; without --yes the call
is asked about and a "n" goes back to the model as a denial; a bad --mcp-config is one line
before the model loads."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from app.tools import DENIED
from app.tools.history import NOT_RUN
from tests.support.cli import chorus
from tests.support.terminal_chat import TerminalChat, saved_chats

TIME_SERVER = shlex.join([sys.executable, "-m", "mcp_server_time", "--local-timezone", "UTC"])
TEST_SERVER = shlex.join([sys.executable, str(Path(__file__).parents[2] / "support" / "mcp_test_server.py"), "stdio"])


@pytest.mark.model
def test_a_required_call_with_yes_runs_the_time_server_and_is_stored(data_dir):
    out = chorus(data_dir, "chat", "--mcp", TIME_SERVER, "--tool-choice", "required", "--yes", "--max-tokens", "80",
                 "--temperature", "0", stdin="What time is it in Tokyo?\n/quit\n")
    assert out.returncode == 0, out.stderr
    assert "mcp: mcp_server_time (" in out.stderr and "ready with 2 tools" in out.stderr
    assert "[tool] get_current_time(" in out.stdout or "[tool] convert_time(" in out.stdout
    assert "run " not in out.stdout  # --yes: nothing asked

    [(conversation, messages)] = saved_chats(data_dir)
    assert [m.role for m in messages[:3]] == ["user", "assistant", "tool"]
    call = messages[1].tool_calls[0]
    assert call.name in ("get_current_time", "convert_time") and isinstance(json.loads(call.arguments), dict)
    result = messages[2].tool_result
    assert result is not None and result.call_id == call.id and result.duration_s is not None
    if not result.is_error:
        assert "datetime" in json.loads(messages[2].content) or "source" in messages[2].content
    assert f"[{call.name}, " in out.stdout  # the result, inline
    assert messages[-1].role == "assistant" and messages[-1].content and not messages[-1].tool_calls

    again = chorus(data_dir, "chat", "--conversation", str(conversation.id), "--max-tokens", "8",
                   "--temperature", "0", stdin="Thanks.\n/quit\n")
    assert again.returncode == 0, again.stderr
    assert f"continuing conversation {conversation.id} ({len(messages)} messages)" in again.stderr


@pytest.mark.model
def test_a_call_asked_about_and_refused_goes_back_as_a_denial(data_dir):
    out = chorus(data_dir, "chat", "--mcp", TEST_SERVER, "--mcp", "/no/such/mcp-server", "--tool-choice", "required",
                 "--max-tool-rounds", "2", "--max-tokens", "60", "--temperature", "0",
                 stdin="Add 2 and 3.\nn\n/quit\n")
    assert out.returncode == 0, out.stderr
    assert "mcp: mcp-server (/no/such/mcp-server): failed: cannot start" in out.stderr
    assert "mcp: mcp_test_server.py (" in out.stderr
    assert "? [y]es / [a]lways / [n]o " in out.stdout
    assert ": denied]" in out.stdout
    [(_, messages)] = saved_chats(data_dir)
    denial = next(m for m in messages if m.role == "tool")
    assert denial.content == DENIED and denial.tool_result.denied
    assert messages[-1].role == "assistant" and not messages[-1].tool_calls


@pytest.mark.model
def test_ctrl_c_at_a_calls_question_leaves_no_call_without_its_result(data_dir):
    """As the window's Stop does: the call asked about when Ctrl-C came is stored as not run,
    so the history holds no call without a result (it had one before)."""
    chat = TerminalChat(data_dir, "--mcp", TEST_SERVER, "--tool-choice", "required", "--max-tokens", "60",
                        "--temperature", "0")
    chat.wait_for("you> ")
    chat.type("Add 2 and 3.")
    chat.wait_for("? [y]es / [a]lways / [n]o ")
    chat.interrupt()
    chat.wait_for("you> ", after=chat.out.index("? [y]es"))
    assert chat.finish() == 0, chat.err
    assert "[stopped]" in chat.err

    [(_, messages)] = saved_chats(data_dir)
    calls = [c for m in messages if m.role == "assistant" for c in m.tool_calls]
    results = {m.tool_result.call_id: m for m in messages if m.role == "tool"}
    assert calls and {c.id for c in calls} == set(results)
    assert all(r.content == NOT_RUN and r.tool_result.cancelled for r in results.values())


def test_a_malformed_mcp_config_is_one_line_before_the_model_loads(data_dir, tmp_path):
    config = tmp_path / "mcp.json"
    config.write_text('{"mcpServers": {"time": {"command": "uvx", "args": "mcp-server-time"}}}')
    out = chorus(data_dir, "chat", "--mcp-config", str(config), "--model", str(tmp_path / "absent.gguf"), stdin="")
    assert out.returncode == 2
    expected = f'chorus: {config}: mcpServers.time.args: must be a list of strings, got "mcp-server-time"'
    assert out.stderr.strip() == expected


@pytest.mark.model
def test_tools_web_offers_fetch_and_runs_it_on_the_stand_in(data_dir):
    from tests.support.web_stand_in import stand_in_web

    with stand_in_web() as base:
        out = chorus(data_dir, "chat", "--tools", "web", "--allow-private-addresses", "--tool-choice", "required",
                     "--yes", "--max-tool-rounds", "2", "--max-tokens", "100", "--temperature", "0",
                     stdin=f"What is the heading of the page at {base}/page ?\n/quit\n")
    assert out.returncode == 0, out.stderr
    assert "[tool] fetch(" in out.stdout or "[tool] web_search(" in out.stdout
    [(_, messages)] = saved_chats(data_dir)
    assert [m.role for m in messages[:3]] == ["user", "assistant", "tool"]
