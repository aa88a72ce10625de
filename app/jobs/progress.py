"""How a job is going, as the desktop's Jobs window shows it, Qt-free: its counts and state
(a job left `running` by a run that ended without pausing it, a quit or a kill, is shown as
interrupted, ready to resume), and for the one running, items a minute and the time left."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, replace

from app.jobs.deletion import refusal
from app.jobs.spec import model_name
from storage import JobRecord

RATE_WINDOW_S = 120.0  # the rate is of the finishes in the last two minutes


class JobRate:
    """Items a minute and the time left, from (time, items finished) samples of one run."""

    def __init__(self, window_s: float = RATE_WINDOW_S) -> None:
        self.window_s = window_s
        self._samples: deque[tuple[float, int]] = deque()

    def add(self, now: float, finished: int) -> None:
        self._samples.append((now, finished))
        while len(self._samples) > 2 and now - self._samples[1][0] >= self.window_s:
            self._samples.popleft()

    def per_minute(self) -> float | None:
        """None until the run has finished an item and some time has passed."""
        if len(self._samples) < 2:
            return None
        (t0, f0), (t1, f1) = self._samples[0], self._samples[-1]
        if t1 <= t0 or f1 <= f0:
            return None
        return (f1 - f0) * 60.0 / (t1 - t0)

    def eta_s(self, remaining: int) -> float | None:
        rate = self.per_minute()
        if remaining <= 0:
            return 0.0
        return None if not rate else remaining * 60.0 / rate


def duration_text(seconds: float | None) -> str:
    if seconds is None:
        return ""
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


@dataclass(frozen=True, slots=True)
class JobView:
    """One row of the Jobs window."""

    id: str
    kind: str
    source: str
    state: str  # as shown: queued, running, paused, interrupted, cancelled, completed (or an OpenAI status)
    done: int
    failed: int
    total: int
    rate: float | None = None  # items a minute (while running here)
    eta_s: float | None = None
    # The window may delete it: every template job (one it runs is cancelled first, one a
    # kill left running is deleted after the confirmation says so), a server batch once ended.
    deletable: bool = True
    model: str = ""  # the model it runs on (a file's name), "" where the job does not say

    @property
    def finished(self) -> int:
        return self.done + self.failed

    @property
    def running(self) -> bool:
        return self.state == "running"

    @property
    def resumable(self) -> bool:
        """A template job not running with items still to run (the server runs its own batches)."""
        return self.kind == "template" and not self.running and self.finished < self.total

    def progress_text(self) -> str:
        failed = f" · {self.failed} failed" if self.failed else ""
        return f"{self.finished}/{self.total}{failed}"

    def rate_text(self) -> str:
        return "" if self.rate is None else f"{self.rate:.1f} items/min"


def job_view(job: JobRecord, counts: dict[str, int], running_here: bool, rate: JobRate | None = None) -> JobView:
    """running_here: this window runs it now. A template job stored as running that is not
    is one a quit or a kill cut: interrupted (its unfinished items are pending; resume runs them)."""
    state = job.status
    if job.kind != "template" and isinstance(job.spec.get("status"), str):
        state = job.spec["status"]  # a server batch: OpenAI's status (in_progress, expired...), not its runner's
    if job.kind == "template" and state == "running" and not running_here:
        state = "interrupted"
    total = sum(counts.values())
    deletable = job.kind == "template" or refusal(job) is None
    model = job.spec.get("model")  # a server batch's too: the model its lines name by default
    model = model_name(model) if isinstance(model, str) else ""
    view = JobView(job.id, job.kind, job.source, state, counts.get("done", 0), counts.get("failed", 0), total,
                   deletable=deletable, model=model)
    if running_here and rate is not None:
        return replace(view, state="running", rate=rate.per_minute(), eta_s=rate.eta_s(total - view.finished))
    return view
