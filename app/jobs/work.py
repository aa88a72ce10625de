"""What one item of a job asks the engine, and what its answer is: the runner (runner.py)
is the same for every kind of job; a Work says how an item becomes engine requests and how
their deltas become the item's result. TemplateWork is `chorus batch`'s (a prompt template
over a row); the server's OpenAI batches bring their own (app/server/batches/work.py)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import jsonschema  # type: ignore[import-untyped]  # no stubs installed

from app.documents import DocumentError, extract_document, render_document
from app.jobs.results import text_result
from app.jobs.spec import DOCUMENT, ItemError, JobSpec
from app.jobs.tool_run import ToolRun
from app.jobs.tools import JobTools
from inference import ChatRequest, Delta
from storage import ItemRecord, ItemResult, NewDocument

if TYPE_CHECKING:
    from app.tools import Toolbox


class ItemRun(Protocol):
    """One item under way: its engine requests (each with its own request_id, at spare
    priority), fed their deltas; its result once every request has finished."""

    requests: Sequence[ChatRequest]

    def add(self, index: int, delta: Delta) -> None:
        """A delta of requests[index]."""
        ...

    def result(self, seconds: float) -> ItemResult: ...


class Work(Protocol):
    def start(self, item: ItemRecord, request_id: str) -> ItemRun | ToolRun | ItemResult:
        """The item's run (a ToolRun: a tool loop the runner drives on a thread of its own),
        or its result already (it cannot run: the reason is its error). Called off the
        runner's lock: it may block (tokenize, prepare)."""
        ...


class TemplateWork:
    def __init__(self, spec: JobSpec) -> None:
        self.spec = spec
        self.tools = JobTools.from_json(spec.tools) if spec.tools is not None else None
        self.toolbox: Toolbox | None = None  # the job's tools, running (JobRunner starts them)
        self._grammar: str | None = None  # the json_schema's, compiled once for every item
        self._check: AnswerCheck | None = AnswerCheck(spec.json_schema) if spec.json_schema is not None else None

    def start(self, item: ItemRecord, request_id: str) -> ItemRun | ToolRun | ItemResult:
        try:
            if self.spec.json_schema is not None and self._grammar is None:
                self._grammar = self.spec.grammar()
            document = attached(item.fields[DOCUMENT]) if DOCUMENT in item.fields else None
            chat = self.spec.request(item.fields, request_id, self._grammar, document)
            if self.tools is not None:
                if self.toolbox is None:
                    return ItemResult(answer=None, finish_reason=None, error="the job's tools are not running")
                return ToolRun(chat, self.toolbox, self.tools)
            return TextRun(chat, self._check)
        except (ItemError, DocumentError, ValueError) as bad:  # SchemaRefused too: every item says why
            return ItemResult(answer=None, finish_reason=None, error=str(bad))


def attached(path: str) -> str:
    """A folder item's file as the model reads it, read when its item runs (once: a retried
    item reads it again, from the file as it is then). DocumentError says why it cannot be."""
    document = item_document(path)
    return render_document(document.name, document.text, document.pages)


def item_document(path: str) -> NewDocument:
    """A folder item's file as a document; DocumentError for an image (a job attaches
    documents) or a file that cannot be read."""
    document = extract_document(Path(path))
    if document.is_image:
        raise DocumentError(f"{document.name}: an image; a job attaches documents, not images")
    return document


class AnswerCheck:
    """An answer against the job's JSON Schema (jsonschema, the reference validator): the
    grammar makes a valid answer, but one cut by max_tokens is not whole JSON."""

    def __init__(self, schema: dict) -> None:
        self.validator = jsonschema.validators.validator_for(schema)(schema)

    def problem(self, answer: str) -> str | None:
        try:
            value = json.loads(answer)
        except ValueError as exc:
            return f"the answer is not JSON ({exc}); raise max tokens if it was cut"
        error = jsonschema.exceptions.best_match(self.validator.iter_errors(value))
        if error is None:
            return None
        where = "".join(f"[{p!r}]" for p in error.absolute_path) or "the top"
        return f"the answer does not follow the JSON Schema: at {where}, {error.message}"


class TextRun:
    """One request; the answer is its text (checked against the job's schema, if it has one)."""

    def __init__(self, chat: ChatRequest, check: AnswerCheck | None = None) -> None:
        self.requests: Sequence[ChatRequest] = (chat,)
        self._check = check
        self._parts: list[str] = []
        self._last: Delta | None = None

    def add(self, index: int, delta: Delta) -> None:
        self._parts.append(delta.text)
        if delta.finished:
            self._last = delta

    def result(self, seconds: float) -> ItemResult:
        assert self._last is not None
        result = text_result(self._last, "".join(self._parts), seconds)
        if self._check is not None and result.error is None and result.answer is not None:
            problem = self._check.problem(result.answer)
            if problem is not None:  # failed, its answer kept to be read (and retried)
                return replace(result, error=problem)
        return result
