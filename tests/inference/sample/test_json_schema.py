"""JSON Schema as a grammar (inference/sample/json_schema.py, llguidance): what OpenAI's strict
mode documents compiles; what no grammar can enforce is refused by keyword and place; the
schemas that once crashed or stalled the server compile in bounded time or are refused
naming the limit; nothing here loads llama.cpp's library. No model."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from inference import SchemaError, lark_grammar, lark_json, schema_grammar

STRICT_MODE = [  # every keyword OpenAI's strict mode documents
    {"type": "integer", "minimum": 0},
    {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1.5, "multipleOf": 0.25},
    {"type": "string", "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}$"},
    *({"type": "string", "format": f} for f in ("date-time", "time", "date", "duration", "email", "hostname",
                                                  "ipv4", "ipv6", "uuid")),
    {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 5},
    {"$ref": "#/$defs/node", "$defs": {"node": {"type": "object", "properties": {
        "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}}, "required": ["children"]}}},
    {"anyOf": [{"type": "string"}, {"type": "null"}]},
    {"type": "object", "additionalProperties": {"type": ["array", "null"]}},
]


@pytest.mark.parametrize("schema", STRICT_MODE)
def test_what_strict_mode_documents_is_enforced(schema):
    assert schema_grammar(schema)


@pytest.mark.parametrize(("schema", "keyword", "path"), [
    ({"type": "array", "items": {"not": {}}}, "not", ".items"),
    ({"type": "object", "properties": {"a": {"dependentSchemas": {"b": {}}}}}, "dependentSchemas", ".properties.a"),
    ({"type": "array", "uniqueItems": True}, "uniqueItems", ""),
    ({"type": "object", "properties": {"a": {"type": "string", "format": "color"}}}, "format", ".properties.a"),
    ({"type": "string", "pattern": "(?<=a)b"}, "pattern", ""),
    ({"$ref": "https://example.com/s.json"}, "$ref", ""),
    ({"anyOf": [{"type": "string"}, {"type": "decimal"}]}, "type", ".anyOf[1]"),
    ({"enum": ["\ud800"]}, "schema", ""),  # a lone surrogate: not JSON
])
def test_what_no_grammar_can_enforce_is_refused_by_name(schema, keyword, path):
    with pytest.raises(SchemaError) as caught:
        schema_grammar(schema)
    assert (caught.value.keyword, caught.value.path) == (keyword, path)


@pytest.mark.parametrize("schema", [  # each once killed or stalled `chorus serve` (issue 38)
    {"type": "string", "maxLength": 100_000},
    {"type": "array", "items": {"type": "integer"}, "maxItems": 100_000},
    {"type": "string", "pattern": "^a{0,100000}$"},
    {"type": "string", "minLength": 10**9},
    {"type": "array", "items": {"type": "integer"}, "minItems": 10**7},
])
def test_huge_bounds_compile_at_once(schema):
    started = time.perf_counter()
    schema_grammar(schema)
    assert time.perf_counter() - started < 2.0  # milliseconds here; the old converter segfaulted or ran out of RAM


def test_a_huge_enum_is_refused_naming_the_limit_before_compiling():
    schema = {"type": "object", "properties": {"code": {"enum": [f"v{i}" for i in range(100_000)]}}}
    started = time.perf_counter()
    with pytest.raises(SchemaError) as caught:
        schema_grammar(schema)
    assert (caught.value.keyword, caught.value.path) == ("enum", ".properties.code")
    assert "10,000" in str(caught.value)
    assert time.perf_counter() - started < 1.0


def test_annotations_constrain_nothing():
    described = {"type": "object", "title": "T", "description": "d",
                 "properties": {"a": {"type": "string", "examples": ["x"]}}}
    assert schema_grammar(described)


def test_a_lark_grammar_embeds_a_schema_and_names_its_faults():
    schema = {"type": "object", "properties": {"x": {"not": {}}}}
    with pytest.raises(SchemaError) as caught:
        lark_grammar(f'start: "<call>" c "</call>"\nc: {lark_json(schema)}', (schema,))
    assert (caught.value.keyword, caught.value.path) == ("not", ".properties.x")
    assert lark_grammar(f'start: "<call>" c\nc: {lark_json({"type": "integer"})}')


def test_the_conversion_leaves_llama_cpp_unloaded():
    """The desktop process's server converts schemas too, and never loads llama.cpp."""
    code = ("import sys; from inference import schema_grammar; schema_grammar({'enum': [1, 2]}); "
            "print(any(m == 'llama_cpp' or m.startswith('llama_cpp.') for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
