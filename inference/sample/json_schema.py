"""A JSON Schema as a GBNF grammar (SamplingParams.grammar): output that follows the grammar
validates against the schema.

The conversion is llama-cpp-python's (llama_cpp/llama_grammar.py, a port of llama.cpp's
json-schema-to-grammar), the maintained converter of the engine's own grammar format. It
quietly ignores what it cannot express (a `minimum`, a `not`, a `format: email`), which would
let output through that fails the schema; so every keyword is checked first against those it
enforces, and any other is a SchemaError naming it. Annotations (title, description...)
constrain nothing and pass. One addition of ours: an integer range of up to MAX_RANGE values
becomes the enum of its values, which the converter does express.

Why not llguidance or xgrammar (both on PyPI): see docs/sampling.md#json-schema.
"""

from __future__ import annotations

import importlib.util
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from inference.errors import RequestError

MAX_RANGE = 256
TYPES = {"object", "array", "string", "number", "integer", "boolean", "null"}
FORMATS = {"date", "time", "date-time", "uuid", "uuid1", "uuid2", "uuid3", "uuid4", "uuid5"}
ANNOTATIONS = {"title", "description", "default", "examples", "$schema", "$id", "$comment", "deprecated",
               "readOnly", "writeOnly"}
ENFORCED = {"type", "properties", "required", "additionalProperties", "items", "prefixItems", "minItems",
            "maxItems", "enum", "const", "$ref", "$defs", "definitions", "anyOf", "allOf", "pattern",
            "format", "minLength", "maxLength"}
RANGE = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")


class SchemaError(RequestError):
    """A schema this converter cannot enforce. keyword: the one at fault; path: where it is
    in the schema, as JSON-pointer-like suffix ("" for the top, ".properties.age")."""

    def __init__(self, keyword: str, path: str, reason: str) -> None:
        super().__init__(f"{keyword} at {path or 'the top'} {reason}")
        self.keyword, self.path, self.reason = keyword, path, reason


def schema_grammar(schema: Any) -> str:
    """The GBNF grammar of everything that validates against schema (a JSON Schema object)."""
    checked = _checked(schema, "")
    try:
        return _converter()(json.dumps(checked))
    except (ValueError, AssertionError, KeyError, TypeError, RecursionError) as exc:
        raise SchemaError("schema", "", f"cannot be converted to a grammar: {exc}") from None


def _checked(node: Any, path: str) -> Any:
    """node with every subschema checked (and integer ranges as enums)."""
    if isinstance(node, bool):
        raise SchemaError("true/false schema", path, "is not supported; write {} or leave the property out")
    if not isinstance(node, dict):
        raise SchemaError("schema", path, f"must be an object, got {type(node).__name__}")
    for key in node:
        if key not in ENFORCED and key not in ANNOTATIONS and key not in RANGE:
            raise SchemaError(key, path, "is not supported by this server's JSON-schema grammar")
    out = {k: v for k, v in node.items() if k not in ANNOTATIONS}
    _check_scalars(out, path)
    if any(k in out for k in RANGE):
        out = _range_as_enum(out, path)
    for key in ("properties", "$defs", "definitions"):
        if key in out:
            out[key] = {name: _checked(sub, f"{path}.{key}.{name}") for name, sub in _mapping(out, key, path).items()}
    for key in ("anyOf", "allOf", "prefixItems"):
        if key in out:
            out[key] = [_checked(sub, f"{path}.{key}[{i}]") for i, sub in enumerate(_list(out, key, path))]
    if isinstance(out.get("items"), list):
        out["items"] = [_checked(sub, f"{path}.items[{i}]") for i, sub in enumerate(out["items"])]
    elif "items" in out:
        out["items"] = _checked(out["items"], f"{path}.items")
    if isinstance(out.get("additionalProperties"), dict):
        out["additionalProperties"] = _checked(out["additionalProperties"], f"{path}.additionalProperties")
    return out


def _check_scalars(node: dict, path: str) -> None:
    kinds = node.get("type")
    for kind in kinds if isinstance(kinds, list) else [kinds] if kinds is not None else []:
        if kind not in TYPES:
            raise SchemaError("type", path, f"must be one of {', '.join(sorted(TYPES))}, got {kind!r}")
    if "format" in node and node["format"] not in FORMATS:
        raise SchemaError("format", path, f"{node['format']!r} is not supported (only {', '.join(sorted(FORMATS))})")
    ref = node.get("$ref")
    if ref is not None and not (isinstance(ref, str) and ref.startswith("#/")):
        raise SchemaError("$ref", path, f"must point inside the schema (#/...), got {ref!r}")
    if "enum" in node and not (isinstance(node["enum"], list) and node["enum"]):
        raise SchemaError("enum", path, "must be a non-empty list")
    if "additionalProperties" in node and not isinstance(node["additionalProperties"], (bool, dict)):
        raise SchemaError("additionalProperties", path, "must be true, false or a schema")


def _range_as_enum(node: dict, path: str) -> dict:
    """An integer between bounds as the enum of its values: the converter has no ranges."""
    keyword = next(k for k in RANGE if k in node)
    if node.get("type") != "integer":
        raise SchemaError(keyword, path, "is supported on integers only (as a range of at most "
                                         f"{MAX_RANGE} values)")
    bounds = {k: node.pop(k) for k in RANGE if k in node}
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in bounds.values()):
        raise SchemaError(keyword, path, "must be a number")
    lows = [math.ceil(bounds["minimum"])] if "minimum" in bounds else []
    lows += [math.floor(bounds["exclusiveMinimum"]) + 1] if "exclusiveMinimum" in bounds else []
    highs = [math.floor(bounds["maximum"])] if "maximum" in bounds else []
    highs += [math.ceil(bounds["exclusiveMaximum"]) - 1] if "exclusiveMaximum" in bounds else []
    low, high = max(lows, default=None), min(highs, default=None)
    if low is None or high is None or high - low + 1 > MAX_RANGE:
        raise SchemaError(keyword, path, f"is supported only as a closed integer range of at most {MAX_RANGE} "
                                         "values (both a lower and an upper bound)")
    if high < low:
        raise SchemaError(keyword, path, "leaves no integer in the range")
    values = [v for v in range(low, high + 1) if v in node.get("enum", [v])]
    node.pop("type")
    node["enum"] = values
    return node


def _mapping(node: dict, key: str, path: str) -> dict:
    if not isinstance(node[key], dict):
        raise SchemaError(key, path, "must be an object")
    return node[key]


def _list(node: dict, key: str, path: str) -> list:
    if not isinstance(node[key], list) or not node[key]:
        raise SchemaError(key, path, "must be a non-empty list")
    return node[key]


_CONVERT: list[Callable[[str], str]] = []


def _converter() -> Callable[[str], str]:
    """llama_grammar.py loaded from its file, not as llama_cpp.llama_grammar: importing the
    package would load llama.cpp's library, and the desktop process, whose server may call
    this, never loads it (the module itself is pure Python)."""
    if not _CONVERT:
        spec = importlib.util.find_spec("llama_cpp")
        if spec is None or not spec.submodule_search_locations:
            raise RequestError("llama-cpp-python is not installed: no JSON-schema grammars")
        location = Path(next(iter(spec.submodule_search_locations))) / "llama_grammar.py"
        module_spec = importlib.util.spec_from_file_location("chorus_llama_grammar", location)
        assert module_spec is not None and module_spec.loader is not None
        module = importlib.util.module_from_spec(module_spec)
        module_spec.loader.exec_module(module)
        _CONVERT.append(module.json_schema_to_gbnf)
    return _CONVERT[0]
