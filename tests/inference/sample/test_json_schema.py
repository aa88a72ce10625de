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
from tests.support.grammar_match import EXTRA_FIELDS, grammar_takes

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
    ({"type": "object", "properties": {"a": {"type": "string", "format": "regex"}}}, "format", ".properties.a"),
    ({"type": "object", "properties": {"a": {"oneOf": [{"required": ["b"]}, {"properties": {"c": {}}}]}}},
     "oneOf", ".properties.a"),  # {"b": 1} is both
    ({"type": "object", "dependencies": {"a": {"required": ["b"]}}}, "dependencies", ""),  # a schema's kind
    ({"type": "string", "pattern": "(?<=a)b"}, "pattern", ""),
    ({"$ref": "https://example.com/s.json"}, "$ref", ""),
    ({"anyOf": [{"type": "string"}, {"type": "decimal"}]}, "type", ".anyOf[1]"),
    ({"enum": ["\ud800"]}, "schema", ""),  # a lone surrogate: not JSON
    # names held to two patterns at once, or beside patternProperties: llguidance takes one pattern a name
    ({"type": "object", "propertyNames": {"pattern": "^a", "maxLength": 3}}, "propertyNames", ""),
    ({"type": "object", "patternProperties": {"^x": {}}, "propertyNames": {"maxLength": 3}}, "propertyNames", ""),
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


def accepts(schema: dict, text: str) -> bool:
    """Whether the schema's grammar lets a reply be exactly text."""
    return grammar_takes(schema_grammar(schema), text)


AREA = {"type": "object", "properties": {"base": {"type": "number"}, "height": {"type": "number"},
                                         "length": {"type": "number"}, "width": {"type": "number"}}}


@pytest.mark.parametrize(("schema", "allowed", "refused"), [
    # `dependencies` (draft 4-7) and `dependentRequired` as lists: b whenever a (JSONSchemaBench's Github sets)
    ({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
      "dependencies": {"a": ["b"]}},
     ['{"a": 1, "b": 2}', '{"b": 2}', "{}"], ['{"a": 1}']),
    ({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}, "c": {"type": "integer"}},
      "dependentRequired": {"a": ["b", "c"], "b": ["a"]}},
     ['{"a": 1, "b": 2, "c": 3}', '{"c": 3}'], ['{"a": 1, "b": 2}', '{"b": 2, "c": 3}']),
    # `not` of `required` alone: not both (GlaiveAI's shapes)
    ({**AREA, "not": {"required": ["base", "height"]}}, ['{"base": 1}', '{"height": 2, "width": 3}'],
     ['{"base": 1, "height": 2}', '"x"']),
    # a oneOf of `required`s (no type in its branches: any string is valid against both, so none passes oneOf)
    ({**AREA, "oneOf": [{"required": ["length", "width"], "not": {"required": ["base", "height"]}},
                        {"required": ["base", "height"], "not": {"required": ["length", "width"]}}]},
     ['{"length": 1, "width": 2}', '{"base": 1, "height": 2, "width": 3}'],
     ['{"length": 1}', '{"base": 1, "height": 2, "length": 3, "width": 4}']),
    ({"type": "array", "items": {"oneOf": [
        {"properties": {"kind": {"enum": ["a"]}, "x": {"type": "integer"}}, "required": ["kind", "x"]},
        {"properties": {"kind": {"enum": ["b"]}}, "required": ["kind"]}]}},  # Snowplow's errors
     ['[{"kind": "a", "x": 1}, {"kind": "b"}]'], ['["a"]', "[1]", '[{"kind": "a"}]']),
    # a oneOf of objects told apart by what each requires (GlaiveAI's shapes, Snowplow's credentials):
    # each branch also lacks one of what each other requires
    ({"type": "object", "properties": {k: {"type": "number"} for k in ("radius", "length", "width", "base", "height")},
      "oneOf": [{"required": ["radius"]}, {"required": ["length", "width"]}, {"required": ["base", "height"]}]},
     ['{"radius": 1}', '{"length": 1, "width": 2}', '{"radius": 1, "length": 2}',
      '{"width": 3, "base": 1, "height": 2}'],
     ["{}", '{"radius": 1, "length": 1, "width": 2}', '{"length": 1}', '"x"']),
    ({"oneOf": [{"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]},
                {"type": "object", "properties": {"key": {"type": "string"}, "role": {"type": "string"}},
                 "required": ["role"]},
                {"type": "null"}]},
     ['{"key": "k"}', '{"role": "r"}', "null"], ['{"key": "k", "role": "r"}', "{}"]),
    # dependencies on properties a closed object does not list: the property is absent
    ({"type": "object", "properties": {"base": {"type": "number"}, "radius": {"type": "number"}},
      "dependencies": {"base": ["triangle"], "radius": ["circle"]}},
     ["{}"], ['{"base": 1}', '{"radius": 1}']),
    # propertyNames as one pattern every name matches (JSONSchemaBench's maps): a pattern, a length, a list
    ({"type": "object", "propertyNames": {"pattern": "^[a-z]+$"}, "additionalProperties": {"type": "integer"}},
     ['{"ab": 1}', "{}"], ['{"Ab": 1}', '{"ab": "x"}']),
    ({"type": "object", "propertyNames": {"minLength": 2, "maxLength": 3}, "additionalProperties": {"type": "null"}},
     ['{"ab": null}', '{"abc": null}'], ['{"a": null}', '{"abcd": null}', '{"ab": 1}']),
    ({"type": "object", "propertyNames": {"enum": ["a-b", "c.d", "x y"]}, "additionalProperties": {"type": "integer"}},
     ['{"a-b": 1, "c.d": 2, "x y": 3}'], ['{"cxd": 1}', '{"a": 1}']),
    # ... beside declared properties: a declared name it refuses cannot be there, the others keep their schemas
    ({"type": "object", "properties": {"id": {"type": "integer"}, "Bad": {"type": "integer"}},
      "propertyNames": {"pattern": "^[a-z]+$"}}, ['{"id": 1}'], ['{"Bad": 1}', '{"zz": 1}']),
    ({"type": ["object", "null"], "properties": {"a": {"type": "integer"}}, "propertyNames": {"maxLength": 3},
      "additionalProperties": {"type": "string"}},
     ["null", '{"a": 1}', '{"a": 1, "bb": "s"}'], ['{"a": "s"}', '{"bb": 1}', '{"bbbb": "s"}']),
    ({"type": "object", "propertyNames": False}, ["{}"], ['{"a": 1}']),
])
def test_keywords_written_another_way_are_enforced(schema, allowed, refused):
    """Each was a 400 before (llguidance has no `dependencies`, `dependentRequired`, `not` or
    `propertyNames`, and could not see that such oneOf branches exclude each other); now the
    same condition."""
    assert [text for text in allowed if not accepts(schema, text)] == []
    assert [text for text in refused if accepts(schema, text)] == []


