"""The desktop's "New job" form, Qt-free: what the user typed becomes a JobSpec, and the
first rows of the input are rendered with it before anything starts (a template naming a
column the rows lack shows its error there, not after the job has run)."""

from __future__ import annotations

from dataclasses import dataclass

from app.jobs.spec import ItemError, JobSpec
from storage import ItemInput

PREVIEW_ROWS = 3


@dataclass(frozen=True, slots=True)
class JobForm:
    template: str
    max_tokens: int = 256
    system_prompt: str = ""

    def spec(self) -> JobSpec:
        return JobSpec(template=self.template, system_prompt=self.system_prompt,
                       sampling={"max_tokens": self.max_tokens})


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
    problem: str | None = None  # why the job cannot start (no rows, no template)

    @property
    def ok(self) -> bool:
        """Startable: something to run and the first rows render (a later row that fails
        alone is that item's error, as in `chorus batch`)."""
        return self.problem is None and all(line.error is None for line in self.lines)

    def text(self) -> str:
        if self.problem is not None:
            return self.problem
        parts = [f"{self.rows} row{'' if self.rows == 1 else 's'}; columns: {', '.join(self.columns) or '(none)'}"]
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
    spec = form.spec()
    lines = []
    for seq, row in enumerate(rows[:count]):
        if row.error is not None:
            lines.append(PreviewLine(seq, None, row.error))
            continue
        try:
            lines.append(PreviewLine(seq, spec.prompt(row.fields)))
        except ItemError as bad:
            lines.append(PreviewLine(seq, None, str(bad)))
    return Preview(tuple(lines), columns, len(rows))
