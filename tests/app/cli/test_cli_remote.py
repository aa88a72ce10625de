"""`chorus chat --server URL` against stand-in servers on loopback: a reply saved like a
local one, Ctrl-C keeping the partial reply, and the ways a server can refuse. The same
against a real Chorus server is in test_remote_client.py."""

from __future__ import annotations

import subprocess
import threading
import time

from storage import MessageStatus
from tests.support.cli import chorus_in_process
from tests.support.remote_standins import Handler, openai_like, piece, reply, standin, usage
from tests.support.terminal_chat import TerminalChat, saved_chats

KEY = "cli-standin-key-77"


def test_a_remote_reply_is_streamed_and_saved_like_a_local_one(tmp_path):
    with standin(openai_like(reply(["Hello", " there"], send_usage=usage(prompt=9, completion=2)))) as srv:
        chat = TerminalChat(tmp_path, "--server", srv.url, "--api-key", KEY, "--temperature", "0")
        chat.type("Hi!")
        chat.wait_for("bot> Hello there")
        chat.type("/quit")
        assert chat.finish() == 0
    [asked] = [s for s in srv.seen if s.body is not None]  # after GETs of /models: the chat
    assert asked.body["model"] == "standin-7b" and asked.body["temperature"] == 0.0
    assert {s.headers["Authorization"] for s in srv.seen} == {f"Bearer {KEY}"}
    assert KEY not in chat.out + chat.err
    assert "[2 tokens" in chat.err and "0/9 prompt tokens cached" in chat.err  # counts from usage
    [(conv, messages)] = saved_chats(tmp_path)
    assert conv.model_ref == f"remote:{srv.url}#standin-7b"  # the app reopens it on that server
    assert [(m.role, m.content) for m in messages] == [("user", "Hi!"), ("assistant", "Hello there")]
    answer = messages[-1]
    assert answer.status is MessageStatus.COMPLETE and answer.model == f"standin-7b @ 127.0.0.1:{srv.server_port}"
    assert (answer.prompt_tokens, answer.completion_tokens) == (9, 2)
    assert f"chorus chat --server {srv.url} --conversation {conv.id}" in chat.err


def test_ctrl_c_stops_a_remote_reply_and_keeps_what_came(tmp_path):
    gone = threading.Event()

    def endless(h: Handler) -> None:
        h.start_stream()
        try:
            for _ in range(1200):
                h.send_event(piece(" word"))
                time.sleep(0.05)  # a server writing a word every 50 ms, for a minute
        except OSError:
            gone.set()  # the client closed the stream: the server stops generating

    with standin(openai_like(endless)) as srv:
        chat = TerminalChat(tmp_path, "--server", srv.url)
        chat.type("Talk forever")
        chat.wait_for("bot>  word word word")
        chat.interrupt()
        chat.wait_for("you> ", after=chat.out.index("bot>"))  # the next prompt: the reply ended
        assert gone.wait(20)
        chat.type("/quit")
        assert chat.finish() == 0
    assert "[stopped]" in chat.err and "Traceback" not in chat.err
    [(_, messages)] = saved_chats(tmp_path)
    answer = messages[-1]
    assert answer.status is MessageStatus.STOPPED
    assert answer.content.startswith(" word word word") and set(answer.content.split()) == {"word"}
    shown = chat.out.split("bot> ", 1)[1].split("you>", 1)[0]
    # Everything shown was saved (Ctrl-C may land between saving a piece and showing it).
    assert answer.content.startswith(shown.rstrip("\n"))


def test_a_server_dying_mid_reply_is_saved_as_an_error(tmp_path):
    def dies(h: Handler) -> None:
        h.start_stream()
        h.send_event(piece("Half a"))
        h.die()

    with standin(openai_like(dies)) as srv:
        chat = TerminalChat(tmp_path, "--server", srv.url)
        chat.type("Hi")
        chat.wait_for("bot> ")
        chat.wait_for("you> ", after=chat.out.index("bot> "))
        chat.type("/quit")
        assert chat.finish() == 0
    assert "[error: " in chat.err and "in the middle of the reply" in chat.err
    [(_, messages)] = saved_chats(tmp_path)
    assert (messages[-1].status, messages[-1].content) == (MessageStatus.ERROR, "Half a")


def run_refused(capsys, tmp_path, *args: str) -> subprocess.CompletedProcess:
    """`chorus chat` refused before its first prompt, through the entry point in this process
    (what is checked is its status and its stderr, not the process: a process each cost
    ~1 s of imports; the streaming cases above run the real one)."""
    try:
        chat = chorus_in_process(capsys, tmp_path, "chat", *args)
    except SystemExit as exit_:  # an argument error, as argparse ends the process
        out = capsys.readouterr()
        chat = subprocess.CompletedProcess(args, exit_.code, out.out, out.err)
    assert chat.returncode == 2
    assert chat.stderr.count("\n") == 1 and chat.stderr.startswith("chorus: ") and "Traceback" not in chat.stderr
    return chat


def test_refusals_are_one_line_and_exit_2(tmp_path, capsys):
    with standin(lambda h: h.answer(401, {"error": {"message": "bad key"}})) as srv:
        chat = run_refused(capsys, tmp_path, "--server", srv.url, "--api-key", KEY)
        assert "refused the API key (401): bad key" in chat.stderr and KEY not in chat.stderr
    with standin(openai_like(reply(["x"]), models=("a", "b"))) as srv:
        chat = run_refused(capsys, tmp_path, "--server", srv.url)
        assert "serves 2 models (a, b): pick one with --remote-model" in chat.stderr
        chat = run_refused(capsys, tmp_path, "--server", srv.url, "--remote-model", "c")
        assert "has no model 'c' (it has: a, b)" in chat.stderr
    chat = run_refused(capsys, tmp_path, "--server", "http://127.0.0.1:1/v1")
    assert "refused the connection: is the server running?" in chat.stderr
    chat = run_refused(capsys, tmp_path, "--server", "localhost:8080")
    assert "not an http(s) URL" in chat.stderr
    chat = run_refused(capsys, tmp_path, "--api-key", KEY)
    assert "go with --server URL" in chat.stderr and KEY not in chat.stderr
    assert saved_chats(tmp_path) == []
