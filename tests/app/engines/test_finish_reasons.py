"""Every FinishReason has one meaning in each vocabulary of the app (app/engines/finish.py)."""

from __future__ import annotations

import pytest

from app.engines.finish import (
    MEANINGS,
    done_text,
    finish_label,
    from_openai,
    message_status,
    openai_finish_reason,
    ui_status,
)
from inference.outputs import Delta, FinishReason, RequestStats
from storage import MessageStatus

R, S = FinishReason, MessageStatus
EXPECTED = {  # reason: (OpenAI finish_reason, stored status, UI status, label)
    R.STOP: ("stop", S.COMPLETE, "complete", "done"),
    R.LENGTH: ("length", S.COMPLETE, "complete", "cut at the token limit"),
    R.CONTEXT_FULL: ("length", S.COMPLETE, "complete", "cut: the context is full"),
    R.CANCELLED: ("stop", S.STOPPED, "stopped", "stopped"),
    R.INTERRUPTED: ("stop", S.INTERRUPTED, "interrupted", "interrupted"),
    R.ERROR: ("stop", S.ERROR, "error", "error"),
}


def test_the_table_covers_every_finish_reason():
    assert set(MEANINGS) == set(FinishReason) == set(EXPECTED)


@pytest.mark.parametrize("reason", list(FinishReason))
def test_each_reason_maps_to_each_vocabulary(reason):
    got = (openai_finish_reason(reason), message_status(reason), ui_status(reason), finish_label(reason))
    assert got == EXPECTED[reason]
    assert message_status(reason) is not MessageStatus.STREAMING  # a finished reply is never still streaming


def test_remote_finish_reasons_come_back():
    assert from_openai("length") is R.LENGTH and from_openai("stop") is R.STOP
    assert from_openai(None) is R.STOP and from_openai("content_filter") is R.STOP
    for reason in (R.STOP, R.LENGTH):
        assert from_openai(openai_finish_reason(reason)) is reason


def test_done_text_says_how_a_reply_ended():
    stats = RequestStats(5, 0, 12, 0.0, 0.1, 39.6, None, None, 0.5)
    assert done_text(Delta.finished_with("r", R.LENGTH, stats=stats)) == "cut at the token limit · 12 tokens · 40 tok/s"
    assert done_text(Delta.finished_with("r", R.STOP, stats=stats)) == "done · 12 tokens · 40 tok/s"
    assert done_text(Delta.finished_with("r", R.STOP)) == "done"
    slow = RequestStats(5, 0, 3, 0.0, 0.1, 0.44, None, None, 9.0)
    assert done_text(Delta.finished_with("r", R.STOP, stats=slow)) == "done · 3 tokens · 0.4 tok/s"  # not "0 tok/s"
    assert done_text(Delta.finished_with("r", R.CANCELLED, stats=stats)) == "stopped"
    assert done_text(Delta.finished_with("r", R.ERROR, "no room")) == "error: no room"
    assert done_text(Delta.finished_with("r", R.INTERRUPTED, "it died")) == "interrupted: it died"
    with pytest.raises(ValueError):
        done_text(Delta("r", text="still writing"))
