"""A process killed with SIGKILL mid-stream loses at most its last checkpoint interval."""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from storage import ChatRepository, MessageStatus, open_database
from tests.support.paths import ROOT
from tests.support.waiting import wait_until

WRITER = textwrap.dedent(
    """
    import sys, time
    from storage import ChatRepository, open_database
    db = open_database(sys.argv[1])
    repo = ChatRepository(db)
    conv = repo.create_conversation("crash test")
    repo.add_message(conv.id, "user", "first question")
    done = repo.start_reply(conv.id)
    repo.finish_reply(done.id, "a complete answer", completion_tokens=3)
    repo.add_message(conv.id, "user", "second question")
    live = repo.start_reply(conv.id)
    print(f"conversation {conv.id} {live.id}", flush=True)
    text = ""
    i = 0
    while True:
        text += f"word{i} "
        repo.checkpoint(live.id, text)
        print(f"saved {len(text)}", flush=True)
        i += 1
        time.sleep(0.02)
    """
)


def test_sigkill_mid_stream_keeps_completed_messages_and_the_last_checkpoint(tmp_path):
    db_path = tmp_path / "chorus.db"
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(db_path)],
        stdout=subprocess.PIPE, text=True, cwd=ROOT,
    )
    _, conv_id, live_id = proc.stdout.readline().split()
    saved = 0
    while saved < 200:
        line = proc.stdout.readline()
        assert line.startswith("saved"), line
        saved = int(line.split()[1])
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    assert proc.returncode == -signal.SIGKILL

    db = open_database(db_path)
    repo = ChatRepository(db)
    assert repo.recover_interrupted() == 1
    path = repo.active_path(int(conv_id))
    roles = [(m.role, m.status) for m in path.messages]
    assert roles == [
        ("user", MessageStatus.COMPLETE),
        ("assistant", MessageStatus.COMPLETE),
        ("user", MessageStatus.COMPLETE),
        ("assistant", MessageStatus.INTERRUPTED),
    ]
    assert path.messages[1].content == "a complete answer"
    partial = path.messages[3]
    assert partial.id == int(live_id)
    # Everything reported as saved is there; at most one later checkpoint slipped in.
    assert len(partial.content) >= saved
    words = partial.content.split()
    assert words == [f"word{i}" for i in range(len(words))]
    db.close()


@pytest.mark.model
def test_killed_terminal_chat_reopens_with_its_partial_reply_interrupted(tmp_path, model_path):
    data = tmp_path
    (data / "models").mkdir()
    (data / "models" / model_path.name).symlink_to(model_path)
    env = {**os.environ, "CHORUS_DATA_DIR": str(data)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "app", "chat", "--max-tokens", "2000", "--temperature", "0.8", "--seed", "1"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
        cwd=ROOT,
    )
    proc.stdin.write(b"Write a very long story about a dragon, with many chapters.\n")
    proc.stdin.flush()
    streamed = b""
    deadline = time.monotonic() + 120
    while len(streamed.split(b"bot> ", 1)[-1]) < 400 and time.monotonic() < deadline:
        chunk = os.read(proc.stdout.fileno(), 4096)
        if not chunk:
            break
        streamed += chunk
    wait_for_checkpoint(data / "chorus.db", 300)  # a checkpoint holds the start of what we saw
    proc.kill()
    proc.wait(timeout=10)
    assert len(streamed.split(b"bot> ", 1)[-1]) >= 400, "the reply should have been streaming"

    db = open_database(data / "chorus.db")
    repo = ChatRepository(db)
    assert repo.recover_interrupted() == 1
    conv = repo.list_conversations()[0]
    path = repo.active_path(conv.id)
    assert [m.role for m in path.messages] == ["user", "assistant"]
    reply = path.messages[1]
    assert reply.status is MessageStatus.INTERRUPTED
    seen = streamed.split(b"bot> ", 1)[1].decode("utf-8", errors="ignore")
    # The checkpoint holds at least what was on screen a second before the kill.
    assert len(reply.content) >= 300
    assert seen[:300] == reply.content[:300]
    db.close()


def wait_for_checkpoint(db_path: Path, chars: int, timeout: float = 30) -> None:
    """Until the reply being written has `chars` characters in the database (read beside the
    writer, as WAL allows)."""
    def saved() -> bool:
        with contextlib.closing(sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)) as conn:
            longest = conn.execute("SELECT max(length(content)) FROM messages WHERE role = 'assistant'").fetchone()[0]
        return (longest or 0) >= chars

    wait_until(saved, f"a checkpoint of {chars} characters", timeout)
