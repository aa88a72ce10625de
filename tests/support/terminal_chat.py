"""`chorus chat` as a person runs it: a real process, typed into line by line, its output
read as it streams, Ctrl-C sent as SIGINT, and the chats it saved read back."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from storage import (
    DEFAULT_FILENAME,
    ActivePath,
    ChatRepository,
    ConversationRecord,
    MessageRecord,
    open_database,
)


class TerminalChat:
    def __init__(self, data_dir: Path, *args: str) -> None:
        env = {**os.environ, "CHORUS_DATA_DIR": str(data_dir), "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "app", "chat", *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, env=env,
        )
        self._out: list[bytes] = []
        self._err: list[bytes] = []
        self._readers = [threading.Thread(target=_drain, args=(stream, sink), daemon=True)
                         for stream, sink in ((self.proc.stdout, self._out), (self.proc.stderr, self._err))]
        for reader in self._readers:
            reader.start()

    @property
    def out(self) -> str:
        return b"".join(self._out).decode("utf-8", "replace")

    @property
    def err(self) -> str:
        return b"".join(self._err).decode("utf-8", "replace")

    def type(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line.encode() + b"\n")
        self.proc.stdin.flush()

    def wait_for(self, text: str, after: int = 0, timeout: float = 120) -> None:
        """Until the output holds text (past the first `after` characters)."""
        deadline = time.monotonic() + timeout
        while text not in self.out[after:]:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"no {text!r} in the output: {self.out!r}; errors: {self.err!r}")
            time.sleep(0.02)

    def interrupt(self) -> None:
        self.proc.send_signal(signal.SIGINT)

    def finish(self, timeout: float = 120) -> int:
        """Closes its input (the person leaves) and waits for it to exit."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        code = self.proc.wait(timeout)
        for reader in self._readers:  # they end at the end of the output, all of it read
            reader.join(timeout)
        return code


def _drain(stream, sink: list[bytes]) -> None:
    while chunk := os.read(stream.fileno(), 4096):
        sink.append(chunk)


def saved_paths(data_dir: Path) -> list[ActivePath]:
    """Each conversation's branch as saved (its messages and their attachments), read without
    the recovery the app runs at start (a reply left `streaming` by a crash would be shown
    `interrupted` by it)."""
    db = open_database(data_dir / DEFAULT_FILENAME)
    repo = ChatRepository(db)
    try:
        return [repo.active_path(c.id) for c in repo.list_conversations()]
    finally:
        db.close()


def saved_chats(data_dir: Path) -> list[tuple[ConversationRecord, list[MessageRecord]]]:
    """saved_paths, each as its conversation and messages."""
    return [(path.conversation, list(path.messages)) for path in saved_paths(data_dir)]
