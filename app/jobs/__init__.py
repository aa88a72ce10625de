"""Background jobs (issue 37): a prompt template applied to every row of a CSV/JSONL file,
run on the engine's spare capacity and stored item by item (storage.JobsRepository). Qt-free."""

from app.jobs.inputs import InputError, read_rows
from app.jobs.records import export, new_job
from app.jobs.runner import CANCELLED, COMPLETED, PAUSED, RUNNING, JobRunner
from app.jobs.spec import ItemError, JobSpec
from app.jobs.work import ItemRun, TemplateWork, Work, text_result

__all__ = ["CANCELLED", "COMPLETED", "PAUSED", "RUNNING", "InputError", "ItemError", "ItemRun", "JobRunner", "JobSpec",
           "TemplateWork", "Work", "export", "new_job", "read_rows", "text_result"]
