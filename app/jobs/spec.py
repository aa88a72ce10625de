"""What a job asks: a prompt template filled with each row's columns, a system prompt,
sampling and an optional JSON Schema; the chat request one item becomes."""

from __future__ import annotations

import string
from dataclasses import asdict, dataclass, field, replace
from pathlib import PurePath

from app.output_schema import enforced_grammar
from inference import SPARE_PRIORITY, ChatRequest, SamplingParams

SCHEMA_WHERE = "json_schema"  # how a refused schema's path starts: "json_schema.properties.age uses 'not'..."


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

    def request(self, row: dict, request_id: str, grammar: str | None = None) -> ChatRequest:
        """The item as a chat request, at the engine's spare-capacity priority: any chat goes
        first. grammar: self.grammar(), compiled once by the caller for every item."""
        messages: list[dict] = [{"role": "system", "content": self.system_prompt}] if self.system_prompt else []
        messages.append({"role": "user", "content": self.prompt(row)})
        sampling = SamplingParams(**self.sampling)
        if self.json_schema is not None:
            sampling = replace(sampling, grammar=grammar if grammar is not None else self.grammar())
        return ChatRequest(messages=tuple(messages), sampling=sampling, priority=SPARE_PRIORITY,
                           request_id=request_id)


def model_name(model: str) -> str:
    """How a job's model is named to the user: a GGUF file's name, or the server's model."""
    return PurePath(model).name if model.lower().endswith(".gguf") else model
