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
from inference.sample.annotations import ANNOTATIONS, is_annotation
from inference.sample.property_names import property_names_condition

if TYPE_CHECKING:
    from llguidance._lib import JsonCompileOptions  # in the stubs alone

# How JSON may be written: between its tokens nothing, a space, or one or two line breaks
# and at most 20 spaces or tabs (llama.cpp's converter allows exactly this): bounded, so a
# small model cannot pad forever, and free enough for the pretty-printed JSON models learnt.
# Against the compact form (", " and ": " only) on 60 JSONSchemaBench schemas, SmolLM2 ended
# 29 valid instead of 26 (4 gained, 1 lost; docs/benchmarks.md).
JSON_WHITESPACE = r"(?: |\n{1,2}[ \t]{0,20})?"
JSON_OPTIONS: JsonCompileOptions = {"whitespace_flexible": True, "whitespace_pattern": JSON_WHITESPACE}
# A tool call as models are trained to write one, on one line: every token of it is latency
# before the call runs (SmolLM2's forced calls grew past 24 tokens with line breaks).
COMPACT_JSON: JsonCompileOptions = {"whitespace_flexible": False, "item_separator": ", ", "key_separator": ": "}
# Values in all enums of one schema: a 20,000-value enum compiles in ~50 ms on this CPU, a
# 100,000-value one passes llguidance's lexer budget after ~0.3 s. Refused before either.
MAX_ENUM_VALUES = 10_000
# The limits every grammar compiles under (checked here, and again with the tokenizer in the
# engine): llguidance's defaults bound compile time (~20 ms of lexer fuel) and a step's mask.
LIMITS = lg.LLParserLimits(verbose_errors=False)


def schema_grammar(schema: Any, compact: bool = False) -> str:
    """The grammar of everything that validates against schema (a JSON Schema object);
    compact: written on one line (a tool call), else with JSON_OPTIONS' whitespace."""
    if not isinstance(schema, dict):
        raise SchemaError("schema", "", f"must be an object, got {type(schema).__name__}")
    _check_enum_size(schema)
    text = _json_text(closed(schema))
    try:
        grammar = lg.LLMatcher.grammar_from_json_schema(text, defaults=COMPACT_JSON if compact else JSON_OPTIONS)
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
    """A JSON Schema as a Lark grammar's right-hand side (`%json {...}`), written on one line
    as a tool call's arguments are; SchemaError for what JSON cannot hold (a lone surrogate)."""
    if not isinstance(schema, dict):
        raise SchemaError("schema", "", f"must be an object, got {type(schema).__name__}")
    return "%json " + _json_text({**closed(schema), "x-guidance": COMPACT_JSON})


def closed(schema: Any) -> Any:
    """schema as llguidance is given it, a copy with the same instances (or, where said, fewer,
    all of them valid):

    * every object that lists its properties and says nothing of others closed to them
      (additionalProperties false), as llama.cpp's converter reads such a schema and OpenAI's
      strict mode requires it written: output then holds the fields the schema names, and a
      small model cannot wander off into fields of its own until max_tokens;
    * `format`: one llguidance knows is kept; a standard one it does not know becomes one it
      does whose strings all have the format (`idn-email` as `email`, `uri-reference` and
      the IRIs as `uri`: fewer instances, all valid) or a pattern (`json-pointer`,
      `relative-json-pointer`, OpenAPI's `byte` as base64); any other is an annotation, as
      JSON Schema reads a format a validator does not know, and constrains nothing;
    * `oneOf` whose branches all constrain one kind of value and say nothing of its type
      (`{"oneOf": [{"required": ["a"]}, {"required": ["b"]}]}`) gets that type in each branch:
      any other value validates against every branch, so oneOf rejects it anyway, and
      llguidance can then see the branches exclude each other;
    * `dependencies` (draft 4-7) and `dependentRequired` given as lists, and a `not` of
      `required` alone, become the same condition written with `anyOf`;
    * `propertyNames` becomes the one pattern every name must match (property_names.py);
    * a number or integer has at most MAX_DIGITS digits before its point and a number at
      most MAX_FRACTION_DIGITS after it (no exponent), as llama.cpp's converter writes them:
      unbounded, a small model writes `0.000000...` or `123456789012...` until max_tokens.

    What narrows (closing, the number bounds) is left out of a oneOf branch and a `not`.
    """
    kept_open = _kept_open(schema)
    return _rewritten(schema, kept_open is not None, kept_open or frozenset(), True)


