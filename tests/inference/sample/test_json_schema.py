"""A JSON Schema as a GBNF grammar (inference/sample/json_schema.py): every keyword the
converter would quietly ignore is refused by name, integer ranges become enums, and the
conversion does not load llama.cpp's library. No model."""

from __future__ import annotations

import subprocess
import sys

import pytest

from inference import SchemaError, schema_grammar


@pytest.mark.parametrize(("schema", "keyword", "path"), [
    ({"type": "object", "properties": {"a": {"type": "string", "format": "email"}}}, "format", ".properties.a"),
    ({"type": "number", "minimum": 0}, "minimum", ""),
    ({"type": "integer", "minimum": 0}, "minimum", ""),  # open above: no finite enum
    ({"type": "integer", "minimum": 0, "maximum": 1000}, "minimum", ""),  # more than MAX_RANGE values
    ({"oneOf": [{"type": "string"}, {"type": "integer"}]}, "oneOf", ""),  # exclusivity is not enforced
    ({"type": "array", "items": {"not": {}}}, "not", ".items"),
    ({"type": "object", "patternProperties": {"^a": {}}}, "patternProperties", ""),
    ({"$ref": "https://example.com/s.json"}, "$ref", ""),
    ({"type": "object", "properties": {"a": True}}, "true/false schema", ".properties.a"),
    ({"type": "decimal"}, "type", ""),
])
def test_what_the_grammar_cannot_enforce_is_refused_by_name(schema, keyword, path):
    with pytest.raises(SchemaError) as caught:
        schema_grammar(schema)
    assert (caught.value.keyword, caught.value.path) == (keyword, path)


def test_an_integer_range_becomes_its_values():
    grammar = schema_grammar({"type": "integer", "exclusiveMinimum": 2, "maximum": 5})
    root = next(line for line in grammar.splitlines() if line.startswith("root ::="))
    assert root == 'root ::= "3" | "4" | "5"'


def test_annotations_pass_and_constrain_nothing():
    described = {"type": "object", "title": "T", "description": "d", "properties": {"a": {"type": "string",
                                                                                          "examples": ["x"]}}}
    plain = {"type": "object", "properties": {"a": {"type": "string"}}}
    assert schema_grammar(described) == schema_grammar(plain)


def test_the_conversion_leaves_llama_cpp_unloaded():
    """The desktop process's server converts schemas too, and never loads llama.cpp."""
    code = ("import sys; from inference import schema_grammar; schema_grammar({'enum': [1, 2]}); "
            "print(any(m == 'llama_cpp' or m.startswith('llama_cpp.') for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
