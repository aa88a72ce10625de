"""Grammars on the batch path: llguidance's matcher gives each grammar request a token mask
per step, applied to its logits row before any sampler, so a grammar row is sampled like
any other (the C kernel or numpy, all of a step's rows at once).

Compiling a grammar with the model's tokenizer costs up to a few hundred milliseconds for a
large one; GrammarCompiler does it on the calling thread (the engine's preparer, never the
engine thread when the request was prepared) and keeps the compiled matcher, which each
request then copies. A mask costs ~0.01-0.3 ms a row on SmolLM2's 49k vocabulary;
llguidance's fuel limits bound the worst step. In the last tokens of a JSON reply's budget
the mask is narrowed to the tokens that close it soonest (json_closing.py).
"""

from __future__ import annotations

import ctypes
import threading
from collections import OrderedDict

import llama_cpp as ll
import llguidance as lg
import numpy as np

from inference.errors import RequestError
from inference.sample.bitmask import allow_only
from inference.sample.json_closing import OUTSIDE, ClosingReserve, ClosingTable, closing_from, is_json_grammar
from inference.sample.json_schema import LIMITS

# Compiled grammars kept for reuse (a job's items, an API client's repeated schema).
CACHED_GRAMMARS = 64


class GrammarCompiler:
    """The model's grammars: its tokenizer as llguidance reads it (built on first use, ~0.3 s
    for 49k tokens) and a cache of compiled matchers. Thread-safe."""

    def __init__(self, vocab: ll.llama_vocab_p, eog_tokens: list[int]) -> None:
        self._vocab = vocab
        self._eog = list(eog_tokens)
        self._tokenizer: lg.LLTokenizer | None = None
        self._closing: ClosingTable | None = None  # each token's step toward a JSON's end
        self._compiled: OrderedDict[str, lg.LLMatcher] = OrderedDict()
        self._lock = threading.Lock()
        self.compiles = 0  # grammars compiled so far (the rest came from the cache)

    @property
    def tokenizer(self) -> lg.LLTokenizer:
        with self._lock:
            if self._tokenizer is None:
                # Every end-of-generation token ends a grammar's output, not only EOS.
                pieces = _pieces(self._vocab)
                self._tokenizer = _llguidance_tokenizer(self._vocab, pieces, self._eog)
                self._closing = ClosingTable(pieces, self._eog)
            return self._tokenizer

    def compile(self, grammar: str) -> lg.LLMatcher:
        """The compiled matcher of grammar (cached); RequestError for one that cannot be."""
        with self._lock:
            matcher = self._compiled.get(grammar)
            if matcher is not None:
                self._compiled.move_to_end(grammar)
                return matcher
        matcher = lg.LLMatcher(self.tokenizer, grammar, log_level=0, limits=LIMITS)  # drops the GIL
        if matcher.is_error():
            raise RequestError(f"the grammar cannot be enforced: {_first_line(matcher.get_error())}")
        with self._lock:
            self.compiles += 1
            self._compiled[grammar] = matcher
            while len(self._compiled) > CACHED_GRAMMARS:
                self._compiled.popitem(last=False)
        return matcher

    def start(self, grammar: str, max_tokens: int = -1) -> GrammarState:
        """A request's own matcher, at the grammar's start; a JSON one steered to close in
        the last tokens of max_tokens (closing_from)."""
        matcher = self.compile(grammar).deep_copy()
        start = closing_from(max_tokens) if is_json_grammar(grammar) else None
        reserve = ClosingReserve(self._closing, start) if self._closing is not None and start is not None else None
        return GrammarState(matcher, self._eog, reserve)


class GrammarState:
    """One request's place in its grammar."""

    def __init__(self, matcher: lg.LLMatcher, eog_tokens: list[int], reserve: ClosingReserve | None = None) -> None:
        """reserve: from its start-th token on, only the allowed tokens that bring the JSON
        nearest its end are allowed (json_closing.py)."""
        self._matcher = matcher
        self._eog = eog_tokens
        self._reserve = reserve
        self._lexical = OUTSIDE  # where the reply's text is: outside a string, inside one...
        self.accepted = 0  # tokens consumed: the reply's length so far
        self.steered = False  # the closing reserve narrowed a choice: the budget shortened the reply
        self.error: str | None = None  # set once the grammar failed mid-reply (a limit hit)

    def fill(self, mask: np.ndarray) -> None:
        """The allowed next tokens into mask (one int32 row of a bitmask). A matcher that
        failed (a step over llguidance's limits) allows only ending: the request then ends
        with its error."""
        self._matcher.unsafe_compute_mask_ptr(mask.ctypes.data, mask.nbytes)
        reserve = self._reserve
        if reserve is not None and self.accepted >= reserve.start and reserve.table.narrow(mask, self._lexical):
            self.steered = True
        if self._matcher.is_error() or self.error is not None:
            self.error = self.error or f"the grammar failed: {_first_line(self._matcher.get_error())}"
            allow_only(mask, self._eog)

    def accept(self, token: int) -> None:
        self.accepted += 1
        if self._reserve is not None and token < self._reserve.table.n_vocab:
            self._lexical = int(self._reserve.table.after[self._lexical, token])
        if not self._matcher.consume_token(token) and self.error is None:
            self.error = f"the grammar refused the sampled token {token}: {_first_line(self._matcher.get_error())}"


def _pieces(vocab: ll.llama_vocab_p) -> list[bytes]:
    """Each token's bytes, control tokens (and user-defined ones that look like them) marked
    with a leading 0xff, as llguidance.llamacpp.lltokenizer_from_vocab does without its
    deprecated per-token call (a warning for each of the 49k-262k tokens)."""
    buffer = ctypes.create_string_buffer(_PIECE_BYTES)
    pieces: list[bytes] = []
    for token in range(ll.llama_vocab_n_tokens(vocab)):
        n = ll.llama_token_to_piece(vocab, token, buffer, _PIECE_BYTES, 0, True)
        if n < 0:
            raise RequestError(f"token {token} of the vocabulary is longer than {_PIECE_BYTES} bytes")
        piece = buffer.raw[:n]
        attr = ll.llama_vocab_get_attr(vocab, token)
        if attr & ll.LLAMA_TOKEN_ATTR_CONTROL or (
                attr & ll.LLAMA_TOKEN_ATTR_USER_DEFINED and piece.startswith(b"<") and piece.endswith(b">")):
            piece = b"\xff" + piece
        pieces.append(piece)
    return pieces


def _llguidance_tokenizer(vocab: ll.llama_vocab_p, pieces: list[bytes], eog_tokens: list[int]) -> lg.LLTokenizer:
    """llguidance's view of a llama.cpp vocabulary (its tokens' pieces: _pieces)."""
    tokenize = ctypes.cast(ll.llama_cpp._lib.llama_tokenize, ctypes.c_void_p).value
    return lg.LLTokenizer.from_llamacpp(  # type: ignore[attr-defined]  # not in llguidance's stubs
        tokens=pieces, vocab_ptr=vocab, tokenize_fptr=tokenize,
        eos_token=eog_tokens or ll.llama_vocab_eos(vocab), slices=None)


_PIECE_BYTES = 16 * 1024


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else "unknown error"