def _rewritten(schema: Any, close: bool, kept_open: frozenset[str], top: bool) -> Any:
    if not isinstance(schema, dict):
        return schema
    out = dict(schema)
    for key, value in schema.items():
        # Closing a oneOf branch (or a `not`) is no narrowing: a value the closed branch
        # takes may match another branch too, which oneOf then rejects.
        inner = close and key not in ("oneOf", "not")
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            out[key] = {name: _rewritten(sub, inner and not (top and f"#/{key}/{name}" in kept_open), kept_open, False)
                        for name, sub in value.items()}
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            out[key] = [_rewritten(sub, inner, kept_open, False) for sub in value]
        elif key in _SCHEMAS:
            out[key] = _rewritten(value, inner, kept_open, False)
    fields = out.get("properties")
    if close and isinstance(fields, dict) and not any(k in out for k in _OPEN_KEYWORDS):
        required = out.get("required")
        if not isinstance(required, list) or set(required) <= set(fields):  # else it could not be met
            out["additionalProperties"] = False
    _property_names_as_patterns(out)
    _format(out)
    if close:
        _bounded_numbers(out)
    _typed_branches(out)
    _exclusive_branches(out)
    _dependencies_as_any_of(out)
    _not_required_as_any_of(out)
    return out


def _kept_open(schema: dict) -> frozenset[str] | None:
    """The definitions (`#/$defs/x`, `#/definitions/x`) a oneOf branch or a `not` reaches by
    $ref, directly or through others: left open like the branch. None where such a $ref
    points anywhere else (the whole schema is then left open)."""
    refs: set[str] = set()
    pending = [sub for _, node in _nodes(schema, "") for key in ("oneOf", "not") if key in node
               for sub in _listed(node[key])]
    while pending:
        for _, node in _nodes(pending.pop(), ""):
            ref = node.get("$ref")
            if not isinstance(ref, str) or ref in refs:
                continue
            parts = ref.split("/")
            if not ref.startswith("#"):
                continue  # outside the schema: llguidance refuses it
            if len(parts) != 3 or parts[1] not in ("$defs", "definitions"):
                return None
            refs.add(ref)
            target = schema.get(parts[1])
            if isinstance(target, dict) and parts[2] in target:
                pending.append(target[parts[2]])
    return frozenset(refs)


_SCHEMA_MAPS = ("properties", "$defs", "definitions", "patternProperties", "dependentSchemas")
_SCHEMA_LISTS = ("anyOf", "allOf", "oneOf", "prefixItems", "items")
_SCHEMAS = ("items", "additionalProperties", "not", "if", "then", "else", "contains", "propertyNames",
            "additionalItems", "unevaluatedItems", "unevaluatedProperties")
_OPEN_KEYWORDS = ("additionalProperties", "patternProperties", "unevaluatedProperties")

# The formats llguidance enforces ("unknown": any string); its date and date-time (which take
# 2023-02-29 for a date) are replaced by _DATE below.
_FORMATS = frozenset(("time", "duration", "email", "hostname", "ipv4", "ipv6", "uuid", "uri", "unknown"))
# A calendar date, years 0001-9999 (no 29 February outside leap years, no 31 April): what
# Python's date.fromisoformat takes, checked against it for every year, month and day.
_YEAR = r"([1-9][0-9]{3}|0[1-9][0-9]{2}|00[1-9][0-9]|000[1-9])"
_LEAP_YEAR = r"([0-9]{2}(0[48]|[2468][048]|[13579][26])|(0[48]|[2468][048]|[13579][26])00)"
_DATE = (rf"({_YEAR}-((0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])|(0[469]|11)-(0[1-9]|[12][0-9]|30)"
         rf"|02-(0[1-9]|1[0-9]|2[0-8]))|{_LEAP_YEAR}-02-29)")
