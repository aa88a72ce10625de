"""messages.tool_json (revision 0008): the calls of an assistant turn that called tools, or
what a "tool" message answers, as one JSON object, read back into records."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict

from storage.records import ToolCallRecord, ToolResultRecord


def tool_to_json(calls: Sequence[ToolCallRecord], result: ToolResultRecord | None) -> str | None:
    if calls:
        return json.dumps({"calls": [asdict(c) for c in calls]})
    if result is not None:
        # "cancelled" only where true (a stopped call): other results read as before it came
        fields = {k: v for k, v in asdict(result).items() if k != "cancelled" or v}
        return json.dumps({"result": fields})
    return None


def tool_from_json(raw: str | None) -> tuple[tuple[ToolCallRecord, ...], ToolResultRecord | None]:
    if not raw:
        return (), None
    value = json.loads(raw)
    calls = tuple(ToolCallRecord(**c) for c in value.get("calls", ()))
    result = value.get("result")
    return calls, (ToolResultRecord(**result) if result else None)


def tool_json_of_file(value: object) -> str | None:
    """A chat file message's "tool" field (tool_json's own object) checked and written as
    tool_json; ValueError saying what is wrong."""
    if value is None:
        return None
    if not isinstance(value, dict) or len(value) != 1 or not ({"calls", "result"} & value.keys()):
        raise ValueError('must be {"calls": [...]} or {"result": {...}}')
    try:
        if "calls" in value:
            if not isinstance(value["calls"], list):
                raise TypeError
            calls = [ToolCallRecord(**c) for c in value["calls"]]
            if not all(isinstance(getattr(c, k), str) for c in calls for k in ("id", "name", "arguments")):
                raise TypeError
            return tool_to_json(calls, None)
        result = ToolResultRecord(**value["result"])
    except TypeError:
        raise ValueError("has calls or a result of the wrong shape") from None
    if not (isinstance(result.call_id, str) and isinstance(result.name, str)):
        raise ValueError("result's call_id and name must be text")
    return tool_to_json((), result)
