"""A JSON reply's closing reserve (inference/sample/json_closing.py): in the last tokens of
its budget, of what the grammar allows only the tokens nearest the JSON's end are allowed,
so a reply that runs on ends valid within max_tokens, and says it was the budget's end."""

from __future__ import annotations

import json

import numpy as np
import pytest

from inference import FinishReason, SamplingParams, schema_grammar
from inference.sample.bitmask import allow_only, allowed_tokens, new_masks
from inference.sample.grammars import JSON_OBJECT
from inference.sample.json_closing import (
    ENDS_REPLY,
    ESCAPED,
    INSIDE,
    OUTSIDE,
    ClosingTable,
    closing_from,
    is_json_grammar,
    token_effect,
)
from inference.sample.json_schema import lark_grammar
from tests.support.chat_requests import user_chat

PIECES = [b"a", b'"', b"]", b'"]', b", ", b" ", b'""', b"\\", b"{", b"\xff<|im_end|>", b' "",', b'"}']
EOG = 9


def test_the_reserve_is_a_quarter_of_the_budget_and_at_most_64_tokens():
    assert closing_from(384) == 320 and closing_from(1000) == 936
    assert closing_from(24) == 18 and closing_from(2) == 1 and closing_from(1) == 0
    assert closing_from(-1) is None and closing_from(0) is None  # unlimited: no end to close before


def test_only_json_grammars_are_steered():
    assert is_json_grammar(schema_grammar({"type": "object"})) and is_json_grammar(JSON_OBJECT)
    assert is_json_grammar(lark_grammar('start: "<call>" %json {"type": "object"}'))
    assert not is_json_grammar(lark_grammar('start: "yes" | "no"'))


@pytest.mark.parametrize(("piece", "state", "effect"), [
    (b"]}", OUTSIDE, (-2, OUTSIDE, 0)),
    (b"]}", INSIDE, (0, INSIDE, 0)),  # brackets inside a string are text
    (b'"]', INSIDE, (-1, OUTSIDE, 0)),  # ends the string, then the array
    (b'"]', OUTSIDE, (0, INSIDE, 0)),  # opens a string holding "]"
    (b'\\"', INSIDE, (0, INSIDE, 0)),  # an escaped quote does not end it
    (b'"', ESCAPED, (0, INSIDE, 0)),
    (b' "",', OUTSIDE, (0, OUTSIDE, 1)),
    (b'[{"', OUTSIDE, (2, INSIDE, 0)),
])
def test_a_token_s_effect_is_read_from_its_bytes_and_the_state_it_starts_in(piece, state, effect):
    assert token_effect(piece, state) == effect


def _mask(allowed: list[int]) -> np.ndarray:
    mask = new_masks(1, len(PIECES))[0]
    allow_only(mask, allowed)
    return mask


def _allowed(mask: np.ndarray) -> list[int]:
    return allowed_tokens(mask, len(PIECES)).tolist()


def test_the_nearest_to_the_end_of_what_the_grammar_allows_is_kept():
    table = ClosingTable(PIECES, [EOG])
    assert table.rank[OUTSIDE, EOG] == ENDS_REPLY
    cases = [
        (OUTSIDE, [0, 2, 4, 5], [2]),  # after an item: close the array, not another item or a space
        (INSIDE, [0, 1, 3, 7], [3]),  # in a string: end it and the array in one token
        (INSIDE, [0, 1, 7], [1]),  # else end the string
        (OUTSIDE, [6, 10, 5], [6]),  # a value must come: the empty string, not one and a comma
        (OUTSIDE, [2, EOG], [EOG]),  # the grammar allows ending: end
    ]
    for state, allowed, kept in cases:
        mask = _mask(allowed)
        assert table.narrow(mask, state) and _allowed(mask) == kept, (state, allowed)
    alike = _mask([0, 8])  # in a string both are text: ranked alike, nothing to narrow
    assert table.narrow(alike, INSIDE) is False and _allowed(alike) == [0, 8]
    same = _mask([0])
    assert table.narrow(same, OUTSIDE) is False and _allowed(same) == [0]  # one choice: left as it is


@pytest.mark.model
def test_a_json_reply_that_runs_on_is_closed_valid_within_max_tokens(shared_engine):
    """It was cut mid-value at max_tokens (not JSON); a reply ending on its own is untouched."""
    schema = {"type": "object", "properties": {"fruits": {"type": "array", "items": {"type": "string"}}},
              "required": ["fruits"]}
    grammar = schema_grammar(schema)
    for budget in (24, 40):
        reply = shared_engine.submit(user_chat("List one hundred fruits as JSON.",
                                               SamplingParams.greedy(budget, grammar=grammar))).result(120)
        value = json.loads(reply.text)
        assert isinstance(value["fruits"], list) and all(isinstance(f, str) for f in value["fruits"])
        assert reply.finish_reason is FinishReason.LENGTH and len(reply.token_ids) <= budget
    short = shared_engine.submit(user_chat("Answer yes or no as JSON: is the sky blue?", SamplingParams.greedy(
        200, grammar=schema_grammar({"type": "object", "properties": {"answer": {"enum": ["yes", "no"]}},
                                     "required": ["answer"]})))).result(120)
    assert short.finish_reason is FinishReason.STOP and json.loads(short.text)["answer"] in ("yes", "no")
