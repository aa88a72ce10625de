"""The grammar of a forced call (tool_choice "required" or a named function): a call of one
of the callable tools whose arguments follow that tool's JSON Schema, so the reply always
parses and validates; with parallel calls allowed, a list of up to MAX_PARALLEL such calls."""

from __future__ import annotations

from app.tools.types import Tool, ToolUse
from inference import SchemaError, schema_grammar

MAX_PARALLEL = 4  # calls in one forced reply: a small model could otherwise list calls until max_tokens


class ToolSchemaError(ValueError):
    """A keyword the grammar cannot enforce. where: the field at fault, as an OpenAI body
    names it ("tools[2].function.parameters.properties.when"); keyword: the keyword."""

    def __init__(self, where: str, error: SchemaError) -> None:
        super().__init__(f"{where} uses {error.keyword!r}, which {error.reason}")
        self.where, self.keyword, self.error = where, error.keyword, error


def call_grammar(use: ToolUse) -> str:
    for i, tool in enumerate(use.tools):
        if tool in use.callable:  # checked one by one, so that the error names the tool
            _grammar(tool.parameters, f"tools[{i}].function.parameters")
    one = [_call_schema(t) for t in use.callable]
    call: dict = one[0] if len(one) == 1 else {"anyOf": one}
    schema = call
    if use.parallel and use.choice == "required":
        schema = {"anyOf": [call, {"type": "array", "items": call, "minItems": 1, "maxItems": MAX_PARALLEL}]}
    return _grammar(schema, "tools")


def _grammar(schema: dict, where: str) -> str:
    try:
        return schema_grammar(schema, compact=True)
    except SchemaError as exc:
        raise ToolSchemaError(where + exc.path, exc) from None


def _call_schema(tool: Tool) -> dict:
    return {"type": "object", "properties": {"name": {"const": tool.name}, "arguments": tool.parameters},
            "required": ["name", "arguments"]}
