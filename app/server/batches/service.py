"""One server's Files and Batch API behind its routes: the files folder, the batches (jobs of
kind "openai" in the chat database) and the thread that runs them.

A batch goes validating -> in_progress -> finalizing -> completed (or failed at validation,
or cancelling -> cancelled, or, when its completion_window ends first, finalizing ->
expired: what finished is kept, the rest listed as batch_expired). Validation runs in a
thread of its own as soon as the batch is created; one worker thread then runs the batches
in_progress, oldest first, one at a time, through app/jobs' runner at the engine's spare
priority (a chat or an API call always goes first), and writes each one's output and error
files. Every step is stored as it happens,
so a server stopped (or killed) at any point takes each batch up where it was when it starts
again: validation again, the requests still pending, the files written again (same ids).

One batch runs on one model, as on OpenAI: the model its lines name (a line naming none: the
server's default), checked at validation and shown as the batch's `model`. On one engine a
batch waits while the server serves another model than its own: its answers come from one
model. On a server of several models (`chorus serve --models`, models.py's PoolEngines) each
batch runs on its own model's engine from the model pool, taken up again after a restart on
that model too.

How long a batch holds its model there (the pool never evicts a model held by a lease): for
the whole run, but it lets go as soon as a call for another model waits for room (the pool's
waiting_for_room: every model loaded is busy and the budget fits no other). Holding it all
along keeps the model loaded between the batch's requests (a lease released between windows
would let the pool's keep-alive and LRU choices turn on a batch that is about to ask again,
and would reload the model for nothing when no one else wants the room); letting go when
someone waits means a batch never keeps a model loaded against the user's calls. Letting go
pauses the runner (its requests in flight go back to pending, redone later: at most one
window of work lost), releases the lease so that the pool unloads the batch's model and loads
the one the call wants, and the batch asks for its model again once no load waits for room
(its load then waits for the call's model to go idle: calls first, the batch between them).

A model whose load fails fails its batch (the load's error does not mend by waiting: a
broken file, a model too large for the budget): it goes finalizing, what had finished is kept
in the output file, the requests that never ran are in the error file as model_load_failed
with the load's error, and the batch ends failed with that error in its `errors`.

Blocking calls throughout: the routes call them in worker threads. Batch rows change only
under the service's lock (one writer)."""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from app.jobs import CANCELLED as RUNNER_CANCELLED
from app.jobs import COMPLETED as RUNNER_COMPLETED
from app.jobs import JobRunner, JobSlots, Work
from app.server.batches import objects as ob
from app.server.batches.embedding_work import EmbeddingWork
from app.server.batches.files import FileStore
from app.server.batches.lines import batch_error, check_lines
from app.server.batches.models import BatchModels, ModelAway, ModelUnavailable, OneEngine
from app.server.batches.output import jsonl, load_failed, split_lines
from app.server.batches.work import EMBEDDINGS, BatchWork
from app.server.config import ServerConfig
from inference import EngineClient
from storage import Database, JobRecord, JobsRepository, ResponsesRepository, StorageError, open_database

log = logging.getLogger(__name__)

DEFAULT_WINDOW = 4  # requests in flight when the engine does not say its width
RETRY_S = 5.0  # a batch paused by an engine that refused waits this long before going on
JOIN_S = 10.0
WATCH_S = 1.0  # how often a running batch's window is looked at


