"""The server's stored Responses (the responses table, revision 0006): kept by id so that a
request continues an earlier one (previous_response_id), read back and deleted.

What a response means (its input as chat messages, the API's object) is the server's
business (app/server/responses/); here it is a row of plain values."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime

from storage.database import Database
from storage.schema import StoredResponse


@dataclass(frozen=True, slots=True)
class ResponseRecord:
    id: str
    model: str
    input: list[dict]  # the conversation the reply answered, chat messages [{role, content}]
    output_text: str
    status: str
    usage: dict
    previous_response_id: str | None = None
    created_at: datetime | None = None  # the response's own moment; None: when saved


class ResponsesRepository:
    def __init__(self, db: Database) -> None:
        self.db = db

    def save(self, record: ResponseRecord) -> ResponseRecord:
        with self.db.begin() as s:
            row = StoredResponse(id=record.id, model=record.model, input_json=json.dumps(record.input),
                                 output_text=record.output_text, status=record.status,
                                 usage_json=json.dumps(record.usage),
                                 previous_response_id=record.previous_response_id)
            if record.created_at is not None:
                row.created_at = record.created_at
            s.add(row)
            s.flush()
            return _record(row)

    def get(self, response_id: str) -> ResponseRecord | None:
        with self.db.begin() as s:
            row = s.get(StoredResponse, response_id)
            return _record(row) if row is not None else None

    def delete(self, response_id: str) -> bool:
        """False when there was no such response."""
        with self.db.begin() as s:
            row = s.get(StoredResponse, response_id)
            if row is None:
                return False
            s.delete(row)
            return True


def _record(row: StoredResponse) -> ResponseRecord:
    return ResponseRecord(id=row.id, model=row.model, input=json.loads(row.input_json), output_text=row.output_text,
                          status=row.status, usage=json.loads(row.usage_json),
                          previous_response_id=row.previous_response_id, created_at=row.created_at)
