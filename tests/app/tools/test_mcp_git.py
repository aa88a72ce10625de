"""mcp-server-git from PyPI on a scratch repository (git's own command line makes it): its
tools listed, read calls answered from the repository, a write call that changes it, a
path outside the repository refused as a tool error; and the tool loop on the real model
forced to call git_log, whose result holds the commit."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from app.tools import CallFinished, ServerStatus, StdioServer, Toolbox, ToolLoop, TurnDone
from inference import SamplingParams

pytest.importorskip("mcp_server_git")


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = tmp_path / "scratch"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "config", "user.email", "tests@chorus.invalid")
    _git(repo, "config", "user.name", "Chorus tests")
    (repo / "notes.txt").write_text("first line\n")
    _git(repo, "add", "notes.txt")
    _git(repo, "commit", "-q", "-m", "Add the notes")
    return repo


@pytest.fixture
def git_server(repo: Path) -> StdioServer:
    return StdioServer("git", sys.executable, ("-m", "mcp_server_git", "--repository", str(repo)))


def test_mcp_server_git_reads_and_changes_a_scratch_repository(manager, git_server, repo):
    state = manager.start(git_server).result(60)
    assert state.status is ServerStatus.READY, f"{state.summary()}\n{state.stderr_tail}"
    names = {t.name for t in state.tools}
    assert {"git_status", "git_log", "git_add", "git_commit", "git_diff_unstaged"} <= names

    log = manager.call("git", "git_log", {"repo_path": str(repo)}, timeout_s=30)
    assert not log.is_error and "Add the notes" in log.text

    (repo / "notes.txt").write_text("first line\nsecond line\n")
    diff = manager.call("git", "git_diff_unstaged", {"repo_path": str(repo)}, timeout_s=30)
    assert not diff.is_error and "+second line" in diff.text
    assert not manager.call("git", "git_add", {"repo_path": str(repo), "files": ["notes.txt"]}, timeout_s=30).is_error
    commit = manager.call("git", "git_commit", {"repo_path": str(repo), "message": "Add a second line"}, timeout_s=30)
    assert not commit.is_error, commit.text
    assert _git(repo, "log", "--format=%s") == "Add a second line\nAdd the notes\n"  # the repository changed

    elsewhere = manager.call("git", "git_status", {"repo_path": str(repo.parent)}, timeout_s=30)
    assert elsewhere.is_error and elsewhere.text  # outside --repository: the server refuses, the call does not raise


@pytest.mark.model
def test_the_tool_loop_forced_to_call_git_log_gets_the_commit(shared_engine, manager, git_server, repo):
    manager.start(git_server).result(60)
    toolbox = Toolbox(manager, [t for t in manager.tools() if t.name == "git_log"], timeout_s=30)
    messages = [{"role": "user", "content": f"Show the git log of the repository at {repo}."}]
    # 200 tokens: the path (pytest's temporary folder, ~40 tokens) changes every run, and the
    # server's schema leaves repo_path a free string the model may stutter in before closing it
    loop = ToolLoop(shared_engine, toolbox, messages, SamplingParams(max_tokens=200, temperature=0.0),
                    choice="required", max_rounds=2)
    events = list(loop.run())
    forced = next(e for e in events if isinstance(e, TurnDone))
    assert forced.calls, f"the forced turn ended {forced.last.finish_reason}: {forced.written or forced.text!r}"
    finished = [e for e in events if isinstance(e, CallFinished)]
    assert finished and finished[0].call.name == "git_log"
    result = finished[0].result
    # The grammar makes the arguments valid; whether the tiny model copies the path whole
    # varies with the path's tokens: the right one gives the log, another the server's
    # refusal, as a result the model reads (never an exception).
    if json.loads(finished[0].call.arguments) == {"repo_path": str(repo)}:
        assert not result.is_error and "Add the notes" in result.text
    else:
        assert result.is_error and result.text
    assert messages[2]["role"] == "tool" and messages[2]["content"]
