"""A JSON reply's closing reserve: in the last tokens of its budget (a quarter of max_tokens,
at most CLOSING_TOKENS), of the tokens its grammar allows only those that bring the JSON
nearest its end are allowed, so a value that runs on is closed, valid, within max_tokens
instead of cut mid-value. The reply still ends as cut by max_tokens (FinishReason.LENGTH):
the budget, not the model, chose where it ends.

What a small model writes past its budget is mostly a loop: the same array item or word
again and again (49 of JSONSchemaBench's 100 sampled schemas on SmolLM2 ran out of tokens
so, with llama.cpp's server as with Chorus; docs/benchmarks.md).

"Nearest its end" is read from the text, not the grammar: a token's effect on the JSON's
nesting (brackets outside strings) and on whether it leaves the reply inside a string,
from each lexical state it may start in, computed once per vocabulary. The grammar keeps
the reply valid (a `]` before minItems, a `}` before a required property are not allowed,
so none is chosen); the table only ranks what it allows: ending the reply first, then
closing a bracket, then leaving a string; a comma (another item, another property) and
whitespace last.
"""

from __future__ import annotations

import re
from typing import NamedTuple

import numpy as np

from inference.sample.bitmask import allow_only, allowed_tokens

CLOSING_TOKENS = 64
CLOSING_SHARE = 4

# The lexical states a token may start in: outside a string, inside one, inside one just
# after a backslash.
OUTSIDE, INSIDE, ESCAPED = 0, 1, 2
ENDS_REPLY = -1000  # an end-of-generation token's rank: when the grammar allows ending, end
# The bytes a token's effect depends on; the other tokens (most of a vocabulary) leave the
# nesting and the state as they were (an escape aside), ranked without a walk.
JSON_SYNTAX = re.compile(rb'["\[\]{},\\]')


def closing_from(max_tokens: int) -> int | None:
    """The generated token count from which a reply of max_tokens is steered to close (None:
    an unlimited reply has no end to close before)."""
    if max_tokens <= 0:
        return None
    return max_tokens - min(CLOSING_TOKENS, max(1, max_tokens // CLOSING_SHARE))


def is_json_grammar(grammar: str) -> bool:
    """A JSON Schema's grammar, or a Lark one embedding JSON (a tool call's)."""
    return grammar.startswith('{"grammars":[{"name":"json_schema"') or "%json" in grammar


def token_effect(piece: bytes, state: int) -> tuple[int, int, int]:
    """The nesting change a token's bytes make from a lexical state, the state after, and
    the commas it writes outside strings (each one more item or property)."""
    depth = commas = 0
    for byte in piece:
        if state == OUTSIDE:
            if byte == 0x22:  # "
                state = INSIDE
            elif byte in b"[{":
                depth += 1
            elif byte in b"]}":
                depth -= 1
            elif byte == 0x2C:  # ,
                commas += 1
        elif state == INSIDE:
            if byte == 0x5C:  # backslash
                state = ESCAPED
            elif byte == 0x22:
                state = OUTSIDE
        else:
            state = INSIDE
    return depth, state, commas


class ClosingTable:
    """Each token's rank toward the JSON's end (lower is nearer) and the lexical state after
    it, from each state: (3, n_vocab) arrays built once per vocabulary."""

    def __init__(self, pieces: list[bytes], eog_tokens: list[int]) -> None:
        n = len(pieces)
        idle = np.array([not piece.strip() for piece in pieces], dtype=np.int16)  # whitespace: no step
        # Plain text: outside a string it stays outside, inside (or after an escape) inside.
        self.rank = np.stack([idle, idle + 1, idle + 1])
        self.after = np.tile(np.array([[OUTSIDE], [INSIDE], [INSIDE]], dtype=np.int8), (1, n))
        for token, piece in enumerate(pieces):
            if piece.startswith(b"\xff"):  # a control token: the grammar never allows one but an ending
                self.after[:, token] = (OUTSIDE, INSIDE, ESCAPED)
            elif JSON_SYNTAX.search(piece):
                for state in (OUTSIDE, INSIDE, ESCAPED):
                    depth, after, commas = token_effect(piece, state)
                    self.rank[state, token] = 2 * depth + (after != OUTSIDE) + commas + idle[token]
                    self.after[state, token] = after
        self.rank[:, eog_tokens] = ENDS_REPLY

    @property
    def n_vocab(self) -> int:
        return self.rank.shape[1]

    def narrow(self, mask: np.ndarray, state: int) -> bool:
        """Keeps in mask (a bitmask row of allowed tokens) only the allowed tokens of the
        best rank from state; False when that changed nothing (all ranked alike)."""
        allowed = allowed_tokens(mask, self.n_vocab)
        if allowed.size == 0:
            return False
        ranks = self.rank[state, allowed]
        best = ranks.min()
        if ranks.max() == best:
            return False
        allow_only(mask, allowed[ranks == best])
        return True


class ClosingReserve(NamedTuple):
    """One reply's reserve: from its start-th generated token on, the table narrows its mask."""

    table: ClosingTable
    start: int
