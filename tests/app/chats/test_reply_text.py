"""ReplyText: a reply's text held once, appended from the deltas' reader thread while others
read it (the presenter by position, the recorder whole); and the recorder saving a buffer it
shares with the presenter."""

from __future__ import annotations

import threading
import time

import pytest

from app.chats.recorder import ReplyRecorder
from app.chats.reply_text import ReplyText
from inference.outputs import Delta, FinishReason
from storage import MessageStatus


def test_positions_give_what_follows_what_was_read():
    text = ReplyText()
    assert (text.text(), text.end, len(text)) == ("", 0, 0)
    assert text.since(0) == ("", 0)
    text.append("Hel")
    text.append("")  # half a UTF-8 character: nothing
    text.append("lo")
    assert text.end == 5
    piece, drawn = text.since(0)
    assert (piece, drawn) == ("Hello", 5)
    assert text.since(drawn) == ("", 5)  # nothing new
    text.append(", ")
    text.append("world")
    assert text.since(drawn) == (", world", 12)
    assert text.since(3) == ("lo, world", 12)  # from inside what was joined already
    assert text.since(99) == ("", 12)
    assert text.upto() == ("Hello, world", 12)
    assert text.text() == "Hello, world"


def test_a_continued_reply_starts_from_the_messages_text():
    text = ReplyText("Once upon")
    assert text.end == 9 and text.since(9) == ("", 9)
    text.append(" a time")
    assert text.since(9) == (" a time", 16)
    assert text.text() == "Once upon a time"


def test_appends_from_a_thread_while_another_reads():
    """One writer (the reader thread of an engine) and two readers: one draws by position as
    a frame does, the other reads the whole text as a checkpoint does. Every piece is seen
    once, in order, and every whole text read is a prefix of the final one."""
    text, pieces = ReplyText(), [f"{i} " for i in range(20_000)]
    done, go = threading.Event(), threading.Barrier(3)  # all three start together

    def write() -> None:
        go.wait()
        for i, piece in enumerate(pieces):
            text.append(piece)
            if i % 1000 == 0:
                time.sleep(0.001)  # let the readers in, also on a busy machine
        done.set()

    drawn, position, wholes = [], 0, []

    def checkpoints() -> None:
        go.wait()
        while True:  # at least once, then until the writer is done
            wholes.append(text.text())
            if done.is_set():
                return
            time.sleep(0.0005)

    writer, saver = threading.Thread(target=write), threading.Thread(target=checkpoints)
    writer.start()
    saver.start()
    go.wait()
    while not done.is_set() or position < text.end:
        piece, position = text.since(position)
        drawn.append(piece)
    writer.join()
    saver.join()
    final = "".join(pieces)
    assert "".join(drawn) == final and position == len(final) == text.end
    assert text.text() == final
    assert wholes and all(final.startswith(whole) for whole in wholes)
    assert all(len(a) <= len(b) for a, b in zip(wholes, wholes[1:]))


def test_the_recorder_saves_the_buffer_it_shares_with_the_presenter(repo):
    """As the desktop does it: the reader thread appends each delta's text to the shared
    buffer, then hands the delta to the recorder (the storage thread's turn comes later, so
    the buffer may be ahead of it). The recorder never appends: it saves what the buffer
    holds, at its checkpoints and at the end."""
    conv = repo.create_conversation("chat")
    user = repo.add_message(conv.id, "user", "hello")
    reply = repo.start_reply(conv.id, parent_id=user.id, model="tiny.gguf")
    clock = [100.0]
    shared = ReplyText()
    recorder = ReplyRecorder(repo, reply.id, every_s=1.0, clock=lambda: clock[0], reply=shared)
    assert recorder.reply is shared

    first, second = Delta("r1", text="Hel", token_ids=(1,)), Delta("r1", text="lo", token_ids=(2,))
    shared.append(first.text)
    shared.append(second.text)  # the reader thread is a delta ahead of the storage thread
    recorder.on_delta(first)
    assert repo.get_message(reply.id).content == ""  # not a second yet
    clock[0] = 101.0
    recorder.on_delta(second)
    saved = repo.get_message(reply.id)
    assert (saved.content, saved.completion_tokens) == ("Hello", 2)  # the buffer's text, each piece once
    assert recorder.text == shared.text() == "Hello"

    clock[0] = 102.5
    recorder.on_delta(Delta("r1"))  # a phase change: nothing new, nothing written
    end = Delta("r1", text="!", token_ids=(3,), finish_reason=FinishReason.STOP)
    shared.append(end.text)
    recorder.on_delta(end)
    saved = repo.get_message(reply.id)
    assert (saved.content, saved.status, saved.completion_tokens) == ("Hello!", MessageStatus.COMPLETE, 3)


def test_a_continued_reply_shares_its_text_and_checkpoints_only_what_is_new(repo):
    conv = repo.create_conversation("chat")
    user = repo.add_message(conv.id, "user", "hello")
    reply = repo.start_reply(conv.id, parent_id=user.id, model="tiny.gguf")
    repo.finish_reply(reply.id, "Once upon", status=MessageStatus.COMPLETE, completion_tokens=2)
    resumed = repo.resume_reply(reply.id)
    clock = [100.0]
    shared = ReplyText(resumed.content)
    recorder = ReplyRecorder(repo, reply.id, clock=lambda: clock[0], tokens=2, reply=shared)
    clock[0] = 105.0
    recorder.on_delta(Delta("r1", token_ids=(7,)))  # no text: the stored text is the buffer's
    assert repo.get_message(reply.id).completion_tokens == 2  # nothing written
    shared.append(" a time")
    recorder.on_delta(Delta("r1", text=" a time", token_ids=(8,)))
    assert repo.get_message(reply.id).content == "Once upon a time"
    with pytest.raises(ValueError):
        ReplyRecorder(repo, reply.id, text="Once upon", reply=ReplyText("Once upon"))