def test_additional_properties_given_as_a_schema_hold_every_field_not_listed():
    """Once let through unenforced (the model wrote an object where only an array or null may
    go); checked here on the grammar itself, exactly, where a sampled model answer is not."""
    allowed = ['{"a": "x", "b": [1, 2]}', '{"a": "x", "b": null}', '{"a": "x"}']
    refused = ['{"a": "x", "b": {}}', '{"a": "x", "b": "s"}', '{"a": "x", "b": [1000]}',
               '{"a": "x", "b": [1], "c": null, "d": null}', '{"a": "x", "abcdefghi": null}']
    assert [text for text in allowed if not accepts(EXTRA_FIELDS, text)] == []
    assert [text for text in refused if accepts(EXTRA_FIELDS, text)] == []


@pytest.mark.parametrize(("fmt", "allowed", "refused"), [
    ("idn-email", ['"a@example.com"'], ['"a"']),  # as email: fewer strings, all of them valid
    ("uri-reference", ['"https://example.com/a"'], ['"not a uri"']),
    ("iri", ['"https://example.com/a"'], ['"not a uri"']),
    ("json-pointer", ['""', '"/a/b~1c"'], ['"a"', '"/a~2"']),
    ("relative-json-pointer", ['"0"', '"1/a"', '"2#"'], ['"/a"', '"01"']),
    ("byte", ['""', '"aGk="', '"aGVsbG8="'], ['"aGk"', '"a=b="']),  # OpenAPI's base64
    ("date", ['"2024-02-29"', '"2000-02-29"', '"2023-04-30"'],  # llguidance's own took 2023-02-29
     ['"2023-02-29"', '"1900-02-29"', '"2023-04-31"', '"0000-01-01"', '"2023-1-01"']),
    ("date-time", ['"2024-02-29T10:00:00Z"', '"2023-01-31t23:59:59.5+02:00"'],
     ['"2023-02-29T10:00:00Z"', '"2024-02-29T24:00:00Z"', '"2024-02-29T10:00:00"']),
    ("color", ['"red"', '"anything"'], []),  # not a format JSON Schema defines: an annotation
    ("int64", ['"12"'], []),
])
def test_formats_llguidance_lacks_are_enforced_or_read_as_annotations(fmt, allowed, refused):
    schema = {"type": "string", "format": fmt}
    assert [text for text in allowed if not accepts(schema, text)] == []
    assert [text for text in refused if accepts(schema, text)] == []


