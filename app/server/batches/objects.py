"""OpenAI's batch object from a job of kind "openai" (storage's jobs table): what the batch
is (endpoint, input file, window, metadata, model) and where it stands (its status, the
times it changed, its files, the errors that failed it) are the job's spec; its
request_counts are its items' states, counted when asked."""

from __future__ import annotations

import time

KIND = "openai"
ID_PREFIX = "batch_"

VALIDATING, FAILED, IN_PROGRESS, FINALIZING = "validating", "failed", "in_progress", "finalizing"
COMPLETED, CANCELLING, CANCELLED, EXPIRED = "completed", "cancelling", "cancelled", "expired"
TERMINAL = (FAILED, COMPLETED, CANCELLED, EXPIRED)
# completion_window: how long a batch has to finish from its creation. One not finished by
# then ends expired (its finished requests kept in the output file, the rest in the error
# file as batch_expired); spec["expiring"] marks one finalizing because its window passed.
WINDOW_S = {"24h": 24 * 3600}
# The time each status is entered at (a field of the object).
ENTERED_AT = {IN_PROGRESS: "in_progress_at", FINALIZING: "finalizing_at", COMPLETED: "completed_at",
              FAILED: "failed_at", CANCELLING: "cancelling_at", CANCELLED: "cancelled_at", EXPIRED: "expired_at"}
TIMES = ("in_progress_at", "expires_at", "finalizing_at", "completed_at", "failed_at", "expired_at", "cancelling_at",
         "cancelled_at")


def new_spec(endpoint: str, input_file_id: str, completion_window: str, metadata: dict | None, model: str) -> dict:
    created = int(time.time())
    return {"endpoint": endpoint, "input_file_id": input_file_id, "completion_window": completion_window,
            "metadata": metadata, "model": model, "status": VALIDATING, "created_at": created,
            "expires_at": created + WINDOW_S.get(completion_window, WINDOW_S["24h"]),
            "errors": None, "output_file_id": None, "error_file_id": None}


def expires_at(spec: dict) -> int:
    """When the batch's window ends (a batch stored before expiry was built: from its creation)."""
    stored = spec.get("expires_at")
    if isinstance(stored, int):
        return stored
    return int(spec["created_at"]) + WINDOW_S.get(spec.get("completion_window", "24h"), WINDOW_S["24h"])


def moved(spec: dict, status: str, **fields: object) -> dict:
    """The spec in its next status, the time it entered it set."""
    changed = {**spec, **fields, "status": status}
    if status in ENTERED_AT:
        changed[ENTERED_AT[status]] = int(time.time())
    return changed


def batch_object(job_id: str, spec: dict, counts: dict[str, int]) -> dict:
    obj = {"id": job_id, "object": "batch", "endpoint": spec["endpoint"], "model": spec.get("model"),
           "errors": spec.get("errors"), "input_file_id": spec["input_file_id"],
           "completion_window": spec["completion_window"], "status": spec["status"],
           "output_file_id": spec.get("output_file_id"), "error_file_id": spec.get("error_file_id"),
           "created_at": spec["created_at"]}
    obj.update({name: spec.get(name) for name in TIMES})
    obj["expires_at"] = expires_at(spec)
    done, failed = counts.get("done", 0), counts.get("failed", 0)
    obj["request_counts"] = {"total": done + failed + counts.get("pending", 0), "completed": done, "failed": failed}
    obj["metadata"] = spec.get("metadata")
    return obj
