"""What a job asks: a prompt template filled with each row's columns, a system prompt,
sampling and an optional JSON Schema; the chat request one item becomes.

A column named `@` and a sampling field (`@seed`, `@temperature`, `@top_p`, `@max_tokens`...)
sets that field for its row's item over the job's: one prompt tried with 10 seeds is 10 rows
of `@seed` (`seed_rows`), 4 presets are 4 rows of `@temperature` and `@top_p`. The `@` keeps
them apart from the data's own columns (a weather table's "temperature" is a column, not a
setting), and a template cannot name them ($-names have no `@`)."""

from __future__ import annotations

import string
from dataclasses import asdict, dataclass, field, replace
from pathlib import PurePath
from typing import Any

from app.documents import system_block
from app.output_schema import enforced_grammar
from inference import SAMPLING_FIELDS, SPARE_PRIORITY, ChatRequest, RequestError, SamplingParams
from storage import ItemInput

SCHEMA_WHERE = "json_schema"  # how a refused schema's path starts: "json_schema.properties.age uses 'not'..."
SETTING = "@"  # a column naming a sampling field: "@seed"
DOCUMENT = "@document"  # a folder's item: the file whose text its prompt carries (inputs.folder_rows)
SETTABLE = {f.name: f.kind for f in SAMPLING_FIELDS}


class ItemError(ValueError):
    """Why one item cannot run (a template naming a column its row lacks); the rest go on."""


@dataclass(frozen=True, slots=True)
class JobSpec:
    template: str  # string.Template: $column or ${column}
    system_prompt: str = ""
    sampling: dict = field(default_factory=dict)  # SamplingParams' fields
    json_schema: dict | None = None
    # The model the job runs on (a GGUF file's path, or a server's model name), so that one
    # job's answers all come from one model; "": any (a job made before this was kept).
    model: str = ""
    # The tools its model may call (app/jobs/tools.JobTools' JSON), None: none.
    tools: dict | None = None

    def __post_init__(self) -> None:
        if self.tools is not None and self.json_schema is not None:
            # The schema's grammar would hold every turn, the calls' too; a job does one or the other.
            raise ValueError("a job's answers follow a JSON Schema or come after tool calls, not both")

    def runs_on(self, model: str) -> bool:
        """Whether model is the job's: the same file name, wherever the file is."""
        return not self.model or model_name(self.model) == model_name(model)

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> JobSpec:
        return cls(**data)

    def prompt(self, row: dict) -> str:
        try:
            return string.Template(self.template).substitute({k: str(v) for k, v in row.items()})
        except KeyError as missing:
            raise ItemError(f"the template names a column this row lacks: {missing.args[0]}") from None
        except ValueError as bad:
            raise ItemError(f"the template is malformed: {bad}") from None

    def grammar(self) -> str | None:
        """The json_schema's grammar (None without one); SchemaRefused when it cannot be
        enforced, in the words the server uses for response_format (app/output_schema.py)."""
        return None if self.json_schema is None else enforced_grammar(self.json_schema, SCHEMA_WHERE)

    def request(self, row: dict, request_id: str, grammar: str | None = None,
                document: str | None = None) -> ChatRequest:
        """The item as a chat request, at the engine's spare-capacity priority: any chat goes
        first. grammar: self.grammar(), compiled once by the caller for every item; document:
        the item's file as the model reads it (render_document), after the system prompt, as
        a chat's attachment goes (so the system prompt stays a prefix every item shares)."""
        system = system_block(self.system_prompt, document) if document is not None else self.system_prompt
        messages: list[dict] = [{"role": "system", "content": system}] if system else []
        messages.append({"role": "user", "content": self.prompt(row)})
        sampling = row_sampling(SamplingParams(**self.sampling), row)
        if self.json_schema is not None:
            sampling = replace(sampling, grammar=grammar if grammar is not None else self.grammar())
        return ChatRequest(messages=tuple(messages), sampling=sampling, priority=SPARE_PRIORITY,
                           request_id=request_id)


def row_sampling(sampling: SamplingParams, row: dict) -> SamplingParams:
    """sampling with the row's @-columns over it; ItemError naming a column that is no
    sampling field or a value out of the field's bounds."""
    settings: dict[str, Any] = {}
    for column, value in row.items():
        if not column.startswith(SETTING) or column == DOCUMENT:
            continue
        name = column[len(SETTING):]
        kind = SETTABLE.get(name)
        if kind is None:
            raise ItemError(f"column {column}: {name!r} is not a sampling setting "
                            f"(one of {', '.join(sorted(SETTABLE))})")
        settings[name] = _setting(column, value, kind)
    if not settings:
        return sampling
    sampling = replace(sampling, **settings)
    try:
        sampling.validate()
    except RequestError as bad:
        raise ItemError(f"this row's settings: {bad}") from None
    return sampling


def _setting(column: str, value: Any, kind: type) -> Any:
    """A CSV cell (text) or a JSONL value as the field's type."""
    if value is None or value == "":
        raise ItemError(f"column {column} is empty")
    try:
        if kind is bool:
            if isinstance(value, bool):
                return value
            if str(value).strip().lower() not in ("true", "false", "1", "0"):
                raise ValueError(value)
            return str(value).strip().lower() in ("true", "1")
        if kind is int:
            try:
                return int(str(value).strip())  # exactly, however large (a seed)
            except ValueError:
                number = float(value)  # "3.0", as a spreadsheet writes it
            if not number.is_integer():
                raise ValueError(value)
            return int(number)
        return kind(value)
    except (TypeError, ValueError):
        raise ItemError(f"column {column}: {value!r} is not a {kind.__name__}") from None


def seed_rows(count: int, first: int = 1) -> list[ItemInput]:
    """One prompt tried with count seeds: rows of @seed first, first + 1, ..."""
    if count < 1:
        raise ValueError(f"the number of seeds must be at least 1, got {count}")
    return [ItemInput(fields={SETTING + "seed": first + i}) for i in range(count)]


def model_name(model: str) -> str:
    """How a job's model is named to the user: a GGUF file's name, or the server's model."""
    return PurePath(model).name if model.lower().endswith(".gguf") else model