@pytest.mark.parametrize(("schema", "allowed", "refused"), [
    ({"type": "number"}, ["1.5", "0." + "1" * 10, "-" + "9" * 16, "0", "70.99"], ["0." + "0" * 11, "1" * 17, "1e5"]),
    ({"type": "integer"}, ["0", "-" + "9" * 16, "42"], ["1" * 17]),
    ({"type": ["integer", "null"]}, ["null", "5"], ["1" * 17]),
    ({"type": "number", "minimum": 0}, ["0.5", "3"], ["-1", "1" * 17]),  # the open side bounded
    ({"type": "number", "exclusiveMinimum": 0, "maximum": 1}, ["0.5", "1"], ["0", "1.5"]),
    ({"type": "integer", "minimum": 10**17}, [str(10**17)], ["5"]),  # past our bound: the schema's
    ({"type": "number", "multipleOf": 0.5}, ["1.5"], ["1.25"]),
    # inside a oneOf branch nothing narrows: a longer integer matches the first branch alone
    ({"oneOf": [{"type": "integer"}, {"type": "string"}]}, ["1" * 17], []),
])
def test_numbers_have_bounded_digits(schema, allowed, refused):
    """Unbounded, SmolLM2 wrote `0.0000...` or `1234567890123...` until max_tokens in 3 of 60
    JSONSchemaBench schemas; llama.cpp's converter bounds digits the same way."""
    assert [text for text in allowed if not accepts(schema, text)] == []
    assert [text for text in refused if accepts(schema, text)] == []


def test_a_format_beside_a_pattern_keeps_both():
    schema = {"type": "string", "format": "byte", "pattern": "^a"}
    assert accepts(schema, '"aGk="') and not accepts(schema, '"bGk="') and not accepts(schema, '"aGk"')


def test_too_many_dependencies_stay_refused_by_name():
    names = [f"p{i}" for i in range(6)]
    schema = {"type": "object", "properties": {n: {"type": "integer"} for n in names},
              "dependencies": {n: ["p5"] for n in names[:5]}}
    with pytest.raises(SchemaError) as caught:
        schema_grammar(schema)
    assert caught.value.keyword == "dependencies"


def test_a_dependency_already_met_costs_nothing():
    schema = {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
              "required": ["b"], "dependencies": {"a": ["b"]}}
    assert accepts(schema, '{"a": "x", "b": "y"}') and accepts(schema, '{"b": "y"}')


@pytest.mark.parametrize("schema", [
    # {"a": 1} matches both branches. Closing the first branch to its listed properties made
    # llguidance see them apart and take {"a": 1}: oneOf branches (and what they $ref) stay open.
    {"type": "object", "oneOf": [{"properties": {"a": {"type": "integer"}}, "required": ["a"]},
                                 {"properties": {"b": {"type": "integer"}}}]},
    {"type": "object", "oneOf": [{"$ref": "#/definitions/A"}, {"$ref": "#/definitions/B"}],
     "definitions": {"A": {"properties": {"a": {"type": "integer"}}, "required": ["a"]},
                     "B": {"properties": {"b": {"type": "integer"}}}}},
])
def test_a_oneOf_whose_branches_overlap_is_refused_not_closed_apart(schema):
    with pytest.raises(SchemaError) as caught:
        schema_grammar(schema)
    assert caught.value.keyword == "oneOf"


def test_a_oneOf_no_value_can_meet_is_refused():
    """Every key required above: each value matches both branches (GlaiveAI has such schemas)."""
    schema = {"type": "object", "properties": {k: {"type": "number"} for k in ("length", "width", "radius")},
              "required": ["length", "width", "radius"], "oneOf": [{"required": ["length", "width"]},
                                                                  {"required": ["radius"]}]}
    with pytest.raises(SchemaError, match="nsatisfiable"):
        schema_grammar(schema)


def test_json_may_be_pretty_printed_within_bounds_and_a_tool_call_is_one_line():
    """llama.cpp's whitespace rule: nothing, a space, or 1-2 line breaks and up to 20 spaces
    or tabs between tokens (SmolLM2 ended 29 of 60 JSONSchemaBench schemas valid so, 26 when
    held to one line); a tool call stays on one line, as models write them."""
    schema = {"type": "object", "properties": {"a": {"type": "array", "items": {"type": "integer"}}}}
    for text in ('{"a": [1, 2]}', '{"a":[1,2]}', '{\n  "a": [\n    1,\n    2\n  ]\n}', '{\n\t"a": []\n}'):
        assert accepts(schema, text), text
    for text in ('{\n\n\n"a": []}', '{\n' + " " * 21 + '"a": []}', '{  "a": []}'):
        assert not accepts(schema, text), text
    call = schema_grammar(schema, compact=True)
    assert grammar_takes(call, '{"a": [1, 2]}')
    assert not grammar_takes(call, '{\n"a": [1, 2]}'), "a tool call's JSON has no line breaks"
