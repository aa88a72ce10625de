"""An OpenAI embeddings body (already JSON), validated field by field: `input` as a string,
a list of strings, a list of token ids or a list of such lists (at most MAX_INPUTS);
`encoding_format` "float" (default) or "base64" (little-endian float32, what the official
client asks for and decodes); `dimensions` only as the model's own size, since a pooled
llama.cpp embedding cannot be shortened the way OpenAI's trained ones can. Unknown fields
(user) are ignored."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.server.calls.parsing import bad, integer, shown, valid_text

MAX_INPUTS = 2048  # OpenAI's limit on one request's inputs
FORMATS = ("float", "base64")


@dataclass(frozen=True)
class EmbeddingAsk:
    inputs: list[str | list[int]]
    base64: bool = False
    dimensions: int | None = None


def embedding_ask(body: dict, _cap: int | None) -> EmbeddingAsk:
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise bad("model", f"must be a string, got {shown(model)}")
    fmt = body.get("encoding_format", "float")
    if fmt not in FORMATS:
        raise bad("encoding_format", f"must be \"float\" or \"base64\", got {shown(fmt)}")
    return EmbeddingAsk(inputs_of(body.get("input")), fmt == "base64", integer(body, "dimensions", 1))


def inputs_of(value: Any) -> list[str | list[int]]:
    if isinstance(value, str):
        return [_text(value, "input")]
    if not isinstance(value, list) or not value:
        raise bad("input", f"must be a string, a list of strings or a list of token lists, got {shown(value)}")
    if all(_is_token(t) for t in value):
        return [list(value)]  # one input as token ids
    if len(value) > MAX_INPUTS:
        raise bad("input", f"may hold at most {MAX_INPUTS} inputs, got {len(value)}")
    inputs = [_one(item, f"input[{i}]") for i, item in enumerate(value)]
    if len({type(item) for item in inputs}) > 1:  # OpenAI's API takes strings or token lists, not both
        raise bad("input", "must be all strings or all token lists, not a mix")
    return inputs


def _one(item: Any, where: str) -> str | list[int]:
    if isinstance(item, str):
        return _text(item, where)
    if isinstance(item, list) and item and all(_is_token(t) for t in item):
        return list(item)
    raise bad(where, f"must be a non-empty string or a non-empty list of token ids, got {shown(item)}")


def _text(value: str, where: str) -> str:
    if not value:
        raise bad(where, "must not be empty")
    return valid_text(value, where)


def _is_token(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
