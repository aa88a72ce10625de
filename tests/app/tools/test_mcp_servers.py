"""MCP servers run by the manager (app/tools/mcp_servers.py, mcp_connection.py): the real
mcp-server-time from PyPI over stdio, the SDK-made test server over stdio and streamable
HTTP, and servers that misbehave (a command that does not exist, one that exits at once,
one that writes garbage and never answers, a tool that hangs). No model."""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from datetime import datetime

from app.tools import McpManager, ServerStatus, StdioServer


def test_mcp_server_time_lists_its_tools_and_tells_the_time(manager, time_server):
    state = manager.start(time_server).result(30)
    assert state.status is ServerStatus.READY, state.summary()
    names = {t.name for t in state.tools}
    assert {"get_current_time", "convert_time"} <= names
    tool = next(t for t in state.tools if t.name == "get_current_time")
    assert "timezone" in tool.input_schema["properties"] and tool.description
    assert state.summary() == f"ready with {len(state.tools)} tools"

    result = manager.call("time", "get_current_time", {"timezone": "Europe/Paris"}, timeout_s=20)
    assert not result.is_error, result.text
    answer = json.loads(result.text)
    assert answer["timezone"] == "Europe/Paris"
    assert datetime.fromisoformat(answer["datetime"]).utcoffset() is not None
    assert 0 < result.duration_s < 20


def test_a_tool_error_and_a_bad_argument_are_error_results(manager, time_server):
    manager.start(time_server).result(30)
    wrong = manager.call("time", "get_current_time", {"timezone": "Mars/Olympus"}, timeout_s=20)
    assert wrong.is_error and "Mars/Olympus" in wrong.text
    missing = manager.call("time", "no_such_tool", {}, timeout_s=20)
    assert missing.is_error and "no_such_tool" in missing.text


def test_the_streamable_http_server_is_listed_and_called(manager, http_server):
    state = manager.start(http_server).result(30)
    assert state.status is ServerStatus.READY, state.summary()
    assert {"add", "slow", "big", "fail", "picture"} <= {t.name for t in state.tools}
    result = manager.call("web", "add", {"a": 2, "b": 40}, timeout_s=20)
    assert (result.text, result.is_error) == ("42", False)


def test_text_images_and_tool_errors_as_the_model_reads_them(manager, test_server):
    manager.start(test_server).result(30)
    assert manager.call("test", "picture", {}).text == "[image]"
    failed = manager.call("test", "fail", {})
    assert failed.is_error and "this tool always fails" in failed.text


def test_output_is_capped_and_the_cut_said(test_server):
    with McpManager(output_cap=100) as manager:
        manager.start(test_server).result(30)
        whole = manager.call("test", "big", {"characters": 100})
        assert (whole.text, whole.cut_chars) == ("x" * 100, 0)
        cut = manager.call("test", "big", {"characters": 5000})
        assert cut.text.startswith("x" * 100 + "\n[output cut: 4900 of 5000 characters left out]")
        assert cut.cut_chars == 4900


def test_a_call_that_hangs_is_an_error_within_its_timeout_and_the_server_stays_usable(manager, test_server):
    manager.start(test_server).result(30)
    began = time.monotonic()
    hung = manager.call("test", "slow", {"seconds": 60}, timeout_s=1.0)
    took = time.monotonic() - began
    assert hung.is_error and "did not answer within 1 s" in hung.text
    assert took < 5, took
    assert manager.call("test", "add", {"a": 1, "b": 2}, timeout_s=10).text == "3"
    assert manager.state("test").status is ServerStatus.READY


def test_calls_from_several_threads_run_at_once(manager, test_server):
    manager.start(test_server).result(30)
    futures = [manager.submit_call("test", "slow", {"seconds": 1}, timeout_s=20) for _ in range(4)]
    began = time.monotonic()
    results = [f.result(30) for f in futures]
    assert [r.text for r in results] == ["slept 1.0 s"] * 4
    assert time.monotonic() - began < 3.5  # not one after another (4 s)


def test_a_command_that_does_not_exist_fails_with_the_reason(manager):
    state = manager.start(StdioServer("ghost", "/no/such/mcp-server")).result(30)
    assert state.status is ServerStatus.FAILED
    assert "cannot start" in state.reason and "/no/such/mcp-server" in state.reason
    result = manager.call("ghost", "anything", {})
    assert result.is_error and "not ready" in result.text


