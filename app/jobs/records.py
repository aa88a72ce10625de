"""A job made from an input's rows, and its results written out as JSONL or CSV."""

from __future__ import annotations

import csv
import json
import uuid
from pathlib import Path

from app.jobs.spec import JobSpec
from storage import ItemInput, ItemRecord, JobRecord, JobsRepository

RESULT_COLUMNS = ("seq", "state", "answer", "finish_reason", "prompt_tokens", "completion_tokens", "seconds",
                  "error")


def new_job(jobs: JobsRepository, rows: list[ItemInput], spec: JobSpec, source: str = "",
            job_id: str | None = None) -> JobRecord:
    return jobs.create(JobRecord(id=job_id or f"job_{uuid.uuid4().hex[:12]}", kind="template", status="queued",
                                 spec=spec.to_json(), source=source), rows)


def result_row(item: ItemRecord) -> dict:
    """An item's fields and result; an item that could call tools adds its exchange (the
    turns, calls and results after its prompt, OpenAI's message shape)."""
    row = {"seq": item.seq, "fields": item.fields, "state": item.state, "answer": item.answer,
           "finish_reason": item.finish_reason, "prompt_tokens": item.prompt_tokens,
           "completion_tokens": item.completion_tokens, "seconds": round(item.seconds, 3), "error": item.error}
    return row if item.exchange is None else row | {"exchange": item.exchange}


def export(jobs: JobsRepository, job_id: str, path: Path) -> int:
    """Writes every item's result (.csv: its fields as columns first; else JSONL); how many rows."""
    items = jobs.items(job_id)
    with path.open("w", encoding="utf-8", newline="") as out:
        if path.suffix.lower() == ".csv":
            fields = list(dict.fromkeys(k for item in items for k in item.fields))
            exchange = ["exchange"] if any(item.exchange is not None for item in items) else []
            writer = csv.DictWriter(out, fieldnames=[*fields, *RESULT_COLUMNS, *exchange], extrasaction="ignore")
            writer.writeheader()
            for item in items:
                row = result_row(item)
                if "exchange" in row:
                    row["exchange"] = _cell(row["exchange"])
                writer.writerow({**{k: _cell(v) for k, v in item.fields.items()}, **row})
        else:
            for item in items:
                out.write(json.dumps(result_row(item), ensure_ascii=False) + "\n")
    return len(items)


def _cell(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