# RFC 3339's time of day with its offset, without the leap second 60 (Python's datetime has none).
_TIME = r"([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]+)?([Zz]|[+-]([01][0-9]|2[0-3]):[0-5][0-9])"
# Standard formats llguidance does not know, as one it does whose every string has them.
_FORMAT_AS = {"idn-email": "email", "idn-hostname": "hostname", "uri-reference": "uri", "iri": "uri",
              "iri-reference": "uri"}
# ... or as a pattern (whole strings).
_FORMAT_PATTERNS = {
    "date": rf"^{_DATE}$",
    "date-time": rf"^{_DATE}[Tt]{_TIME}$",
    "json-pointer": r"^(/([^~/]|~[01])*)*$",
    "relative-json-pointer": r"^(0|[1-9][0-9]*)(#|(/([^~/]|~[01])*)*)$",
    "byte": r"^([A-Za-z0-9+/]{4})*([A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$",  # OpenAPI's base64
}
# Formats a validator checks that no rewrite above stands for: left to llguidance, which
# refuses them by name.
_CHECKED_FORMATS = frozenset(("regex", "uri-template"))


# The digits a number may have before its point, and after it (the multipleOf below).
MAX_DIGITS = 16
MAX_FRACTION_DIGITS = 10
_LARGEST = 10**MAX_DIGITS - 1


def _bounded_numbers(node: dict) -> None:
    """Bound a number's or integer's digits where the schema leaves them open (see closed()).
    A side the schema bounds already keeps its own bound; one past ours is left alone."""
    kinds = set(_listed(node.get("type")))
    if not kinds & {"number", "integer"}:
        return
    low = node.get("minimum", node.get("exclusiveMinimum"))
    high = node.get("maximum", node.get("exclusiveMaximum"))
    if not all(bound is None or _is_number(bound) for bound in (low, high)):
        return
    if low is None and (high is None or high > -_LARGEST):
        node["minimum"] = -_LARGEST
    if high is None and (low is None or low < _LARGEST):
        node["maximum"] = _LARGEST
    if "number" in kinds and "multipleOf" not in node:
        node["multipleOf"] = 10.0**-MAX_FRACTION_DIGITS


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _format(node: dict) -> None:
    fmt = node.get("format")
    if not isinstance(fmt, str) or fmt in _FORMATS or fmt in _CHECKED_FORMATS:
        return
    if fmt in _FORMAT_AS:
        node["format"] = _FORMAT_AS[fmt]
        return
    del node["format"]
    pattern = _FORMAT_PATTERNS.get(fmt)
    if pattern is not None:
        _also(node, {"pattern": pattern})


def _also(node: dict, condition: dict) -> None:
    """node required to meet condition too (allOf)."""
    existing = node.get("allOf")
    node["allOf"] = [*(existing if isinstance(existing, list) else []), condition]


# The kind of value each keyword constrains (every other value passes it).
_KINDS = {
    **dict.fromkeys(("properties", "required", "additionalProperties", "patternProperties", "minProperties",
                     "maxProperties", "propertyNames", "dependencies", "dependentRequired",
                     "dependentSchemas", "unevaluatedProperties"), "object"),
    **dict.fromkeys(("items", "prefixItems", "additionalItems", "minItems", "maxItems", "uniqueItems",
                     "contains", "minContains", "maxContains", "unevaluatedItems"), "array"),
    **dict.fromkeys(("pattern", "format", "minLength", "maxLength"), "string"),
    **dict.fromkeys(("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"), "number"),
}


def _typed_branches(node: dict) -> None:
    branches = node.get("oneOf")
    if not isinstance(branches, list) or len(branches) < 2:
        return
    kinds = {_only_kind(branch) for branch in branches}
    if len(kinds) == 1 and None not in kinds:
        kind = kinds.pop()
        node["oneOf"] = [{**branch, "type": kind} for branch in branches]


