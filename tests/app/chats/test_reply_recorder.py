"""ReplyRecorder: throttled checkpoints of a streaming reply and its final state (fake clock)."""

from __future__ import annotations

import pytest

from app.chats.recorder import ReplyRecorder
from inference.outputs import Delta, FinishReason, RequestStats
from storage import ChatRepository, MessageStatus, open_database
from tests.support.databases import seed_database


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class CountingRepository(ChatRepository):
    """The real repository on a real file, counting checkpoint writes."""

    def __init__(self, db) -> None:
        super().__init__(db)
        self.checkpoints: list[tuple[str, int | None]] = []

    def checkpoint(self, message_id, content, completion_tokens=None):
        self.checkpoints.append((content, completion_tokens))
        super().checkpoint(message_id, content, completion_tokens)


@pytest.fixture
def repo(tmp_path):
    db = open_database(seed_database(tmp_path / "chats.db"))
    yield CountingRepository(db)
    db.close()


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture
def reply(repo):
    conv = repo.create_conversation("chat")
    repo.add_message(conv.id, "user", "hello")
    return repo.start_reply(conv.id, model="tiny.gguf")


def stats(**kw) -> RequestStats:
    values = dict(prompt_tokens=11, cached_tokens=4, generated_tokens=6, queue_s=0.01, ttft_s=0.2,
                  decode_tok_s=55.5, itl_p50_s=0.01, itl_p95_s=0.02, total_s=0.4)
    values.update(kw)
    return RequestStats(**values)


def piece(text: str, n_tokens: int = 1) -> Delta:
    return Delta("r1", text=text, token_ids=tuple(range(n_tokens)))


def stored(repo, reply):
    return repo.get_message(reply.id)


def test_checkpoints_at_most_once_per_interval(repo, clock, reply):
    rec = ReplyRecorder(repo, reply.id, every_s=1.0, clock=clock)
    for t, text in [(0.2, "Hel"), (0.5, "lo"), (0.99, ",")]:
        clock.now = 100.0 + t
        rec.on_delta(piece(text))
    assert repo.checkpoints == []
    assert stored(repo, reply).content == ""  # nothing written before a second passed
    assert rec.text == "Hello,"

    clock.now = 101.0
    rec.on_delta(piece(" wor"))
    assert repo.checkpoints == [("Hello, wor", 4)]
    assert stored(repo, reply).content == "Hello, wor"
    assert stored(repo, reply).completion_tokens == 4
    assert stored(repo, reply).status is MessageStatus.STREAMING

    for t in (101.3, 101.6, 101.99):  # within a second of the last save
        clock.now = t
        rec.on_delta(piece("ld"))
    assert len(repo.checkpoints) == 1
    clock.now = 102.0
    rec.on_delta(piece("!"))
    assert repo.checkpoints[-1] == ("Hello, world" + "ldld" + "!", 8)
    assert len(repo.checkpoints) == 2


def test_many_fast_deltas_checkpoint_once_per_interval(repo, clock, reply):
    rec = ReplyRecorder(repo, reply.id, every_s=0.5, clock=clock)
    for i in range(100):  # 100 tokens over 5 s, one every 50 ms
        clock.now = 100.0 + 0.05 * (i + 1)
        rec.on_delta(piece(f"{i} "))
    # at most one per 0.5 s over 5 s
    assert 8 <= len(repo.checkpoints) <= 10
    texts = [t for t, _ in repo.checkpoints]
    assert all(b.startswith(a) and len(b) > len(a) for a, b in zip(texts, texts[1:]))
    assert stored(repo, reply).content == texts[-1]


def test_no_checkpoint_when_nothing_new_arrived(repo, clock, reply):
    rec = ReplyRecorder(repo, reply.id, every_s=1.0, clock=clock)
    clock.now = 101.5
    rec.on_delta(piece("text"))
    assert len(repo.checkpoints) == 1
    # time passes, deltas without text (phase changes, half a UTF-8 character)
    for t in (103.0, 105.0, 110.0):
        clock.now = t
        rec.on_delta(Delta("r1"))
        rec.on_delta(Delta("r1", text="", token_ids=(7,)))
    assert len(repo.checkpoints) == 1
    # new text after a long pause is saved at once, with the tokens counted meanwhile
    clock.now = 111.0
    rec.on_delta(piece("more", 1))
    assert repo.checkpoints[-1] == ("textmore", 5)


