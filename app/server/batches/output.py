"""A finished batch's output and error files, in OpenAI's format: one JSON line a request,
in the input's order, {"id": "batch_req_...", "custom_id", "response": {"status_code",
"request_id", "body"}, "error"}.

The output file holds the requests answered (status 200, the body the live route would have
sent); the error file those refused (status 400 with the route's error body, as OpenAI
writes a request it refused), those that failed with no HTTP answer ("error": {code,
message}), and, for a cancelled batch, those that never ran (code "batch_cancelled"); for an
expired one, "batch_expired", as OpenAI writes them; for one whose model could not be
loaded, "model_load_failed" with the load's error."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator

from storage import ItemRecord

CANCELLED = {"code": "batch_cancelled", "message": "the batch was cancelled before this request ran"}
EXPIRED = {"code": "batch_expired", "message": "the batch's completion window ended before this request ran"}


def line_id(job_id: str, seq: int) -> str:
    """Stable: a batch finalized again (after a crash) writes the same lines."""
    return "batch_req_" + hashlib.sha256(f"{job_id}/{seq}".encode()).hexdigest()[:24]


def load_failed(message: str) -> dict:
    """A request that never ran because the batch's model could not be loaded."""
    return {"code": "model_load_failed", "message": message}


def result_line(item: ItemRecord, cancelled: bool = False, expired: bool = False,
                unrun: dict | None = None) -> tuple[bool, dict] | None:
    """(whether it goes to the output file, its line); None for an item still pending in a
    batch that was neither cancelled nor expired nor ended by unrun (the error of the
    requests that never ran: load_failed's), as it has no line yet."""
    line: dict = {"id": line_id(item.job_id, item.seq), "custom_id": item.custom_id, "response": None, "error": None}
    if item.state == "pending":
        if unrun is not None:
            line["error"] = dict(unrun)
            return False, line
        if not (cancelled or expired):
            return None
        line["error"] = dict(EXPIRED if expired else CANCELLED)
        return False, line
    response = _response(item.answer)
    if response is not None:
        line["response"] = response
        return item.state == "done" and response.get("status_code") == 200, line
    line["error"] = {"code": "request_failed", "message": item.error or "the request failed"}
    return False, line


def split_lines(items: Iterable[ItemRecord], cancelled: bool = False, expired: bool = False,
                unrun: dict | None = None) -> tuple[list[dict], list[dict]]:
    """(the output file's lines, the error file's lines)."""
    output: list[dict] = []
    errors: list[dict] = []
    for item in items:
        placed = result_line(item, cancelled, expired, unrun)
        if placed is not None:
            (output if placed[0] else errors).append(placed[1])
    return output, errors


def jsonl(lines: list[dict]) -> Iterator[bytes]:
    for line in lines:
        yield json.dumps(line, ensure_ascii=False).encode("utf-8") + b"\n"


def _response(answer: str | None) -> dict | None:
    if not answer:
        return None
    try:
        response = json.loads(answer)
    except json.JSONDecodeError:
        return None
    return response if isinstance(response, dict) and "status_code" in response else None