class BatchError(Exception):
    """A call the service refuses: an HTTP status and the message (routes make it an ApiError)."""

    def __init__(self, status: int, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.param = status, message, param


class BatchService:
    def __init__(self, engine: EngineClient | None, config: ServerConfig, model_id: Callable[[], str],
                 models: BatchModels | None = None, slots: JobSlots | None = None) -> None:
        """engine and model_id: one engine's server; models: a server of several (then
        engine is None and model_id the default's name); slots: the items in flight shared
        with other jobs on the engine (else a batch has the engine's width)."""
        self.slots = slots
        self.engine = engine
        self.models = models if models is not None else OneEngine(engine, model_id)
        self.files_dir: Path | None = config.files_dir
        self.db_path: Path | None = config.responses_db
        self.on_response_stored = config.on_response_stored
        self.cap = config.max_tokens_cap
        self.image_hosts = config.image_hosts
        self.max_file_bytes = config.max_file_bytes
        self.model_id = model_id
        self.files: FileStore | None = None
        self.jobs: JobsRepository | None = None
        self.unavailable = "this server keeps no files: Files and Batches need `chorus serve` (its data folder)"
        self._db: Database | None = None
        self._lock = threading.Condition()
        self._runner: tuple[str, JobRunner] | None = None  # the batch running now
        self._closing = False
        self._model_changing = False  # the one engine loads another model: no batch runs
        self._threads: list[threading.Thread] = []
        self.clock: Callable[[], float] = time.time  # the windows' clock (a test moves it on)

    @property
    def enabled(self) -> bool:
        return self.files_dir is not None and self.db_path is not None

    # ----- life -------------------------------------------------------------------------------

    def start(self) -> None:
        """Opens the files and the database, takes up what a previous run left (validation,
        requests pending, files to write). A failure is logged: the routes then say it."""
        if self.files_dir is None or self.db_path is None:
            return
        try:
            self.files = FileStore(self.files_dir)
            self._db = open_database(self.db_path)
        except (OSError, StorageError) as exc:
            self.unavailable = f"the server's files or batches cannot be used: {exc}"
            log.error("%s", self.unavailable)
            return
        self.jobs = JobsRepository(self._db)
        for job in self._batches():
            if job.spec["status"] == ob.VALIDATING:
                self._thread(self._validate, job.id)
        self._thread(self._work)

    def close(self) -> None:
        """Stops the running batch (its requests in flight cancelled, left pending for the
        next start) and the threads; any thread but the server's loop."""
        with self._lock:
            self._closing = True
            running = self._runner
            self._lock.notify_all()
        if running is not None:
            running[1].pause()
        for thread in self._threads:
            thread.join(JOIN_S)
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None

    def _thread(self, target: Callable, *args: object) -> None:
        thread = threading.Thread(target=target, args=args, name="chorus-batches", daemon=True)
        self._threads = [t for t in self._threads if t.is_alive()] + [thread]
        thread.start()

    # ----- calls of the routes --------------------------------------------------------------------

    def repository(self) -> tuple[FileStore, JobsRepository]:
        if self.files is None or self.jobs is None:
            raise BatchError(503 if self.enabled else 404, self.unavailable)
        return self.files, self.jobs

    def create(self, input_file_id: str, endpoint: str, completion_window: str, metadata: dict | None) -> dict:
        files, jobs = self.repository()
        stored = files.get(input_file_id)
        if stored is None:
            raise BatchError(404, f"no file {input_file_id!r} (upload it with purpose 'batch' first)", "input_file_id")
        if stored.purpose != "batch":
            raise BatchError(400, f"file {input_file_id!r} has purpose {stored.purpose!r}, not 'batch'",
                             "input_file_id")
        job = JobRecord(id=ob.ID_PREFIX + uuid.uuid4().hex[:24], kind=ob.KIND, status="queued",
                        spec=ob.new_spec(endpoint, input_file_id, completion_window, metadata, self.models.default()),
                        source=stored.filename)
        with self._lock:
            if self._closing:
                raise BatchError(503, "the server is stopping")
            jobs.create(job, [])
            self._thread(self._validate, job.id)
        return self.get(job.id)

    def get(self, batch_id: str) -> dict:
        _files, jobs = self.repository()
        job = jobs.get(batch_id)
        if job is None or job.kind != ob.KIND:
            raise BatchError(404, f"no batch {batch_id!r}")
        return ob.batch_object(job.id, job.spec, jobs.counts(job.id))

    def all(self) -> list[dict]:
        """Newest first, as OpenAI lists them."""
        _files, jobs = self.repository()
        return [ob.batch_object(j.id, j.spec, jobs.counts(j.id)) for j in reversed(self._batches())]

    def cancel(self, batch_id: str) -> dict:
        _files, jobs = self.repository()
        with self._lock:
            job = jobs.get(batch_id)
            if job is None or job.kind != ob.KIND:
                raise BatchError(404, f"no batch {batch_id!r}")
            status = job.spec["status"]
            if status in ob.TERMINAL:
                raise BatchError(409, f"batch {batch_id} is {status}: only a batch not yet ended can be cancelled")
            if status == ob.VALIDATING:  # nothing ran: cancelled at once
                spec = ob.moved(ob.moved(job.spec, ob.CANCELLING), ob.CANCELLED)
                jobs.update(batch_id, status=RUNNER_CANCELLED, spec=spec)
            elif status == ob.IN_PROGRESS:
                jobs.update(batch_id, spec=ob.moved(job.spec, ob.CANCELLING))
                if self._runner is not None and self._runner[0] == batch_id:
                    self._runner[1].cancel()
            self._lock.notify_all()
        return self.get(batch_id)

    def model_changing(self) -> None:
        """The engine is about to load another model (the app's switch, told on the GUI
        thread before the engine restarts): the running batch pauses at once (its requests in
        flight go back to pending, redone later) and none starts until model_settled. A
        batch's answers then all come from its own model: a request sent between the switch
        and the server's rename would have been answered by the new one.

        Without the service's lock (the GUI thread must not wait on the batch threads'
        database work): the flag is set before the runner is read, and _run_on sets the
        runner before it reads the flag, so one of the two sees the other."""
        self._model_changing = True
        running = self._runner
        if running is not None:
            running[1].pause()

    def model_settled(self) -> None:
        """The switch ended (loaded, or the old model back after a failed load) and the
        server's model name says which: batches of that model run again."""
        with self._lock:
            self._model_changing = False
            self._lock.notify_all()

    # ----- the threads ----------------------------------------------------------------------------

    def _batches(self) -> list[JobRecord]:
        assert self.jobs is not None
        return [job for job in self.jobs.all() if job.kind == ob.KIND]

    def _validate(self, batch_id: str) -> None:
        files, jobs = self.repository()
        job = jobs.get(batch_id)
        assert job is not None
        path = files.content(job.spec["input_file_id"])
        try:
            data = path.read_bytes() if path is not None else None
        except OSError as exc:
            log.warning("batch %s: its input cannot be read: %s", batch_id, exc)
            data = None
        if data is None:
            checked = None
        else:
            checked = check_lines(data, job.spec["endpoint"], self.models.lines(job.spec["model"]))
        with self._lock:
            job = jobs.get(batch_id)
            if self._closing or job is None or job.spec["status"] != ob.VALIDATING:
                return  # stopped (validated again at the next start) or cancelled meanwhile
            if checked is None:
                errors = [{"code": "file_not_found", "line": None, "param": "input_file_id",
                           "message": f"the input file {job.spec['input_file_id']} is gone"}]
                jobs.update(batch_id, status="failed", spec=ob.moved(job.spec, ob.FAILED, errors=_listed(errors)))
            elif checked.errors:
                jobs.update(batch_id, status="failed",
                            spec=ob.moved(job.spec, ob.FAILED, errors=_listed(checked.errors)))
            else:
                jobs.update(batch_id, spec=ob.moved(job.spec, ob.IN_PROGRESS, model=checked.model or job.spec["model"]),
                            items=checked.items)
            self._lock.notify_all()

    def _work(self) -> None:
        while True:
            with self._lock:
                job = None if self._closing else self._next()
                if job is None:
                    if self._closing:
                        return
                    self._lock.wait(RETRY_S)
                    continue
            try:
                if job.spec["status"] == ob.IN_PROGRESS:
                    self._run(job)
                else:  # finalizing or cancelling
                    self._finalize(job.id)
            except Exception as exc:  # noqa: BLE001 - a full disk, say: said, and tried again later
                log.error("batch %s: %s: %s", job.id, type(exc).__name__, exc)
                with self._lock:
                    self._lock.wait(RETRY_S)

    def _next(self) -> JobRecord | None:
        """The oldest batch with work to do: its files to write first, then one to run. A
        batch in progress whose window has ended (one waiting for its model, or one whose
        window ended while no server ran) is moved to finalizing as expiring first."""
        assert self.jobs is not None
        batches = [self._expire_if_due(job) for job in self._batches()]
        for job in batches:
            if job.spec["status"] == ob.IN_PROGRESS and job.status == RUNNER_CANCELLED:
                # cancelled by `chorus batch cancel` while no server ran it
                self.jobs.update(job.id, spec=ob.moved(job.spec, ob.CANCELLING))
                return self.jobs.get(job.id)
            if job.spec["status"] in (ob.FINALIZING, ob.CANCELLING):
                return job
        if self._model_changing:
            return None
        return next((job for job in batches
                     if job.spec["status"] == ob.IN_PROGRESS and self.models.runnable(job.spec["model"])), None)

    def _run(self, job: JobRecord) -> None:
        assert self.jobs is not None
        name = job.spec["model"]
        try:
            hold = self.models.hold(name)  # may wait for the model to load
        except ModelUnavailable as exc:
            log.error("batch %s fails: %s", job.id, exc)
            self._fail(job.id, str(exc))
            return
        except ModelAway as exc:
            log.info("batch %s waits: %s", job.id, exc)
            with self._lock:
                self._lock.wait(RETRY_S)
            return
        try:
            ended, yielded = self._run_on(job, hold.engine, self.models.resolve(name) or name)
        finally:
            hold.release()
        if yielded:
            with self._lock:  # its model again once the call that wanted the room has it
                while not self._closing and self.models.wanted_elsewhere(name):
                    self._lock.wait(WATCH_S)
            return
        if ended is None:
            return
        with self._lock:
            current = self.jobs.get(job.id)
            assert current is not None
            if current.spec["status"] == ob.IN_PROGRESS and ended == RUNNER_COMPLETED:
                self.jobs.update(job.id, spec=ob.moved(current.spec, ob.FINALIZING))
            elif current.spec["status"] == ob.IN_PROGRESS and not self._closing:
                self._lock.wait(RETRY_S)  # the engine refused: paused, tried again in a while
                return
        if ended == RUNNER_COMPLETED or current.spec["status"] in (ob.CANCELLING, ob.FINALIZING):
            self._finalize(job.id)

    def _run_on(self, job: JobRecord, engine: EngineClient, model: str) -> tuple[str | None, bool]:
        """The batch's runner on its model's engine until it ends, is paused or lets its
        model go; (the runner's end, None if it did not start; whether it let go)."""
        assert self.jobs is not None
        if self.models.wanted_elsewhere(model):
            return None, True  # loaded meanwhile, wanted elsewhere already: let go before starting
        info = engine.info
        window = info.n_seq_max if info is not None and info.n_seq_max > 0 else DEFAULT_WINDOW
        endpoint = job.spec["endpoint"]
        responses = ResponsesRepository(self._db) if self._db is not None else None
        work: Work = (EmbeddingWork(engine, model) if endpoint == EMBEDDINGS
                      else BatchWork(engine, endpoint, model, self.cap, responses, self.on_response_stored,
                                     self.image_hosts))
        runner = JobRunner(self.jobs, engine, job.id, window=window, work=work, slots=self.slots)
        with self._lock:
            current = self.jobs.get(job.id)
            if self._closing or current is None or current.spec["status"] != ob.IN_PROGRESS:
                return None, False  # stopping, or cancelled while its model loaded: finalized next
            self._runner = (job.id, runner)
            if self._model_changing:  # the engine began another model meanwhile
                self._runner = None
                return None, False
        ran, yielded = threading.Event(), threading.Event()
        watch = threading.Thread(target=self._watch, args=(job.id, ob.expires_at(job.spec), model, ran, yielded),
                                 name="chorus-batch-window", daemon=True)
        watch.start()
        try:
            ended = runner.run()
        finally:
            ran.set()
            with self._lock:
                self._runner = None
            watch.join(JOIN_S)
        with self._lock:
            current = self.jobs.get(job.id)
            let_go = yielded.is_set() and current is not None and current.spec["status"] == ob.IN_PROGRESS
        if let_go:
            log.info("batch %s lets %s go: a call for another model waits for its room", job.id, model)
        return ended, let_go

    def _watch(self, batch_id: str, deadline: int, model: str, ran: threading.Event,
               yielded: threading.Event) -> None:
        """While the batch runs: once its window ends, it expires (its runner cancelled: the
        requests in flight are handed back, pending, and listed as batch_expired); once a
        call for another model waits for the room its model takes, it is paused (yielded)."""
        while not ran.wait(min(WATCH_S, max(0.0, deadline - self.clock()))):
            if self.clock() >= deadline:
                with self._lock:
                    job = self.jobs.get(batch_id) if self.jobs is not None else None
                    if job is not None and job.spec["status"] == ob.IN_PROGRESS:
                        self._expire_if_due(job)
                        if self._runner is not None and self._runner[0] == batch_id:
                            self._runner[1].cancel()
                return
            if self.models.wanted_elsewhere(model):
                with self._lock:
                    if self._runner is not None and self._runner[0] == batch_id:
                        yielded.set()
                        self._runner[1].pause()
                return

    def _fail(self, batch_id: str, message: str) -> None:
        """Its model cannot be loaded: finalized as failed (what finished kept)."""
        assert self.jobs is not None
        with self._lock:
            job = self.jobs.get(batch_id)
            if job is None or job.spec["status"] != ob.IN_PROGRESS:
                return
            self.jobs.update(batch_id, spec=ob.moved(job.spec, ob.FINALIZING, load_error=message))
        self._finalize(batch_id)

    def _expire_if_due(self, job: JobRecord) -> JobRecord:
        """An in-progress batch past its window, moved to finalizing as expiring (under the lock)."""
        assert self.jobs is not None
        if job.spec["status"] != ob.IN_PROGRESS or self.clock() < ob.expires_at(job.spec):
            return job
        log.info("batch %s: its completion window ended: it expires", job.id)
        self.jobs.update(job.id, spec=ob.moved(job.spec, ob.FINALIZING, expiring=True))
        return self.jobs.get(job.id) or job

    def _finalize(self, batch_id: str) -> None:
        files, jobs = self.repository()
        job = jobs.get(batch_id)
        assert job is not None
        cancelled = job.spec["status"] == ob.CANCELLING
        expired = bool(job.spec.get("expiring"))
        load_error = job.spec.get("load_error")
        output, errors = split_lines(jobs.items(batch_id), cancelled=cancelled, expired=expired,
                                     unrun=load_failed(load_error) if load_error and not cancelled else None)
        hexid = batch_id.removeprefix(ob.ID_PREFIX)
        # Ids of the batch's own: written again after a crash, the same files replaced.
        output_id = files.write(f"file-{hexid}-output", f"{batch_id}_output.jsonl", "batch_output",
                                jsonl(output)).id if output else None
        error_id = files.write(f"file-{hexid}-errors", f"{batch_id}_error.jsonl", "batch_output",
                               jsonl(errors)).id if errors else None
        with self._lock:
            current = jobs.get(batch_id)
            assert current is not None
            status = (ob.CANCELLED if current.spec["status"] == ob.CANCELLING
                      else ob.EXPIRED if current.spec.get("expiring")
                      else ob.FAILED if current.spec.get("load_error") else ob.COMPLETED)
            fields: dict = {"output_file_id": output_id, "error_file_id": error_id}
            if status == ob.FAILED:
                fields["errors"] = _listed([batch_error("model_load_failed", current.spec["load_error"],
                                                        param="model")])
            jobs.update(batch_id, status="failed" if status == ob.FAILED else None,
                        spec=ob.moved(current.spec, status, **fields))
        log.info("batch %s %s: %d answered, %d in the error file", batch_id, status, len(output), len(errors))


def _listed(errors: list[dict]) -> dict:
    return {"object": "list", "data": errors}