# At most this many alternatives for one oneOf branch made exclusive (a product of choices).
MAX_EXCLUSIVE_ALTERNATIVES = 64


def _exclusive_branches(node: dict) -> None:
    """A oneOf of objects told apart by the properties each requires ({"oneOf": [{"type":
    "object", "required": ["radius"]}, {"type": "object", "required": ["length", "width"]}]})
    as an anyOf whose branch i also lacks one of the properties each other object branch
    requires: a value it takes matches branch i and no other, so oneOf holds (fewer values:
    an object with radius, length and width, which oneOf rejects anyway, and those that
    would fail the other branch for another reason). Branches of types apart from each other
    need nothing. Left to llguidance (which refuses what it cannot see is exclusive) when a
    branch has no type, or an object branch that another could match requires nothing."""
    branches = node.get("oneOf")
    if not isinstance(branches, list) or len(branches) < 2 or not all(isinstance(b, dict) for b in branches):
        return
    maybe_types = [_types(branch) for branch in branches]
    types = [t for t in maybe_types if t is not None]
    if len(types) != len(branches):
        return
    out = []
    for i, branch in enumerate(branches):
        lacking: list[list[str]] = []  # for each other object branch, the names one of which is absent
        for j, other in enumerate(branches):
            if i == j or not _overlap(types[i], types[j]) or _told_apart(branch, other):
                continue
            required = other.get("required")
            if types[i] != {"object"} or not isinstance(required, list) or not required:
                return  # branch i might take a value of branch j: no simple exclusion
            mine = set(branch.get("required") or ()) if isinstance(branch.get("required"), list) else set()
            lacking.append([name for name in dict.fromkeys(required) if isinstance(name, str) and name not in mine])
        if any(not names for names in lacking):
            continue  # every value of branch i has all a branch j requires: left out
        if _product(len(names) for names in lacking) > MAX_EXCLUSIVE_ALTERNATIVES:
            return
        exclusive = dict(branch)
        for names in lacking:
            _also(exclusive, {"anyOf": [{"properties": {name: False}} for name in names]})
        out.append(exclusive)
    if not out:
        return  # no branch can hold alone: llguidance names the oneOf
    del node["oneOf"]
    _also(node, {"anyOf": out})


_TYPES = ("object", "array", "string", "number", "integer", "boolean", "null")


def _types(branch: dict) -> set[str] | None:
    kind = branch.get("type")
    kinds = set(_listed(kind)) if kind is not None else None
    if kinds is None or not kinds <= set(_TYPES):
        return None
    return kinds


def _overlap(a: set[str], b: set[str]) -> bool:
    widen = {"number": {"number", "integer"}, "integer": {"integer", "number"}}
    return any(widen.get(kind, {kind}) & b for kind in a)


def _told_apart(a: dict, b: dict) -> bool:
    """Whether a property both require has a const or enum in each with no value in common."""
    def values(branch: dict, name: str) -> set[str] | None:
        fields = branch.get("properties")
        sub = fields.get(name) if isinstance(fields, dict) else None
        if not isinstance(sub, dict):
            return None
        if "const" in sub:
            return {json.dumps(sub["const"], sort_keys=True)}
        enum = sub.get("enum")
        return {json.dumps(v, sort_keys=True) for v in enum} if isinstance(enum, list) else None

    both = set(_listed(a.get("required") or [])) & set(_listed(b.get("required") or []))
    for name in both:
        if not isinstance(name, str):
            continue
        mine, theirs = values(a, name), values(b, name)
        if mine is not None and theirs is not None and not mine & theirs:
            return True
    return False


def _product(values: Any) -> int:
    total = 1
    for value in values:
        total *= value
    return total


def _only_kind(branch: Any) -> str | None:
    """The one kind of value branch constrains, when it says nothing of the type (and does
    nothing else, so every value of another kind validates against it); else None."""
    if not isinstance(branch, dict):
        return None
    kinds = set()
    for key in branch:
        if key in _KINDS:
            kinds.add(_KINDS[key])
        elif not is_annotation(key):
            return None  # type, enum, const, $ref, a combinator...: not only one kind's
    return kinds.pop() if len(kinds) == 1 else None


