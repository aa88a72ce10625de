"""Runs a job's pending items through an engine client on spare capacity: at most `window`
items in flight at the engine's lowest priority (so a chat preempts them), by default as
many as the engine has sequences but one (default_window: more where the job has the
engine to itself), each result
written once as it finishes (storage.JobsRepository.finish). Stopped at any moment (pause,
cancel, a kill), a new runner goes on with what is still pending and redoes nothing.

What an item asks and what its answer is comes from a Work (work.py): a prompt template's
by default; an OpenAI batch brings its own (one item may be several requests: n choices)."""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

from app.jobs.results import CUT
from app.jobs.spec import JobSpec
from app.jobs.tool_run import ItemEngine, ToolRun
from app.jobs.tools import started
from app.jobs.work import ItemRun, TemplateWork, Work
from inference import Delta, EngineClient, EngineError, RequestError, job_owner
from storage import ItemRecord, ItemResult, JobsRepository

log = logging.getLogger(__name__)

RUNNING, PAUSED, CANCELLED, COMPLETED = "running", "paused", "cancelled", "completed"


DEFAULT_WINDOW = 4  # an engine whose width this process cannot see (a server's)
LOOP_STOP_WAIT_S = 3.0  # a pause or cancel waits this long at most for an item's tool loop


def default_window(client: EngineClient, own_engine: bool = False) -> int:
    """Items in flight. On an engine the job has to itself (`chorus batch run`'s): twice its
    sequences, so that items wait in the engine to take a sequence the step one frees. On an
    engine shared with chats (the desktop's): its sequences but one. Fewer leave rows of each
    step empty (issue 37: 4 on a 16-sequence engine); all of them would take the last idle
    sequence, where the chat the user types in keeps its KV between turns, and make its next
    turn compute its whole conversation again."""
    info = client.info
    if info is None or info.n_seq_max <= 0:
        return DEFAULT_WINDOW
    return 2 * info.n_seq_max if own_engine else max(1, info.n_seq_max - 1)


class JobSlots:
    """The items in flight that jobs sharing one engine may have together: the desktop's
    jobs and its server's batches take from one budget (the engine's sequences but one, as
    default_window says for one job), so that two of them at once still leave the sequence
    where the chat the user types in keeps its KV. size is asked at each take: the engine's
    width is known once its model has loaded, and changes with the model."""

    def __init__(self, size: Callable[[], int]) -> None:
        self.size = size
        self._lock = threading.Lock()
        self.taken = 0

    def take(self) -> bool:
        with self._lock:
            if self.taken >= max(1, self.size()):
                return False
            self.taken += 1
            return True

    def give(self) -> None:
        with self._lock:
            self.taken = max(0, self.taken - 1)


@dataclass(eq=False)
class _Running:
    item: ItemRecord
    run: ItemRun
    started: float
    open: set[str] = field(default_factory=set)  # its requests still generating
    cut: bool = False  # one of them was cancelled, interrupted, or failed
    ended: float = 0.0  # when its last request ended


