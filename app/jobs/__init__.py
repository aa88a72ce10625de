"""Background jobs (issue 37): a prompt template applied to every row of a CSV/JSONL file,
run on the engine's spare capacity and stored item by item (storage.JobsRepository). Qt-free."""

from app.jobs.as_chat import NotAChat, item_chat
from app.jobs.deletion import DeleteRefused, delete_job, owned_files
from app.jobs.form import JobForm, Preview, PreviewLine, preview
from app.jobs.inputs import InputError, read_rows
from app.jobs.progress import JobRate, JobView, duration_text, job_view
from app.jobs.records import export, new_job
from app.jobs.results import text_result
from app.jobs.runner import CANCELLED, COMPLETED, PAUSED, RUNNING, JobRunner, JobSlots, default_window
from app.jobs.serial import SerialJobs
from app.jobs.spec import ItemError, JobSpec, model_name, seed_rows
from app.jobs.tools import JobTools, JobToolsError
from app.jobs.work import ItemRun, TemplateWork, Work

__all__ = [
    "CANCELLED", "COMPLETED", "PAUSED", "RUNNING", "DeleteRefused", "InputError", "ItemError", "ItemRun", "JobForm",
    "JobRate", "JobRunner", "JobSlots", "JobSpec", "JobTools", "JobToolsError", "JobView", "NotAChat", "Preview",
    "PreviewLine", "SerialJobs", "TemplateWork", "Work", "default_window", "delete_job", "duration_text", "export",
    "item_chat", "job_view", "model_name", "new_job", "owned_files", "preview", "read_rows", "seed_rows",
    "text_result",
]
