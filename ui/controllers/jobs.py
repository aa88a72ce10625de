"""Chat → Jobs…: the Jobs window (ui/widgets/jobs/) over the chat database's background
jobs, and the jobs this window runs.

A job runs on the window's main engine (the hub's MainEngine: the model the window has
loaded) at the engine's spare priority, so every chat goes first. Each runner (app/jobs'
JobRunner) has a thread of its own; its repository calls go through the storage thread
(SerialJobs) and its progress comes back to the GUI thread through GuiCalls, a queued
signal: nothing here waits on the engine or the disk on the GUI thread. The window's own
reads (the list, the failed items) and writes (a new job, retry, cancel, export) run on the
storage thread too. When a job ends, the status bar says so. Quitting pauses the jobs
running (their unfinished items stay pending); one cut by a kill is shown interrupted, and
Resume runs only what is pending (the runner never redoes a finished item).

A job keeps the model it was made on, so that its answers all come from one model: loading
another model (or connecting a server) pauses the jobs running before the engine changes
(their requests go back pending, none is cut into a wrong answer), and Resume waits until
the job's model is the window's again, saying so."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path

from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QApplication

from app.jobs import (
    CANCELLED,
    COMPLETED,
    PAUSED,
    DeleteRefused,
    InputError,
    JobForm,
    JobRate,
    JobRunner,
    JobSpec,
    JobView,
    NotAChat,
    SerialJobs,
    delete_job,
    export,
    item_chat,
    job_view,
    model_name,
    new_job,
    owned_files,
    preview,
    read_rows,
)
from app.paths import files_dir
from app.server.batches.files import delete_file
from inference import EngineClient
from storage import ItemInput, JobRecord, JobsRepository
from ui.services.context import ControllerContext
from ui.widgets.jobs.jobs_window import JobsWindow
from ui.widgets.jobs.new_job_dialog import NewJobDialog

log = logging.getLogger(__name__)

STATUS_MESSAGE_MS = 10_000
STOP_WAIT_S = 10.0  # at quit: how long a running job may take to hand back its requests
# The selected running job's answers and failures are listed again as they come, at most
# this often (a listing reads all its items).
LIVE_LIST_S = 1.0
LIST_EVERY_MS = 2000  # while the window is open, the list is read again (jobs run by the CLI or the server)


class JobRun:
    """One job running in this window: its runner (made on its thread: making it reads the
    job), the rate of its finishes, and a stop asked for before the runner existed."""

    def __init__(self, job_id: str) -> None:
        self.job_id = job_id
        self.rate = JobRate()
        self.runner: JobRunner | None = None
        self.stop: str | None = None
        self.lock = threading.Lock()
        self.thread: threading.Thread | None = None

    def ask(self, stop: str) -> None:
        with self.lock:
            self.stop = stop
        self._tell()

    def attach(self, runner: JobRunner) -> None:
        with self.lock:
            self.runner = runner
        self._tell()

    def _tell(self) -> None:
        """The stop asked for, to the runner once both exist (a runner is told it more than once
        at worst, which changes nothing)."""
        with self.lock:
            runner, stop = self.runner, self.stop
        if runner is not None and stop is not None:
            runner.pause() if stop == PAUSED else runner.cancel()


class JobsController:
    def __init__(self, ctx: ControllerContext) -> None:
        self.ctx = ctx
        self.jobs = JobsRepository(ctx.repo.db)  # read and written on the storage thread only
        self.serial = SerialJobs(ctx.repo.db, ctx.storage.submit)  # the runners' (their threads')
        self.client: EngineClient = ctx.engines.main  # the window's engine, whichever model is loaded
        self.window: JobsWindow | None = None
        self.dialog: NewJobDialog | None = None
        self.timer: QTimer | None = None  # the window's list read again while it is open
        self.runs: dict[str, JobRun] = {}
        self.deleting: set[str] = set()  # running jobs cancelled to be deleted once their runner stops
        self.records: dict[str, JobRecord] = {}  # the jobs last listed
        self._input: tuple[str, list[ItemInput]] | None = None  # the New job dialog's rows, read
        self._live: dict[str, tuple[int, float]] = {}  # job -> (its items finished, when) at its last listing
        ctx.window.menus.jobs_action.triggered.connect(lambda _checked=False: self.show())
        # Connected directly: the hub says it is switching before its engine restarts.
        ctx.engine_signals.switching.connect(lambda _what: self._pause_for_switch())

    # ----- the window ---------------------------------------------------------------------

    def show(self) -> JobsWindow:
        if self.window is None:
            window = self.window = JobsWindow(self.ctx.window)
            window.setWindowFlag(Qt.WindowType.Window)
            window.destroyed.connect(lambda _obj=None: setattr(self, "window", None))
            window.new_requested.connect(self.new_job)
            window.pause_requested.connect(lambda job_id: self.stop(job_id, PAUSED))
            window.cancel_requested.connect(lambda job_id: self.stop(job_id, CANCELLED))
            window.resume_requested.connect(self.start)
            window.retry_requested.connect(self.retry_failed)
            window.export_requested.connect(self.export)
            window.delete_requested.connect(self.delete)
            window.selected.connect(self._list_items)
            window.open_item_requested.connect(self.open_item)
            self.timer = QTimer(window)
            self.timer.setInterval(LIST_EVERY_MS)
            self.timer.timeout.connect(lambda: self.refresh() if window.isVisible() else None)
            self.timer.start()
        self.window.show()
        self.window.raise_()
        self.window.activateWindow()
        self.refresh()
        return self.window

    def refresh(self) -> asyncio.Task:
        jobs = self.jobs

        def listed() -> list[tuple[JobRecord, dict[str, int]]]:
            return [(job, jobs.counts(job.id)) for job in reversed(jobs.all())]  # newest first

        return self.ctx.storage.run(listed, self._listed)

    def _listed(self, listed: list[tuple[JobRecord, dict[str, int]]]) -> None:
        self.records = {job.id: job for job, _counts in listed}
        if self.window is not None:
            self.window.set_jobs([self._view(job, counts) for job, counts in listed])

    def _view(self, job: JobRecord, counts: dict[str, int]) -> JobView:
        run = self.runs.get(job.id)
        return job_view(job, counts, run is not None, run.rate if run is not None else None)

    def _list_items(self, job_id: str) -> asyncio.Task:
        """The selected job's answers and failed items (read on the storage thread)."""
        jobs = self.jobs

        def listed(items: list) -> None:
            if self.window is not None:
                self.window.set_answers(job_id, [item for item in items if item.state == "done"])
                self.window.set_failed(job_id, [item for item in items if item.state == "failed"])

        return self.ctx.storage.run(lambda: jobs.items(job_id), listed)

    def open_item(self, job_id: str, item_id: int) -> asyncio.Task:
        """An answered item as a chat of its own, opened in a tab (to go on from its answer)."""
        jobs, repo = self.jobs, self.ctx.repo

        def made() -> int | str:
            job = jobs.get(job_id)
            item = next((i for i in jobs.items(job_id) if i.id == item_id), None)
            if job is None or item is None:
                return f"Job {job_id} or its item is gone"
            try:
                return item_chat(repo, job, item)
            except NotAChat as exc:
                return str(exc)

        def opened(outcome: int | str) -> None:
            if isinstance(outcome, str):
                self._say(outcome)
                return
            self.ctx.events.conversations_changed.emit()
            self.ctx.window.open_requested.emit(outcome)

        return self.ctx.storage.run(made, opened)

    # ----- running ------------------------------------------------------------------------

    def start(self, job_id: str) -> JobRun | None:
        """Runs (or resumes) the job on a thread of its own: only its pending items run; None
        (the status bar says why) when the window's model is not the job's."""
        if job_id in self.runs:
            return self.runs[job_id]
        job = self.records.get(job_id)
        if job is not None and job.kind == "template":
            spec, current = JobSpec.from_json(job.spec), self._model()
            if not spec.runs_on(current):
                self._say(f"Job {job_id} runs on {model_name(spec.model)}: load that model to resume it "
                          f"(the window has {model_name(current)})")
                return None
        run = self.runs[job_id] = JobRun(job_id)
        post, serial, client, slots = self.ctx.gui.post, self.serial, self.client, self.ctx.job_slots

        def body() -> None:
            try:
                runner = JobRunner(serial, client, job_id, slots=slots)  # with the server's batches: the width but one
                run.attach(runner)
                status = runner.run(on_progress=lambda counts: post(lambda: self._progress(job_id, counts)))
            except Exception as exc:  # the job stays as it was; the window says why
                log.exception("job %s failed to run", job_id)
                status = f"stopped: {exc}"
            post(lambda: self._ended(job_id, status))

        run.thread = threading.Thread(target=body, name=f"chorus-job-{job_id}", daemon=True)
        run.thread.start()
        self.refresh()
        return run

    def _model(self) -> str:
        """The model the window's jobs run on now: the main engine's file, or its server's model."""
        hub = self.ctx.engines
        return str(hub.local_settings.model_path) if hub.is_local else hub.model_name

    def _pause_for_switch(self) -> None:
        """The window's model is about to change: the jobs running pause first."""
        pausing = [run for job_id, run in self.runs.items() if job_id not in self.deleting]
        for run in pausing:
            run.ask(PAUSED)
        if pausing:
            n = len(pausing)
            self._say(f"{n} job{'s' if n > 1 else ''} paused while the model changes: a job resumes on its own model")

    def _say(self, text: str) -> None:
        self.ctx.window.statusBar().showMessage(text, STATUS_MESSAGE_MS)

    def _progress(self, job_id: str, counts: dict[str, int]) -> None:
        run = self.runs.get(job_id)
        if run is None:
            return
        # The first count is the run's base: what earlier runs finished is not its rate.
        run.rate.add(time.monotonic(), counts.get("done", 0) + counts.get("failed", 0))
        job = self.records.get(job_id)
        if self.window is not None and job is not None:
            self.window.update_job(self._view(job, counts))
            if self.window.selected_id() == job_id:
                self._list_live(job_id, counts)

    def _list_live(self, job_id: str, counts: dict[str, int]) -> None:
        """The selected running job's answers and failed items as they come: listed again
        once more of its items finished, at most every LIVE_LIST_S."""
        finished, now = counts.get("done", 0) + counts.get("failed", 0), time.monotonic()
        last = self._live.get(job_id)
        if last is not None and (last[0] == finished or now - last[1] < LIVE_LIST_S):
            return
        self._live[job_id] = (finished, now)
        self._list_items(job_id)

    def _ended(self, job_id: str, status: str) -> None:
        self.runs.pop(job_id, None)
        self._live.pop(job_id, None)
        if job_id in self.deleting:  # its runner has stopped writing: now it can go
            self.deleting.discard(job_id)
            self.delete(job_id)
            return
        jobs = self.jobs

        def said(counts: dict[str, int]) -> None:
            self.ctx.window.statusBar().showMessage(
                f"Job {job_id} {status}: {counts['done']} done, {counts['failed']} failed, "
                f"{counts['pending']} pending", STATUS_MESSAGE_MS)
            if status == COMPLETED:  # the end the user waits for, perhaps in another window
                self._alert()

        self.ctx.storage.run(lambda: jobs.counts(job_id), said)
        self.refresh()
        if self.window is not None and self.window.selected_id() == job_id:
            self._list_items(job_id)

    def _alert(self) -> None:
        """A job ran to its end: the window asks for attention (the taskbar entry flashes or
        bounces, as the desktop does it) unless it or the Jobs window is the one in front."""
        active = QApplication.activeWindow()
        if active is None or active not in (self.ctx.window, self.window):
            QApplication.alert(self.ctx.window)

    def stop(self, job_id: str, stop: str) -> None:
        """Pause or cancel: a running job hands back its requests (they stay pending); a job
        not running here is only marked (a cancelled one can still be resumed)."""
        run = self.runs.get(job_id)
        if run is not None:
            run.ask(stop)
            return
        jobs = self.jobs
        self.ctx.storage.run(lambda: jobs.set_status(job_id, stop), lambda _none: self.refresh())

    def retry_failed(self, job_id: str) -> asyncio.Task:
        """The failed items back to pending, then the job runs them."""
        jobs = self.jobs
        return self.ctx.storage.run(lambda: jobs.retry_failed(job_id), lambda _n: self.start(job_id))

    def export(self, job_id: str, path: str) -> asyncio.Task:
        """chorus batch export's files: .csv (the fields as columns) or JSONL."""
        jobs = self.jobs

        def said(count: int) -> None:
            self.ctx.window.statusBar().showMessage(f"Exported {count} rows of {job_id} to {path}", STATUS_MESSAGE_MS)

        return self.ctx.storage.run(lambda: export(jobs, job_id, Path(path)), said)

    def delete(self, job_id: str) -> asyncio.Task | None:
        """Deletes the job with its items (one transaction, app/jobs/deletion.py). One running
        here is cancelled first and deleted when its runner has stopped (no result of it lands
        after); a server batch's output and error files go with it."""
        run = self.runs.get(job_id)
        if run is not None:
            self.deleting.add(job_id)
            run.ask(CANCELLED)
            return None
        jobs, folder = self.jobs, files_dir(self.ctx.repo.db.path.parent)

        def gone() -> str:
            try:  # forced: the window's confirmation said a job a kill left running goes too
                job = delete_job(jobs, job_id, force=True)
            except DeleteRefused as refused:
                return f"Not deleted: {refused}"
            removed = [fid for fid in owned_files(job) if delete_file(folder, fid)]
            return f"Deleted job {job_id}" + (f" and its files {', '.join(removed)}" if removed else "")

        def said(text: str) -> None:
            self.ctx.window.statusBar().showMessage(text, STATUS_MESSAGE_MS)
            self.refresh()

        return self.ctx.storage.run(gone, said)

    def shutdown(self) -> None:
        """At quit, before the engines stop: each running job pauses and hands its requests
        back (its unfinished items stay pending for the next start's Resume)."""
        if self.timer is not None:
            self.timer.stop()
        for run in list(self.runs.values()):
            run.ask(PAUSED)
        deadline = time.monotonic() + STOP_WAIT_S
        for run in list(self.runs.values()):
            if run.thread is not None:
                run.thread.join(max(0.0, deadline - time.monotonic()))

    # ----- New job… -----------------------------------------------------------------------

    def new_job(self) -> NewJobDialog:
        if self.dialog is None:
            parent = self.window if self.window is not None else self.ctx.window
            dialog = self.dialog = NewJobDialog(parent)
            dialog.file_chosen.connect(self._read_input)
            dialog.form_changed.connect(self._preview)
            dialog.schema_file_chosen.connect(self._read_schema)
            dialog.start_requested.connect(self._create)
            dialog.finished.connect(self._dialog_closed)
            tools = self.ctx.tools
            dialog.offer_tools(tools.configs(), asdict(tools.web_settings()), tools.settings.max_rounds,
                               tools.settings.timeout_s)
        self.dialog.show()
        self.dialog.raise_()
        return self.dialog

    def _dialog_closed(self, _result: int) -> None:
        if self.dialog is not None:
            self.dialog.deleteLater()
        self.dialog, self._input = None, None

    def _read_input(self, path: str) -> asyncio.Task | None:
        if not path:
            return None

        def read() -> list[ItemInput] | str:
            try:
                return read_rows(Path(path))
            except (InputError, OSError) as exc:
                return str(exc)

        return self.ctx.storage.run(read, lambda rows: self._input_read(path, rows))

    def _read_schema(self, path: str) -> asyncio.Task | None:
        """A JSON Schema file into the dialog's box (read on the storage thread); the preview
        then checks it as any typed schema."""
        if not path:
            return None

        def read() -> tuple[str | None, str | None]:
            try:
                return Path(path).read_text(encoding="utf-8"), None
            except (OSError, UnicodeDecodeError) as exc:
                return None, f"The JSON Schema file cannot be read: {exc}"

        def loaded(read: tuple[str | None, str | None]) -> None:
            text, problem = read
            if self.dialog is None:
                return
            if text is not None:
                self.dialog.set_schema_text(text)
            else:
                self.dialog.show_problem(problem or "")

        return self.ctx.storage.run(read, loaded)

    def _input_read(self, path: str, rows: list[ItemInput] | str) -> None:
        dialog = self.dialog
        if dialog is None or dialog.path_edit.text().strip() != path:
            return  # closed, or another file chosen since
        if isinstance(rows, str):
            self._input = None
            dialog.show_problem(rows)
            return
        self._input = (path, rows)
        self._preview()

    def _preview(self) -> None:
        if self.dialog is not None and self._input is not None:
            self.dialog.show_preview(preview(self.dialog.form(), self._input[1]))

    def _create(self, path: str, form: JobForm) -> asyncio.Task | None:
        if self._input is None or self._input[0] != path:
            return None
        try:
            spec = replace(form.spec(), model=self._model())  # the schema: checked by the preview
        except ValueError as bad:
            self.dialog.show_problem(str(bad)) if self.dialog is not None else None
            return None
        rows, jobs = self._input[1], self.jobs
        if self.dialog is not None:
            self.dialog.accept()
        then: Callable[[str], object] = self.start
        return self.ctx.storage.run(lambda: new_job(jobs, rows, spec, source=Path(path).name).id, then)