def test_no_deltas_no_writes(repo, clock, reply):
    ReplyRecorder(repo, reply.id, clock=clock)
    clock.now = 200.0
    assert repo.checkpoints == []
    assert stored(repo, reply).status is MessageStatus.STREAMING


@pytest.mark.parametrize(
    "reason, status, error",
    [
        (FinishReason.STOP, MessageStatus.COMPLETE, None),
        (FinishReason.LENGTH, MessageStatus.COMPLETE, None),
        (FinishReason.CONTEXT_FULL, MessageStatus.COMPLETE, None),
        (FinishReason.CANCELLED, MessageStatus.STOPPED, None),
        (FinishReason.ERROR, MessageStatus.ERROR, "decode failed"),
        (FinishReason.INTERRUPTED, MessageStatus.INTERRUPTED, "the engine process stopped unexpectedly"),
    ],
)
def test_final_delta_finishes_with_status_and_stats(repo, clock, reply, reason, status, error):
    rec = ReplyRecorder(repo, reply.id, every_s=1.0, clock=clock)
    clock.now = 100.1
    rec.on_delta(piece("Hi", 2))
    clock.now = 100.2  # finishes before any checkpoint was due
    rec.on_delta(Delta("r1", text=" there", token_ids=(1,), finish_reason=reason, error=error,
                       stats=stats(generated_tokens=3)))
    assert rec.finished
    assert repo.checkpoints == []  # the final write is the finish, not a checkpoint
    msg = stored(repo, reply)
    assert msg.content == "Hi there"
    assert msg.status is status
    assert msg.error_text == error
    assert (msg.prompt_tokens, msg.completion_tokens, msg.ttft_s, msg.tokens_per_s) == (11, 3, 0.2, 55.5)
    assert msg.model == "tiny.gguf"
    # a finished reply is not touched by crash recovery
    assert repo.recover_interrupted() == 0
    assert stored(repo, reply).status is status


def test_final_delta_without_stats_counts_tokens(repo, clock, reply):
    rec = ReplyRecorder(repo, reply.id, clock=clock)
    rec.on_delta(piece("a", 2))
    rec.on_delta(piece("b", 3))
    rec.on_delta(Delta("r1", token_ids=(9,), finish_reason=FinishReason.STOP))
    msg = stored(repo, reply)
    assert (msg.content, msg.status, msg.completion_tokens) == ("ab", MessageStatus.COMPLETE, 6)
    assert msg.prompt_tokens is None and msg.ttft_s is None and msg.tokens_per_s is None


def test_finish_after_checkpoints_replaces_partial_text(repo, clock, reply):
    rec = ReplyRecorder(repo, reply.id, every_s=1.0, clock=clock)
    clock.now = 101.0
    rec.on_delta(piece("par"))
    assert stored(repo, reply).content == "par"
    clock.now = 101.2
    rec.on_delta(piece("tial"))
    rec.on_delta(Delta("r1", text=" end", finish_reason=FinishReason.STOP, stats=stats()))
    msg = stored(repo, reply)
    assert msg.content == "partial end"
    assert msg.status is MessageStatus.COMPLETE
    assert len(repo.checkpoints) == 1


def test_interrupt_keeps_text(repo, clock, reply):
    rec = ReplyRecorder(repo, reply.id, clock=clock)
    rec.on_delta(piece("cut sh"))
    rec.interrupt()
    assert rec.finished
    msg = stored(repo, reply)
    assert (msg.content, msg.status) == ("cut sh", MessageStatus.INTERRUPTED)


def test_checkpointed_text_survives_a_crash(repo, clock, reply):
    """What was checkpointed is what recovery finds after the writer died."""
    rec = ReplyRecorder(repo, reply.id, every_s=1.0, clock=clock)
    clock.now = 101.0
    rec.on_delta(piece("saved "))
    clock.now = 101.5
    rec.on_delta(piece("lost"))  # less than a second later: not yet written
    # the process dies here; on the next start-up (same pid counts as stale):
    assert repo.recover_interrupted() == 1
    msg = stored(repo, reply)
    assert (msg.content, msg.status) == ("saved ", MessageStatus.INTERRUPTED)


