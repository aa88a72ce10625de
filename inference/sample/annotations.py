"""The JSON Schema keywords that constrain nothing: read by the schema rewrites
(json_schema.py, property_names.py) to tell a schema that says one thing from one that says
more."""

from __future__ import annotations

ANNOTATIONS = frozenset(("title", "description", "default", "examples", "$comment", "deprecated", "readOnly",
                         "writeOnly", "$id", "id"))


def is_annotation(keyword: str) -> bool:
    """An annotation, or an extension (`x-...`), which validators ignore too."""
    return keyword in ANNOTATIONS or keyword.startswith("x-")