def test_a_server_that_exits_at_once_fails_with_its_stderr(manager):
    crash = "import sys; print('config file missing', file=sys.stderr); sys.exit(3)"
    state = manager.start(StdioServer("crash", sys.executable, ("-c", crash))).result(30)
    assert state.status is ServerStatus.FAILED
    assert "exited" in state.reason
    assert "config file missing" in state.stderr_tail


def test_a_server_writing_garbage_fails_after_the_start_timeout_saying_so():
    garbage = "import sys, time\nprint('hello, I am not JSON-RPC', flush=True)\ntime.sleep(60)"
    with McpManager(start_timeout_s=2) as manager:
        began = time.monotonic()
        state = manager.start(StdioServer("noise", sys.executable, ("-c", garbage))).result(30)
        assert time.monotonic() - began < 10
    assert state.status is ServerStatus.FAILED
    assert "did not answer within 2 s" in state.reason and "not JSON-RPC" in state.reason


def test_a_server_writing_lines_of_garbage_is_said_in_its_one_line_reason_without_the_sdks_tracebacks(caplog):
    """Issue 39: the SDK logged an 11-line traceback for every line (554 lines in all) before
    the reason said it once."""
    garbage = "import time\nfor i in range(40): print('not JSON-RPC', i, flush=True)\ntime.sleep(60)"
    with caplog.at_level(logging.DEBUG, logger="mcp"), McpManager(start_timeout_s=2) as manager:
        state = manager.start(StdioServer("noise", sys.executable, ("-c", garbage))).result(30)
    assert state.status is ServerStatus.FAILED
    assert "it wrote what is not JSON-RPC: 'not JSON-RPC " in state.reason  # the line itself
    assert [r.getMessage() for r in caplog.records if r.name.startswith("mcp") and r.levelno >= logging.WARNING] == []


def test_a_server_that_exits_later_turns_failed(manager, test_server, tmp_path):
    # A wrapper that runs the test server until a file appears, then exits.
    script = tmp_path / "exits_later.py"
    script.write_text(
        "import pathlib, runpy, sys, threading, time, os\n"
        f"flag = pathlib.Path({str(tmp_path / 'stop')!r})\n"
        "def watch():\n"
        "    while not flag.exists(): time.sleep(0.05)\n"
        "    print('stopping now', file=sys.stderr, flush=True); os._exit(1)\n"
        "threading.Thread(target=watch, daemon=True).start()\n"
        f"sys.argv = [{test_server.args[0]!r}, 'stdio']\n"
        f"runpy.run_path({test_server.args[0]!r}, run_name='__main__')\n")
    seen = threading.Event()
    manager.on_state = lambda s: s.status is ServerStatus.FAILED and seen.set()
    assert manager.start(StdioServer("late", sys.executable, (str(script),))).result(30).status is ServerStatus.READY
    (tmp_path / "stop").touch()
    assert seen.wait(20)
    state = manager.state("late")
    assert "exited" in state.reason and "stopping now" in state.stderr_tail


def test_restart_stop_and_shutdown_end_the_child_processes(test_server):
    import psutil

    manager = McpManager()
    manager.start(test_server).result(30)
    first = _children()
    assert first, "the server's process"
    assert manager.restart("test").result(30).status is ServerStatus.READY
    assert manager.call("test", "add", {"a": 1, "b": 1}).text == "2"
    assert not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in first)
    manager.stop("test").result(30)
    assert manager.states() == ()
    manager.start(test_server).result(30)
    manager.shutdown()
    assert _children() == []
    manager.shutdown()  # again: nothing


def _children():
    """The test server's stdio children of this process (not the HTTP one the window's tool
    tests share: tests/support/mcp_http.py)."""
    import psutil

    return [p for p in psutil.Process().children(recursive=True)
            if p.status() != psutil.STATUS_ZOMBIE and p.cmdline()[-2:-1] != ["http"]
            and "mcp_test_server" in " ".join(p.cmdline())]


def test_shutdown_while_a_call_hangs_and_a_server_starts_ends_both_at_once(test_server):
    garbage = "import time\nprint('not JSON-RPC', flush=True)\ntime.sleep(60)"
    manager = McpManager(start_timeout_s=60)
    manager.start(test_server).result(30)
    hanging = manager.submit_call("test", "slow", {"seconds": 60}, timeout_s=120)
    starting = manager.start(StdioServer("noise", sys.executable, ("-c", garbage)))
    began = time.monotonic()
    manager.shutdown()
    assert time.monotonic() - began < 10
    assert hanging.result(5).is_error
    assert starting.result(5).status is ServerStatus.STOPPED
    assert _children() == []