LONG_PIECE = "owl " * (256 * 1024)  # 1 MB: more than a full disk's room left


@pytest.fixture
def reply_on_a_small_disk(tmp_path):
    """(repo, reply, ballast): a reply row on a real 4 MB tmpfs that `ballast` fills but for
    64 kB; unlink ballast to give the room back."""
    from tests.support.filesystems import fill, small_filesystem

    with small_filesystem(tmp_path / "disk", "4m") as disk:
        db = open_database(disk / "chorus.db")
        try:
            repo = ChatRepository(db)
            conv = repo.create_conversation("t")
            user = repo.add_message(conv.id, "user", "hi")
            reply = repo.start_reply(conv.id, parent_id=user.id)
            yield repo, reply, fill(disk, leave=64 << 10)
        finally:
            db.close()


def test_a_checkpoint_on_a_full_disk_is_skipped_and_the_text_kept_for_the_end(reply_on_a_small_disk, clock):
    """Issue 25: a checkpoint on a full disk raised out of on_delta (chorus chat crashed
    mid-reply). Skipped: the text stays in memory, and once there is room the end saves all."""
    repo, reply, ballast = reply_on_a_small_disk
    rec = ReplyRecorder(repo, reply.id, every_s=1.0, clock=clock)
    clock.now += 2
    rec.on_delta(Delta("r", text=LONG_PIECE, token_ids=(1,)))  # its checkpoint fails: skipped
    assert rec.text == LONG_PIECE and repo.get_message(reply.id).content == ""
    ballast.unlink()
    rec.on_delta(Delta("r", text="end", token_ids=(2,), finish_reason=FinishReason.STOP))
    saved = repo.get_message(reply.id)
    assert saved.content == LONG_PIECE + "end" and saved.status is MessageStatus.COMPLETE


def test_the_end_of_a_reply_on_a_full_disk_stays_in_memory_until_saved_again(reply_on_a_small_disk, clock):
    """Issue 25: the end's write on a full disk raised and the reply's tail was lost. It is
    kept (end_unsaved), and save_end_again stores it all once there is room."""
    from storage import DiskFull

    repo, reply, ballast = reply_on_a_small_disk
    rec = ReplyRecorder(repo, reply.id, every_s=60.0, clock=clock, finish_retry_s=0)
    with pytest.raises(DiskFull):
        rec.on_delta(Delta("r", text=LONG_PIECE, token_ids=(1,), finish_reason=FinishReason.STOP))
    assert rec.finished and rec.end_unsaved and rec.text == LONG_PIECE
    with pytest.raises(DiskFull):
        rec.save_end_again()  # still full: still kept
    assert rec.end_unsaved
    ballast.unlink()
    assert rec.save_end_again() and not rec.end_unsaved
    saved = repo.get_message(reply.id)
    assert saved.content == LONG_PIECE and saved.status is MessageStatus.COMPLETE


def test_the_end_stores_which_excerpts_the_reply_cites(repo, clock, reply):
    """The excerpts are stored with the prompt, none cited; the reply's end stores them as its
    text left them (the window showed every citation plain before, even one named [2])."""
    from dataclasses import replace

    from storage import DocumentRepository, SourceRecord

    shown = (SourceRecord(1, "a" * 64, "manual.md", 0, None, False, where="Setup"),
             SourceRecord(2, "a" * 64, "manual.md", 3, None, False, where="Warranty"))
    DocumentRepository(repo.db).set_sources(reply.id, shown)
    rec = ReplyRecorder(repo, reply.id, clock=clock,
                        cite=lambda text: tuple(replace(s, cited=f"[{s.label}]" in text) for s in shown))
    rec.on_delta(piece("Two years [2]."))
    assert [s.cited for s in stored(repo, reply).sources] == [False, False]  # not before the end
    rec.on_delta(Delta("r1", finish_reason=FinishReason.STOP, stats=stats()))
    assert [(s.cited, s.where) for s in stored(repo, reply).sources] == [(False, "Setup"), (True, "Warranty")]
