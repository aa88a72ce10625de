"""`propertyNames` (which llguidance does not implement) written as keywords it does: the
names an object may use as the one pattern all its properties must match, a condition of its
own (`allOf`: `patternProperties` with nothing else allowed), which llguidance intersects with
the object's own properties, exactly. JSONSchemaBench's maps use it (`{"propertyNames":
{"pattern": "^[a-z]+$"}, "additionalProperties": {...}}`), and a bound on the names is what
keeps a sampled key from running to max_tokens.

Made only where it is exact and llguidance takes it: the names' schema says what one pattern
can (a pattern, a length range, or a list of names), and the object has no patternProperties
of its own (llguidance refuses two patterns a name could match both of). Anywhere else
propertyNames is left for llguidance, which refuses it by name.
"""

from __future__ import annotations

from typing import Any

from inference.sample.annotations import is_annotation

# Characters a Rust regex (llguidance's) reads as syntax outside a class.
_SYNTAX = frozenset("\\.^$|?*+()[]{}")


def property_names_condition(node: dict) -> dict | None:
    """What node's propertyNames says, as a condition to add to it (allOf) once propertyNames
    is dropped: {} where it says nothing; None where it stays (see above)."""
    names = node.get("propertyNames")
    if names is None or "patternProperties" in node:
        return None
    if names is True or names == {}:
        return {}
    if names is False:  # no name passes: only the empty object
        return {"maxProperties": 0}
    pattern = name_pattern(names)
    return None if pattern is None else {"patternProperties": {pattern: {}}, "additionalProperties": False}


def name_pattern(names: Any) -> str | None:
    """The pattern (searched, as JSON Schema's are) that takes exactly the names a
    propertyNames schema allows; None where it says more than one pattern can hold."""
    if not isinstance(names, dict):
        return None
    said = {k: v for k, v in names.items() if not is_annotation(k)}
    if said.get("type", "string") != "string":
        return None
    said.pop("type", None)
    if set(said) == {"pattern"}:
        return said["pattern"] if isinstance(said["pattern"], str) else None
    if set(said) in ({"enum"}, {"const"}):
        listed = said["enum"] if "enum" in said else [said["const"]]
        if not isinstance(listed, list):
            return None
        strings = [v for v in listed if isinstance(v, str)]
        return f"^(?:{'|'.join(literal(s) for s in strings)})$" if strings else None
    if said and set(said) <= {"minLength", "maxLength"}:
        low, high = said.get("minLength", 0), said.get("maxLength")
        if not _count(low) or not (high is None or _count(high)):
            return None
        return rf"^[\s\S]{{{low},{'' if high is None else high}}}$"
    return None


def literal(text: str) -> str:
    """text as a pattern that matches it literally."""
    return "".join(f"\\{c}" if c in _SYNTAX else c for c in text)


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
