"""The desktop's "New job" form, Qt-free: what the user typed becomes a JobSpec, and the
first rows of the input are rendered with it before anything starts (a template naming a
column the rows lack shows its error there, not after the job has run). An optional JSON
Schema is checked as the server checks response_format's (app/output_schema.py): one that
cannot be enforced is refused here, in the server's words, and Start is not offered."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache

from app.jobs.spec import SCHEMA_WHERE, ItemError, JobSpec
from app.jobs.tools import JobTools
from app.output_schema import SchemaRefused, enforced_grammar
from storage import ItemInput

PREVIEW_ROWS = 3


@dataclass(frozen=True, slots=True)
class JobForm:
    template: str
    max_tokens: int = 256
    system_prompt: str = ""
    schema_text: str = ""  # a JSON Schema every answer must follow; blank: free text
    tools: JobTools | None = None  # the tools each item's model may call, every call approved

    def schema(self) -> dict | None:
        """The schema typed (or loaded), or None; SchemaProblem when it is not one to enforce."""
        if not self.schema_text.strip():
            return None
        problem = schema_problem(self.schema_text)
        if problem is not None:
            raise SchemaProblem(problem)
        return json.loads(self.schema_text)

    def spec(self) -> JobSpec:
        """SchemaProblem for a schema that cannot be enforced; ValueError for one beside tools."""
        return JobSpec(template=self.template, system_prompt=self.system_prompt,
                       sampling={"max_tokens": self.max_tokens}, json_schema=self.schema(),
                       tools=self.tools.to_json() if self.tools is not None else None)


class SchemaProblem(ValueError):
    pass


@lru_cache(maxsize=16)  # the form previews again at every keystroke: compile a schema once
def schema_problem(text: str) -> str | None:
    """Why this text is not a JSON Schema the engine can enforce (None: it is one)."""
    try:
        schema = json.loads(text)
    except ValueError as exc:
        return f"The JSON Schema is not JSON: {exc}"
    try:
        enforced_grammar(schema, SCHEMA_WHERE)
    except SchemaRefused as refused:
        return f"The JSON Schema cannot be enforced: {refused}"
    return None


@dataclass(frozen=True, slots=True)
class PreviewLine:
    seq: int  # the row's place in the input, from 0
    prompt: str | None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class Preview:
    lines: tuple[PreviewLine, ...]
    columns: tuple[str, ...]  # the input's columns (its first rows')
    rows: int  # how many items the job would have
    problem: str | None = None  # why the job cannot start (no rows, no template, a bad schema)
    schema: dict | None = None  # the JSON Schema every answer will follow
    tools: JobTools | None = None  # what each item's model may call

    @property
    def ok(self) -> bool:
        """Startable: something to run and the first rows render (a later row that fails
        alone is that item's error, as in `chorus batch`)."""
        return self.problem is None and all(line.error is None for line in self.lines)

    def text(self) -> str:
        if self.problem is not None:
            return self.problem
        parts = [f"{self.rows} row{'' if self.rows == 1 else 's'}; columns: {', '.join(self.columns) or '(none)'}"]
        if self.schema is not None:
            parts.append("Answers follow this JSON Schema (each one checked against it):\n"
                         + json.dumps(self.schema, ensure_ascii=False))
        if self.tools is not None:
            parts.append(tools_text(self.tools))
        for line in self.lines:
            said = f"Error: {line.error}" if line.error is not None else line.prompt or ""
            parts.append(f"— row {line.seq + 1} —\n{said}")
        return "\n\n".join(parts)


def preview(form: JobForm, rows: list[ItemInput], count: int = PREVIEW_ROWS) -> Preview:
    """The first `count` rows' prompts as the job would send them (or each one's error)."""
    columns = tuple(dict.fromkeys(k for row in rows[:count] if row.error is None for k in row.fields))
    if not rows:
        return Preview((), columns, 0, "The input has no rows.")
    if not form.template.strip():
        return Preview((), columns, len(rows), "Write a prompt template: $column or ${column} stands for a column.")
    try:
        spec = form.spec()
    except ValueError as bad:  # SchemaProblem, or a schema beside tools
        return Preview((), columns, len(rows), str(bad))
    lines = []
    for seq, row in enumerate(rows[:count]):
        if row.error is not None:
            lines.append(PreviewLine(seq, None, row.error))
            continue
        try:
            lines.append(PreviewLine(seq, spec.prompt(row.fields)))
        except ItemError as bad:
            lines.append(PreviewLine(seq, None, str(bad)))
    return Preview(tuple(lines), columns, len(rows), schema=spec.json_schema, tools=form.tools)


def tools_text(tools: JobTools) -> str:
    offered = [server.name for server in tools.servers()] + (["web tools (fetch, web_search)"] if tools.web else [])
    only = f" (only {', '.join(tools.enabled)})" if tools.enabled is not None else ""
    must = "Each item's first turn must call one of" if tools.choice == "required" else "Each item may call"
    return (f"{must}: {', '.join(offered)}{only}; up to {tools.max_rounds} turns an item. "
            "Every call runs without asking: choosing the tools approves them.")
