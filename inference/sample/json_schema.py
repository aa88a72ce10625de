"""JSON Schema, Lark and GBNF as grammars (SamplingParams.grammar): output that follows the
grammar validates against the schema.

A grammar is llguidance's definition (a JSON text); llguidance's matcher turns it into a
token mask per step (grammar.py). Its JSON Schema compiler enforces what OpenAI's strict
mode documents (number bounds, multipleOf, pattern, the formats, minItems/maxItems,
recursive $ref, anyOf/oneOf...) and refuses by name what it cannot (`not`,
`dependentSchemas`...). Every grammar is checked here, without a tokenizer, with bounded
size and time (llguidance's fuel limits), so a request that cannot be enforced is refused
before it reaches the engine. Checking needs llguidance alone: the desktop process's server
calls this and never loads llama.cpp.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

import llguidance as lg

from inference.errors import SchemaError

if TYPE_CHECKING:
    from llguidance._lib import JsonCompileOptions  # in the stubs alone

# How JSON is written: no whitespace inside (a small model cannot pad it forever), ", "
# and ": " between items as people and models write JSON.
JSON_OPTIONS: JsonCompileOptions = {"whitespace_flexible": False, "item_separator": ", ", "key_separator": ": "}
# Values in all enums of one schema: a 20,000-value enum compiles in ~50 ms on this CPU, a
# 100,000-value one passes llguidance's lexer budget after ~0.3 s. Refused before either.
MAX_ENUM_VALUES = 10_000
# The limits every grammar compiles under (checked here, and again with the tokenizer in the
# engine): llguidance's defaults bound compile time (~20 ms of lexer fuel) and a step's mask.
LIMITS = lg.LLParserLimits(verbose_errors=False)


def schema_grammar(schema: Any) -> str:
    """The grammar of everything that validates against schema (a JSON Schema object)."""
    if not isinstance(schema, dict):
        raise SchemaError("schema", "", f"must be an object, got {type(schema).__name__}")
    _check_enum_size(schema)
    text = _json_text(closed(schema))
    try:
        grammar = lg.LLMatcher.grammar_from_json_schema(text, defaults=JSON_OPTIONS)
    except ValueError as exc:
        raise SchemaError("schema", "", f"is not valid JSON: {exc}") from None
    _check(grammar, schema)
    return grammar


def lark_grammar(lark: str, schemas: tuple[Any, ...] = ()) -> str:
    """A Lark grammar (llguidance's dialect: `%json {...}` embeds a JSON Schema) as a grammar;
    schemas: the JSON Schemas embedded in it, for naming a keyword at fault."""
    for schema in schemas:
        _check_enum_size(schema)
    grammar = lg.LLMatcher.grammar_from_lark(lark)
    _check(grammar, schemas[0] if len(schemas) == 1 else {"anyOf": list(schemas)} if schemas else None)
    return grammar


def gbnf_grammar(gbnf: str) -> str:
    """llama.cpp's GBNF (a rule named root) as a grammar."""
    try:
        grammar = lg.grammar_from("gbnf", gbnf)
    except ValueError as exc:
        raise SchemaError("grammar", "", f"does not parse as GBNF: {exc}") from None
    _check(grammar, None)
    return grammar


def lark_json(schema: Any) -> str:
    """A JSON Schema as a Lark grammar's right-hand side (`%json {...}`), written as
    schema_grammar writes JSON; SchemaError for what JSON cannot hold (a lone surrogate)."""
    if not isinstance(schema, dict):
        raise SchemaError("schema", "", f"must be an object, got {type(schema).__name__}")
    return "%json " + _json_text({**closed(schema), "x-guidance": JSON_OPTIONS})


def closed(schema: Any) -> Any:
    """schema with every object that lists its properties and says nothing of others closed
    to them (additionalProperties false), as llama.cpp's converter reads such a schema and
    OpenAI's strict mode requires it written: output then holds the fields the schema names,
    and a small model cannot wander off into fields of its own until max_tokens. A copy."""
    if not isinstance(schema, dict):
        return schema
    out = dict(schema)
    for key, value in schema.items():
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            out[key] = {name: closed(sub) for name, sub in value.items()}
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            out[key] = [closed(sub) for sub in value]
        elif key in _SCHEMAS:
            out[key] = closed(value)
    fields = out.get("properties")
    if isinstance(fields, dict) and not any(k in out for k in _OPEN_KEYWORDS):
        required = out.get("required")
        if not isinstance(required, list) or set(required) <= set(fields):  # else it could not be met
            out["additionalProperties"] = False
    return out


_SCHEMA_MAPS = ("properties", "$defs", "definitions", "patternProperties", "dependentSchemas")
_SCHEMA_LISTS = ("anyOf", "allOf", "oneOf", "prefixItems", "items")
_SCHEMAS = ("items", "additionalProperties", "not", "if", "then", "else", "contains", "propertyNames",
            "additionalItems", "unevaluatedItems", "unevaluatedProperties")
_OPEN_KEYWORDS = ("additionalProperties", "patternProperties", "unevaluatedProperties")


def lark_literal(text: str) -> str:
    """text as a Lark string literal."""
    return json.dumps(text, ensure_ascii=False)


def _json_text(value: Any) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False)
        text.encode("utf-8")  # a lone surrogate passes dumps and fails here
    except (ValueError, TypeError, UnicodeEncodeError) as exc:
        raise SchemaError("schema", "", f"cannot be written as JSON: {exc}") from None
    return text


