"""The server's stored Responses (storage/responses.py): saved, read back as saved, deleted."""

from __future__ import annotations

from storage import ResponseRecord, ResponsesRepository, open_database


def record(rid: str, previous: str | None = None) -> ResponseRecord:
    return ResponseRecord(id=rid, model="m", input=[{"role": "user", "content": "hi \u00e9"}], output_text="Hello!",
                          status="incomplete", usage={"input_tokens": 3, "output_tokens": 2},
                          previous_response_id=previous)


def test_a_response_reads_back_as_saved_and_is_deleted_once(tmp_path):
    db = open_database(tmp_path / "chorus.db")
    try:
        repo = ResponsesRepository(db)
        repo.save(record("resp_a"))
        repo.save(record("resp_b", previous="resp_a"))
        got = repo.get("resp_b")
        assert got is not None and got.created_at is not None
        assert (got.input, got.output_text, got.status, got.usage, got.previous_response_id) == (
            [{"role": "user", "content": "hi \u00e9"}], "Hello!", "incomplete",
            {"input_tokens": 3, "output_tokens": 2}, "resp_a")
        assert repo.delete("resp_a") is True
        assert repo.delete("resp_a") is False
        assert repo.get("resp_a") is None
        assert repo.get("resp_b") is not None  # what continued it stays readable
    finally:
        db.close()


def test_a_response_keeps_the_moment_it_was_answered_with(tmp_path):
    """Once the save's own time: a reply that took 3 s under load read back 3 s late."""
    from dataclasses import replace
    from datetime import datetime, timezone

    db = open_database(tmp_path / "chorus.db")
    try:
        repo = ResponsesRepository(db)
        answered = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
        repo.save(replace(record("resp_t"), created_at=answered))
        got = repo.get("resp_t")
        assert got is not None and got.created_at is not None
        assert got.created_at.replace(tzinfo=got.created_at.tzinfo or timezone.utc) == answered
    finally:
        db.close()
