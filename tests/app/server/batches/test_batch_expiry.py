"""Batch expiry (OpenAI's completion_window) without a model: a batch in progress whose
window ended while no server ran it (or while it waited for its model) is expired by the
next server's batch thread: its finished requests in the output file, the rest in the error
file as batch_expired, expired_at set; the files and the job stored as a real server's."""

from __future__ import annotations

import json
import time

from app.server.batches import objects as ob
from app.server.batches.service import BatchService
from app.server.config import ServerConfig
from storage import ItemInput, ItemResult, JobRecord, JobsRepository, open_database
from tests.support.waiting import wait_until


def answered(text: str) -> str:
    return json.dumps({"status_code": 200, "request_id": "r", "body": {"choices": [{"message": {"content": text}}]}})


def make_batch(folder, model: str, expires_in: int) -> str:
    jobs = JobsRepository(open_database(folder / "chorus.db"))
    spec = ob.moved(ob.new_spec("/v1/chat/completions", "file-in", "24h", None, model), ob.IN_PROGRESS)
    spec["expires_at"] = int(time.time()) + expires_in
    jobs.create(JobRecord(id="batch_x1", kind=ob.KIND, status="queued", spec=spec, source="in.jsonl"),
                [ItemInput(fields={"body": {}}, custom_id=f"c{i}") for i in range(3)])
    first = jobs.pending("batch_x1")[0]
    jobs.finish(first.id, ItemResult(answer=answered("hi"), finish_reason="stop"))
    jobs.db.close()
    return "batch_x1"


def test_new_batches_say_when_their_window_ends():
    spec = ob.new_spec("/v1/chat/completions", "file-in", "24h", None, "m")
    assert spec["expires_at"] == spec["created_at"] + 24 * 3600
    assert ob.batch_object("batch_1", spec, {})["expires_at"] == spec["expires_at"]
    old = {k: v for k, v in spec.items() if k != "expires_at"}  # stored before expiry existed
    assert ob.expires_at(old) == spec["created_at"] + 24 * 3600


def test_a_batch_whose_window_ended_while_no_server_ran_expires_keeping_what_finished(tmp_path):
    batch_id = make_batch(tmp_path, model="another-model", expires_in=-5)  # waits for its model too
    service = BatchService(engine=None, config=ServerConfig(responses_db=tmp_path / "chorus.db",  # type: ignore[arg-type]
                                                            files_dir=tmp_path / "files"),
                           model_id=lambda: "smollm2")
    service.start()
    try:
        done = wait_until(lambda: (b := service.get(batch_id))["status"] == "expired" and b, "expired", 20)
        assert done["expired_at"] and done["request_counts"] == {"total": 3, "completed": 1, "failed": 0}
        output = [json.loads(x) for x in service.files.content(done["output_file_id"]).read_text().splitlines()]
        errors = [json.loads(x) for x in service.files.content(done["error_file_id"]).read_text().splitlines()]
        assert [o["custom_id"] for o in output] == ["c0"] and output[0]["response"]["status_code"] == 200
        assert [(e["custom_id"], e["error"]["code"]) for e in errors] == [("c1", "batch_expired"),
                                                                          ("c2", "batch_expired")]
    finally:
        service.close()


def test_a_batch_within_its_window_waiting_for_its_model_does_not_expire(tmp_path):
    batch_id = make_batch(tmp_path, model="another-model", expires_in=3600)
    service = BatchService(engine=None, config=ServerConfig(responses_db=tmp_path / "chorus.db",  # type: ignore[arg-type]
                                                            files_dir=tmp_path / "files"),
                           model_id=lambda: "smollm2")
    service.start()
    try:
        with service._lock:  # what the batch thread asks, asked here: nothing to do yet
            assert service._next() is None
        assert service.get(batch_id)["status"] == "in_progress"
        service.clock = lambda: time.time() + 3600  # its window ends
        with service._lock:
            service._lock.notify_all()
        wait_until(lambda: service.get(batch_id)["status"] == "expired", "expired", 20)
    finally:
        service.close()
