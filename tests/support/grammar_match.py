"""Matching text against a grammar without a model: llguidance's matcher over a tokenizer of
one token a byte, so a test can say exactly which replies a grammar lets through."""

from __future__ import annotations

import llguidance as lg

# Extra fields given as a schema (additionalProperties), every value and name bounded (a free
# name once ran a sampled answer to max_tokens): checked on the grammar (tests/inference/sample)
# and through the server with a model.
EXTRA_FIELDS = {"type": "object", "properties": {"a": {"type": "string", "maxLength": 20}}, "required": ["a"],
                "additionalProperties": {"type": ["array", "null"], "maxItems": 3,
                                         "items": {"type": "integer", "minimum": 0, "maximum": 999}},
                "propertyNames": {"maxLength": 8}, "maxProperties": 3}


class _Bytes:
    """A tokenizer of one token a byte (and an end token)."""
    eos_token_id = 256
    bos_token_id = None
    tokens = [bytes([i]) for i in range(256)] + [b"\xff<end>"]
    special_token_ids = [256]

    def __call__(self, text: str | bytes) -> list[int]:
        return list(text.encode() if isinstance(text, str) else text)


_BYTES = lg.LLTokenizer(lg.TokenizerWrapper(_Bytes()))


def grammar_takes(grammar: str, text: str) -> bool:
    """Whether a reply written under grammar (llguidance's definition) may be exactly text."""
    matcher = lg.LLMatcher(_BYTES, grammar, log_level=0)
    return matcher.consume_tokens(list(text.encode())) and matcher.is_accepting()
