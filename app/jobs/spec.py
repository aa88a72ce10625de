"""What a job asks: a prompt template filled with each row's columns, a system prompt,
sampling and an optional JSON Schema; the chat request one item becomes."""

from __future__ import annotations

import string
from dataclasses import asdict, dataclass, field, replace

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
