"""How many items a job keeps in the engine, and where they are rendered (issue 37), on a
scripted engine client: the runner fills the engine's width (its sequences but one beside
chats, twice them on an engine of its own), and each item's prompt is tokenized on the
runner's thread (EngineClient.prepare), never on the engine's between its steps."""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from app.jobs import COMPLETED, JobRunner, JobSlots, JobSpec, default_window, new_job
from inference import ChatRequest, Delta, FinishReason, RequestError
from storage import ItemInput, JobsRepository, open_database


class ScriptedClient:
    """An engine client of n_seq_max sequences (None: one that does not say) that answers an
    item when told, and tokenizes a prompt as one token per character."""

    def __init__(self, n_seq_max: int | None) -> None:
        self.info = None if n_seq_max is None else SimpleNamespace(n_seq_max=n_seq_max)
        self.sinks: dict[str, object] = {}
        self.chats: list[ChatRequest] = []
        self.most_open = 0

    def prepare(self, chat: ChatRequest) -> ChatRequest:
        text = chat.messages[-1]["content"]
        if "too long" in text:
            raise RequestError("the prompt is longer than the context")
        return replace(chat, prompt_tokens=tuple(ord(c) for c in text))

    def stream(self, chat: ChatRequest, sink) -> str:
        self.chats.append(chat)
        self.sinks[chat.request_id] = sink
        self.most_open = max(self.most_open, len(self.sinks))
        return chat.request_id

    def answer_all(self) -> None:
        for request_id, sink in list(self.sinks.items()):
            del self.sinks[request_id]
            sink(Delta.finished_with(request_id, FinishReason.STOP, text="ok"))

    def cancel(self, request_id: str) -> None:
        sink = self.sinks.pop(request_id, None)
        if sink is not None:
            sink(Delta.finished_with(request_id, FinishReason.CANCELLED))


@pytest.fixture
def jobs(tmp_path: Path):
    db = open_database(tmp_path / "chorus.db")
    yield JobsRepository(db)
    db.close()


@pytest.mark.parametrize("n_seq_max, shared, own", [(16, 15, 32), (8, 7, 16), (1, 1, 2), (None, 4, 4)])
def test_the_window_follows_the_engine_width(n_seq_max, shared, own):
    client = ScriptedClient(n_seq_max)
    assert (default_window(client), default_window(client, own_engine=True)) == (shared, own)


def run_answering(jobs: JobsRepository, client: ScriptedClient, job_id: str, window: int | None = None) -> str:
    runner = JobRunner(jobs, client, job_id, window=window)
    return runner.run(on_progress=lambda _counts: client.answer_all())


def test_a_job_keeps_the_engine_width_but_one_in_flight_by_default(jobs):
    """Before: 4 items at a time whatever the engine (12 of a 16-sequence engine's rows idle)."""
    client = ScriptedClient(n_seq_max=16)
    job = new_job(jobs, [ItemInput(fields={"n": str(i)}) for i in range(40)], JobSpec(template="Say $n."))
    assert run_answering(jobs, client, job.id) == COMPLETED
    assert client.most_open == 15
    assert jobs.counts(job.id) == {"pending": 0, "done": 40, "failed": 0}


def test_each_prompt_is_tokenized_on_the_runners_thread_and_a_refused_one_fails_alone(jobs):
    client = ScriptedClient(n_seq_max=4)
    rows = [ItemInput(fields={"q": q}) for q in ("hi", "too long", "bye")]
    job = new_job(jobs, rows, JobSpec(template="$q"))
    assert run_answering(jobs, client, job.id) == COMPLETED
    assert [c.prompt_tokens for c in client.chats] == [tuple(map(ord, "hi")), tuple(map(ord, "bye"))]
    items = jobs.items(job.id)
    assert [i.state for i in items] == ["done", "failed", "done"]
    assert items[1].error == "the prompt is longer than the context"


def test_items_the_engine_fails_while_the_job_pauses_stay_pending(jobs):
    """A model switch pauses the window's jobs, then restarts the engine, which fails what it
    still holds: those items go on with the next runner, never stored as failed."""
    client = ScriptedClient(n_seq_max=4)
    job = new_job(jobs, [ItemInput(fields={"n": str(i)}) for i in range(6)], JobSpec(template="Say $n."))
    runner = JobRunner(jobs, client, job.id)
    ended: list[str] = []
    thread = threading.Thread(target=lambda: ended.append(runner.run()))
    thread.start()
    deadline = time.monotonic() + 10
    while len(client.sinks) < 3 and time.monotonic() < deadline:  # the first three under way
        thread.join(0.01)
    first = next(iter(client.sinks))
    client.sinks.pop(first)(Delta.finished_with(first, FinishReason.STOP, text="ok"))
    runner.pause()
    for request_id, sink in list(client.sinks.items()):  # the engine restarting: each an error
        del client.sinks[request_id]
        sink(Delta.finished_with(request_id, FinishReason.ERROR, error="the engine was stopped"))
    thread.join(10)
    assert ended == ["paused"]
    assert jobs.counts(job.id) == {"pending": 5, "done": 1, "failed": 0}


def test_jobs_sharing_slots_keep_the_engine_width_but_one_together(jobs):
    """The desktop's jobs and its server's batches on one engine: before, each took the
    width but one, and two at once took the sequence the chat keeps its KV in."""
    client = ScriptedClient(n_seq_max=4)
    slots = JobSlots(lambda: default_window(client))
    made = [new_job(jobs, [ItemInput(fields={"n": str(i)}) for i in range(12)], JobSpec(template="Say $n."))
            for _ in range(2)]
    runners = [JobRunner(jobs, client, job.id, slots=slots) for job in made]
    ended: list[str] = []
    threads = [threading.Thread(target=lambda r=r: ended.append(r.run())) for r in runners]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 30
    while len(ended) < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
        client.answer_all()
    for thread in threads:
        thread.join(10)
    assert ended == [COMPLETED, COMPLETED]
    assert client.most_open == 3 and slots.taken == 0
    assert [jobs.counts(job.id)["done"] for job in made] == [12, 12]