class JobRunner:
    def __init__(self, jobs: JobsRepository, client: EngineClient, job_id: str, window: int | None = None,
                 work: Work | None = None, slots: JobSlots | None = None) -> None:
        """window: items in flight (default: default_window); slots: a budget shared with
        other runners on the same engine instead (the window is then theirs)."""
        job = jobs.get(job_id)
        if job is None:
            raise KeyError(f"no job {job_id}")
        if work is None and job.kind != "template":
            raise ValueError(f"job {job_id} is an {job.kind} job: the server that took it runs it")
        self.jobs, self.client, self.job_id = jobs, client, job_id
        self.window = max(1, window if window is not None else default_window(client))
        self.slots = slots if slots is not None else JobSlots(lambda: self.window)
        self.work: Work = work or TemplateWork(JobSpec.from_json(job.spec))
        self._lock = threading.Condition()
        self._requests: dict[str, tuple[_Running, int]] = {}  # request id -> its item, its index
        self._items: set[_Running] = set()  # in flight: submitted, result not yet written
        self._loops: set[ItemEngine] = set()  # the items with tools in flight, each on a thread of its own
        # Items whose requests have all ended, each with whether it was stopped on purpose:
        # their results are written on the runner's thread (_write_ended), not on the one
        # that delivers deltas (the engine's own, in process; the one reading the engine
        # process's pipe in the desktop), which a SQLite commit would hold up: the next
        # step, and the focused chat's tokens behind it.
        self._ended: list[tuple[_Running, bool]] = []
        self._stop: str | None = None  # PAUSED or CANCELLED once asked

    def run(self, on_progress=None) -> str:
        """Runs until every item has a result or the job is paused or cancelled; the job's
        status. JobToolsError (nothing run) when the job's tools do not start."""
        with self._tools_started():
            return self._run(on_progress)

    @contextmanager
    def _tools_started(self) -> Iterator[None]:
        """A template job with tools: its MCP servers running for the length of the run."""
        work = self.work
        if not isinstance(work, TemplateWork) or work.tools is None or work.toolbox is not None:
            yield
            return
        with started(work.tools) as toolbox:
            work.toolbox = toolbox
            try:
                yield
            finally:
                work.toolbox = None

    def _run(self, on_progress) -> str:
        self.jobs.set_status(self.job_id, RUNNING)
        queue = self.jobs.pending(self.job_id)
        while True:
            self._write_ended()
            with self._lock:
                if self._stop is not None or not (queue or self._items or self._loops):
                    break
                if queue and self.slots.take():
                    item = queue.pop(0)
                else:  # a slot another runner gives back is seen within the wait
                    if not self._ended:
                        self._lock.wait(0.5)
                    item = None
            if item is not None:
                went = False
                try:
                    went = self._submit(item)  # off the lock: preparing may block; deltas take the lock
                finally:
                    if not went:  # it never went in flight (or raised): its slot is not held
                        self.slots.give()
            elif on_progress is not None:
                on_progress(self.jobs.counts(self.job_id))
        with self._lock:
            open_requests, loops = list(self._requests), list(self._loops)
        for request_id in open_requests:
            self.client.cancel(request_id)
        for loop in loops:
            loop.stop()
        # Their cancelled deltas leave them pending. A loop waiting on a tool call is not
        # waited for past LOOP_STOP_WAIT_S: once stopped it starts no turn and writes nothing
        # (its call ends when the job's servers stop, as the run ends).
        deadline = time.monotonic() + LOOP_STOP_WAIT_S
        while True:
            self._write_ended()
            with self._lock:
                if not (self._items or (self._loops and time.monotonic() < deadline)):
                    break
                if not self._ended:
                    self._lock.wait(0.5)
        status = self._stop or COMPLETED
        self.jobs.set_status(self.job_id, status)
        return status

    def pause(self) -> None:
        self._ask(PAUSED)

    def cancel(self) -> None:
        self._ask(CANCELLED)

    def _ask(self, stop: str) -> None:
        with self._lock:
            self._stop = stop
            self._lock.notify_all()

    def _submit(self, item: ItemRecord) -> bool:
        """Whether the item went in flight (its slot is given back when it leaves)."""
        request_id = f"job-{self.job_id}-{item.seq}-{uuid.uuid4().hex[:8]}"
        try:
            run = self.work.start(item, request_id)
        except EngineError as exc:
            self._engine_down(item, exc)
            return False
        if isinstance(run, ItemResult):
            self.jobs.finish(item.id, run)
            return False
        if isinstance(run, ToolRun):
            self._start_loop(item, run, request_id)
            return True
        try:  # rendered and tokenized here, not on the engine's thread between its steps
            chats = [chat if chat.prompt_tokens is not None else self.client.prepare(chat) for chat in run.requests]
        except RequestError as bad:  # the engine would refuse it (a prompt longer than the context)
            self.jobs.finish(item.id, ItemResult(answer=None, finish_reason=None, error=str(bad)))
            return False
        except EngineError as exc:
            self._engine_down(item, exc)
            return False
        running = _Running(item, run, time.monotonic())
        owner = job_owner(self.job_id)  # the job's lane in the engine's metrics
        chats = [replace(chat, owner=owner) for chat in chats]
        with self._lock:
            for index, chat in enumerate(chats):
                assert chat.request_id, "each request of a job's item has its own id"
                self._requests[chat.request_id] = (running, index)
                running.open.add(chat.request_id)
            self._items.add(running)
        try:
            for chat in chats:
                self.client.stream(chat, self._on_delta)
        except EngineError as exc:
            for chat in chats:
                self.client.cancel(chat.request_id or "")
            with self._lock:
                for chat in chats:
                    self._requests.pop(chat.request_id or "", None)
                self._items.discard(running)
            self._engine_down(item, exc)
            return False
        return True

    def _start_loop(self, item: ItemRecord, run: ToolRun, request_id: str) -> None:
        """An item with tools: its loop blocks (turns, calls), so it runs on a thread of its own."""
        engine = ItemEngine(self.client, job_owner(self.job_id), request_id)
        with self._lock:
            self._loops.add(engine)
        threading.Thread(target=self._loop_body, args=(item, run, engine), daemon=True,
                         name=f"chorus-job-{self.job_id}-{item.seq}").start()

    def _loop_body(self, item: ItemRecord, run: ToolRun, engine: ItemEngine) -> None:
        began = time.monotonic()
        result: ItemResult | None = None
        try:
            result = run.run(engine, lambda: time.monotonic() - began)
        except RequestError as bad:  # a turn the engine would refuse (longer than the context)
            result = ItemResult(answer=None, finish_reason=None, error=str(bad))
        except EngineError as exc:
            if not engine.stopped:
                self._engine_down(item, exc)
        except Exception as exc:  # a fault of the loop's fails its item, not the job
            log.exception("job %s: item %d's tool loop failed", self.job_id, item.seq)
            result = ItemResult(answer=None, finish_reason=None, error=f"the tool loop failed: {exc}")
        with self._lock:
            stopped = self._stop is not None and (result is None or engine.cut)
        if result is not None and not stopped:  # else it stays pending for the next runner
            self.jobs.finish(item.id, result)
        with self._lock:
            self._loops.discard(engine)
            self._lock.notify_all()
        self.slots.give()

    def _engine_down(self, item: ItemRecord, exc: EngineError) -> None:
        """The engine is down: the item stays pending, the job pauses (a later runner goes on)."""
        log.warning("job %s paused: the engine refused item %d: %s", self.job_id, item.seq, exc)
        with self._lock:
            self._stop = self._stop or PAUSED
            self._lock.notify_all()

    def _on_delta(self, delta: Delta) -> None:
        with self._lock:
            entry = self._requests.get(delta.request_id)
            if entry is None:
                return
            running, index = entry
            running.run.add(index, delta)
            if not delta.finished:
                return
            del self._requests[delta.request_id]
            running.open.discard(delta.request_id)
            running.cut |= delta.finish_reason in CUT
            if running.open:
                return
            # Stopping, an item cut short stays pending for the next runner: a failure too
            # (the engine that restarts for another model fails what it still holds).
            running.ended = time.monotonic()
            self._ended.append((running, running.cut and self._stop is not None))
            self._lock.notify_all()

    def _write_ended(self) -> None:
        """The results of the items that ended, written; each leaves the window after its
        write, so run() never ends ahead of a result."""
        with self._lock:
            ended, self._ended = self._ended, []
        for running, stopped in ended:
            if not stopped:  # else stopped on purpose: the item stays pending for the next runner
                self.jobs.finish(running.item.id, running.run.result(running.ended - running.started))
            with self._lock:
                self._items.discard(running)
            self.slots.give()
