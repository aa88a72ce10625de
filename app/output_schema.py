"""Structured output's one check: a JSON Schema becomes the grammar that enforces it, or is
refused with the reason the server gives for `response_format`'s json_schema
(app/server/openai/parsing.py) — "<where>.properties.age uses 'not', which is not supported:
no grammar can enforce it". The server, `chorus batch run --schema` and the Jobs window's
New job form all call it, so a schema one refuses the others refuse with the same words."""

from __future__ import annotations

from typing import Any

from inference import SchemaError, schema_grammar


class SchemaRefused(ValueError):
    """A schema that cannot be enforced: param is where (its path in the schema appended), reason why."""

    def __init__(self, param: str, reason: str) -> None:
        super().__init__(f"{param} {reason}")
        self.param, self.reason = param, reason


def enforced_grammar(schema: Any, where: str) -> str:
    """The grammar of everything that validates against schema; SchemaRefused otherwise."""
    if not isinstance(schema, dict):
        raise SchemaRefused(where, f"must be a JSON Schema object, got {type(schema).__name__}")
    try:
        return schema_grammar(schema)
    except SchemaError as exc:
        raise SchemaRefused(where + exc.path, f"uses {exc.keyword!r}, which {exc.reason}") from None