# More conditions than this in one object (each doubles the alternatives) stay refused.
MAX_DEPENDENCIES = 4


def _dependencies_as_any_of(node: dict) -> None:
    """{"a": ["b"]}: when a is there, b is: either a is absent, or a and b both there."""
    for keyword in ("dependencies", "dependentRequired"):
        conditions = node.get(keyword)
        if not isinstance(conditions, dict) or not all(
                isinstance(names, list) and all(isinstance(n, str) for n in names) for names in conditions.values()):
            continue  # a schema among them (dependentSchemas' kind): left to llguidance, which refuses it
        required = set(node.get("required") or ()) if isinstance(node.get("required"), list) else set()
        wanted = {name: names for name, names in conditions.items() if not set(names) <= required}
        listed = node.get("properties")
        fields = set(listed) if isinstance(listed, dict) else set()
        # In a closed object a dependent it does not list cannot be there: then neither can name.
        absent = {name for name, names in wanted.items()
                  if node.get("additionalProperties") is False and not set(names) <= fields}
        if len(wanted) - len(absent) > MAX_DEPENDENCIES:
            continue
        del node[keyword]
        if absent:
            _also(node, {"properties": dict.fromkeys(sorted(absent), False)})
        for name, names in wanted.items():
            if name in absent:
                continue
            _also(node, {"anyOf": [{"properties": {name: False}},
                                   {"required": [name, *(n for n in names if n != name)]}]})


def _property_names_as_patterns(node: dict) -> None:
    condition = property_names_condition(node)
    if condition is None:
        return
    del node["propertyNames"]
    if condition:
        _also(node, condition)


def _not_required_as_any_of(node: dict) -> None:
    """{"not": {"required": ["a", "b"]}}: an object without a, or without b."""
    negated = node.get("not")
    if not isinstance(negated, dict) or set(negated) - ANNOTATIONS != {"required"}:
        return
    names = negated["required"]
    if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
        return
    del node["not"]
    _also(node, {"anyOf": [{"type": "object", "properties": {name: False}} for name in dict.fromkeys(names)]})


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


PROPERTY_NAMES_REFUSED = ("is enforced where it is one pattern every name matches (a pattern, a length range or "
                          "a list of names) on an object without patternProperties")


def _check(grammar: str, schema: Any) -> None:
    error = lg.LLMatcher.validate_grammar(grammar, None, limits=LIMITS)
    if not error:
        return
    keyword, path = _culprit(error, schema)
    raise SchemaError(keyword, path, PROPERTY_NAMES_REFUSED if keyword == "propertyNames" else _reason(error))


_UNIMPLEMENTED = re.compile(r'Unimplemented keys: \["([^"]+)"')
_UNKNOWN_FORMAT = re.compile(r"Unknown format: (\S+)")
_TOO_BIG = re.compile(r"too big \(limit for this grammar: (\d+)\)")
_INVALID_TYPE = re.compile(r"Invalid type: (\S+)")
_REMOTE_REF = re.compile(r"Resource '([^']+)' is not present")
_ONE_OF = "oneOf constraints are not supported"  # llguidance: it could not prove the branches disjoint


def _culprit(error: str, schema: Any) -> tuple[str, str]:
    """The keyword an error is about, and where in the schema it first occurs."""
    unimplemented = _UNIMPLEMENTED.search(error)
    if unimplemented:
        keyword = unimplemented.group(1)
        return keyword, _first_path(schema, lambda node: keyword in node) or ""
    if _ONE_OF in error:
        return "oneOf", _first_path(schema, lambda node: "oneOf" in node) or ""
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
    if _ONE_OF in first:
        return ("has branches one value might match more than one of: a oneOf is enforced where its "
                "branches exclude each other (different types, or a required property's different const "
                "or enum values); anyOf is enforced whatever the branches")
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