def _check(grammar: str, schema: Any) -> None:
    error = lg.LLMatcher.validate_grammar(grammar, None, limits=LIMITS)
    if not error:
        return
    keyword, path = _culprit(error, schema)
    raise SchemaError(keyword, path, _reason(error))


_UNIMPLEMENTED = re.compile(r'Unimplemented keys: \["([^"]+)"')
_UNKNOWN_FORMAT = re.compile(r"Unknown format: (\S+)")
_TOO_BIG = re.compile(r"too big \(limit for this grammar: (\d+)\)")
_INVALID_TYPE = re.compile(r"Invalid type: (\S+)")
_REMOTE_REF = re.compile(r"Resource '([^']+)' is not present")


def _culprit(error: str, schema: Any) -> tuple[str, str]:
    """The keyword an error is about, and where in the schema it first occurs."""
    unimplemented = _UNIMPLEMENTED.search(error)
    if unimplemented:
        keyword = unimplemented.group(1)
        return keyword, _first_path(schema, lambda node: keyword in node) or ""
    unknown = _UNKNOWN_FORMAT.search(error)
    if unknown:
        fmt = unknown.group(1)
        return "format", _first_path(schema, lambda node: node.get("format") == fmt) or ""
    if "regex" in error:
        return "pattern", _first_path(schema, lambda node: "pattern" in node) or ""
    invalid_type = _INVALID_TYPE.search(error)
    if invalid_type:
        kind = invalid_type.group(1)
        return "type", _first_path(schema, lambda node: kind in _listed(node.get("type"))) or ""
    remote = _REMOTE_REF.search(error)
    if remote:
        return "$ref", _first_path(schema, lambda node: node.get("$ref") == remote.group(1)) or ""
    return ("schema" if schema is not None else "grammar"), ""


def _listed(value: Any) -> list:
    return value if isinstance(value, list) else [value]


def _reason(error: str) -> str:
    first = error.strip().splitlines()[0] if error.strip() else error
    if "Unimplemented keys" in first:
        return "is not supported: no grammar can enforce it"
    if _REMOTE_REF.search(first):
        return "must point inside the schema (#/...): nothing is fetched"
    too_big = _TOO_BIG.search(first)
    if too_big:
        return f"makes a grammar too large to enforce (llguidance's limit {int(too_big.group(1)):,})"
    return f"cannot be enforced: {' '.join(error.split())[:300]}"


def _check_enum_size(schema: Any) -> None:
    total = 0
    for path, node in _nodes(schema, ""):
        values = node.get("enum")
        if isinstance(values, list):
            total += len(values)
            if total > MAX_ENUM_VALUES:
                raise SchemaError("enum", path, f"brings the schema's enum values to {total:,}: at most "
                                                f"{MAX_ENUM_VALUES:,} can be enforced")


def _first_path(schema: Any, wanted: Any) -> str | None:
    return next((path for path, node in _nodes(schema, "") if wanted(node)), None)


def _nodes(node: Any, path: str) -> Any:
    """Every subschema (a dict) with its path, depth first; bounded by the body's size."""
    stack = [(path, node)]
    while stack:
        where, item = stack.pop()
        if isinstance(item, list):
            stack.extend((f"{where}[{i}]", sub) for i, sub in reversed(list(enumerate(item))))
        elif isinstance(item, dict):
            yield where, item
            for key, sub in reversed(list(item.items())):
                if key not in ("enum", "const", "default", "examples") and isinstance(sub, (dict, list)):
                    stack.append((f"{where}.{key}", sub))
