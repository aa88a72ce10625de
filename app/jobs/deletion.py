"""Deleting a job: the job, its items and their results leave the chat database in one
transaction (storage.JobsRepository.delete). Which jobs may go, and which of the server's
batch files go with one, is decided here for `chorus batch delete` and the Jobs window alike.

* A template job may always go, except one stored `running` (some process may be running
  it: `chorus batch cancel` it first, or force it when no process does, as after a kill).
  The Jobs window cancels a job it runs itself and deletes it once its runner has stopped.
* A server batch (kind "openai") may go once it has ended (completed, failed, cancelled,
  expired); one the server still validates, runs or finalizes is refused: cancel it first.
  Its output and error files go with it (the server wrote them for this batch alone: no
  other batch can take a file of theirs as input, which needs purpose "batch"). Its input
  file stays: it is the user's upload, which other batches may use and the Files API
  deletes (`DELETE /v1/files/{id}`)."""

from __future__ import annotations

from storage import JobRecord, JobsRepository

# OpenAI's ended statuses (app/server/batches/objects.py's TERMINAL, and expired): named
# here because the server's batches import app.jobs, not the other way round.
BATCH_ENDED = ("completed", "failed", "cancelled", "expired")


class DeleteRefused(ValueError):
    """Why this job cannot be deleted now."""


def refusal(job: JobRecord, running_here: bool = False, force: bool = False) -> str | None:
    """Why `job` cannot be deleted now, or None. running_here: the caller runs it (and cancels it first)."""
    if job.kind == "template":
        if job.status == "running" and not (running_here or force):
            return (f"job {job.id} is running: cancel it first (chorus batch cancel {job.id}); if no process "
                    "runs it any more (a kill left it running), delete it with --force")
        return None
    status = job.spec.get("status")
    if status not in BATCH_ENDED:
        return (f"batch {job.id} is {status}: the server still has it; cancel it first "
                f"(POST /v1/batches/{job.id}/cancel or chorus batch cancel {job.id}), then delete it")
    return None


def owned_files(job: JobRecord) -> list[str]:
    """The Files API files that belong to this job alone (a batch's output and error files)."""
    if job.kind == "template":
        return []
    return [fid for fid in (job.spec.get("output_file_id"), job.spec.get("error_file_id")) if isinstance(fid, str)]


def delete_job(jobs: JobsRepository, job_id: str, running_here: bool = False, force: bool = False) -> JobRecord:
    """Deletes the job with its items (one transaction); the job as it was. DeleteRefused when
    there is none or it cannot go now. The caller removes owned_files(job) afterwards: a crash
    between the two leaves unreferenced files, never a job whose files are gone."""
    job = jobs.get(job_id)
    if job is None:
        raise DeleteRefused(f"no job {job_id}")
    why = refusal(job, running_here, force)
    if why is not None:
        raise DeleteRefused(why)
    gone = jobs.delete(job_id)
    if gone is None:  # deleted meanwhile by another process
        raise DeleteRefused(f"no job {job_id}")
    return gone
