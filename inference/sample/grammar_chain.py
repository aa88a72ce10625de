"""One llama_sampler chain per request: its own penalties history, grammar state and RNG.

The engine uses it for grammar requests and those with OpenAI's frequency or presence
penalty (rows.py and the C kernel sample the others); with
SamplerSet(numpy_sampling=False) for every request, to compare the two."""

from __future__ import annotations

import ctypes
import inspect
import random
from collections.abc import Callable

import llama_cpp as ll
import numpy as np

from inference.errors import RequestError
from inference.params import SamplingParams

# Biasing end-of-generation tokens this far down makes them unreachable.
NEVER = -float("inf")


# repeat_last_n = -1 means the whole history (llama.cpp's server turns it into the context
# size); llama.cpp's penalties sampler itself treats a negative window as none at all.
WHOLE_HISTORY = 1 << 16


def _penalties(n_vocab: int, params: SamplingParams) -> ll.llama_sampler_p:
    # llama.cpp added n_vocab as the first argument in 2026; accept both signatures.
    last_n = params.repeat_last_n if params.repeat_last_n >= 0 else WHOLE_HISTORY
    rest = (last_n, params.repeat_penalty, params.frequency_penalty, params.presence_penalty)
    if _PENALTIES_TAKES_VOCAB:
        return ll.llama_sampler_init_penalties(n_vocab, *rest)
    return ll.llama_sampler_init_penalties(*rest)


def _penalised(params: SamplingParams) -> bool:
    any_penalty = params.repeat_penalty != 1.0 or params.frequency_penalty != 0.0 or params.presence_penalty != 0.0
    return any_penalty and params.repeat_last_n != 0


_PENALTIES_TAKES_VOCAB = len(inspect.signature(ll.llama_sampler_init_penalties).parameters) == 5


class SamplerChain:
    def __init__(self, params: SamplingParams, n_vocab: int, eog_tokens: list[int],
                 vocab: ll.llama_vocab_p | None = None) -> None:
        self._chain: ll.llama_sampler_p | None = ll.llama_sampler_chain_init(ll.llama_sampler_chain_default_params())
        self._penalty_window = params.repeat_last_n if _penalised(params) else 0
        self._penalties: ll.llama_sampler_p | None = None
        self._grammar: GrammarCheck | None = None
        self._n_vocab = n_vocab
        if params.ignore_eos and eog_tokens:
            self._add(self._logit_bias(n_vocab, eog_tokens))
        if _penalised(params):
            self._penalties = _penalties(n_vocab, params)
            self._add(self._penalties)
        if params.grammar is not None:
            self._grammar = GrammarCheck(vocab, params.grammar, n_vocab, on_fail=self.close)
        if params.temperature <= 0.0:
            self._add(ll.llama_sampler_init_greedy())
        else:
            if params.top_k > 0:
                self._add(ll.llama_sampler_init_top_k(params.top_k))
            self._add(ll.llama_sampler_init_top_p(params.top_p, 1))
            if params.min_p > 0.0:
                self._add(ll.llama_sampler_init_min_p(params.min_p, 1))
            self._add(ll.llama_sampler_init_temp(params.temperature))
            seed = params.seed if params.seed is not None else random.getrandbits(32)
            self._add(ll.llama_sampler_init_dist(seed & 0xFFFFFFFF))

    def _add(self, sampler: ll.llama_sampler_p) -> None:
        ll.llama_sampler_chain_add(self._chain, sampler)

    @staticmethod
    def _logit_bias(n_vocab: int, tokens: list[int]) -> ll.llama_sampler_p:
        biases = (ll.llama_logit_bias * len(tokens))()
        for i, tok in enumerate(tokens):
            biases[i].token = tok  # type: ignore[assignment]  # ctypes converts int to c_int32
            biases[i].bias = NEVER
        return ll.llama_sampler_init_logit_bias(n_vocab, len(tokens), biases)

    def accept_prompt(self, tokens: list[int]) -> None:
        """Feed prompt tokens so repeat penalties see them, as llama.cpp's server does."""
        if self._penalty_window == 0 or self._penalties is None:
            return
        window = tokens if self._penalty_window < 0 else tokens[-self._penalty_window :]
        for tok in window:  # to the penalties alone: a grammar must not see the prompt
            ll.llama_sampler_accept(self._penalties, tok)

    def sample(self, ctx: ll.llama_context_p, batch_index: int) -> int:
        """Sample from the logits of one batch row; the chain accepts the token itself."""
        if self._grammar is not None and self._chain:
            return self._grammar.sample(self._chain, ctx, batch_index)
        return ll.llama_sampler_sample(self._chain, ctx, batch_index)

    def close(self) -> None:
        if self._chain:
            ll.llama_sampler_free(self._chain)
            self._chain = None
        if self._grammar is not None:
            self._grammar.close()


_TOKEN_DATA = np.dtype([("id", np.int32), ("logit", np.float32), ("p", np.float32)])


class GrammarCheck:
    """A request's grammar, as llama.cpp's common sampler applies it: sample with the
    chain alone, keep the token if the grammar allows it, else apply the grammar to every
    candidate first and sample again. Checking one token is cheap; masking the whole
    vocabulary every step (hundreds of ms on a large one) only happens on a rejection.
    Applied before any truncation on the slow path, the grammar can never leave the
    chain without a candidate."""

    def __init__(self, vocab: ll.llama_vocab_p | None, grammar: str, n_vocab: int,
                 on_fail: Callable[[], None]) -> None:
        sampler = ll.llama_sampler_init_grammar(vocab, grammar.encode("utf-8"), b"root") if vocab else None
        if not sampler:
            on_fail()
            raise RequestError(
                "the grammar does not parse (llama.cpp's GBNF, with a rule named root); "
                "the engine log names the error"
            )
        self._sampler: ll.llama_sampler_p | None = sampler
        self._n_vocab = n_vocab
        self._one = np.zeros(1, dtype=_TOKEN_DATA)

    def sample(self, chain: ll.llama_sampler_p, ctx: ll.llama_context_p, row: int) -> int:
        logits = np.ctypeslib.as_array(ll.llama_get_logits_ith(ctx, row), shape=(self._n_vocab,))
        token = self._select(chain, logits, with_grammar=False)
        if not self._allows(token):
            token = self._select(chain, logits, with_grammar=True)
        ll.llama_sampler_accept(self._sampler, token)
        ll.llama_sampler_accept(chain, token)
        return token

    def _select(self, chain: ll.llama_sampler_p, logits: np.ndarray, with_grammar: bool) -> int:
        data = np.empty(self._n_vocab, dtype=_TOKEN_DATA)
        data["id"] = np.arange(self._n_vocab, dtype=np.int32)
        data["logit"] = logits
        data["p"] = 0.0
        cur = _token_array(data)
        if with_grammar:
            ll.llama_sampler_apply(self._sampler, ctypes.byref(cur))
        ll.llama_sampler_apply(chain, ctypes.byref(cur))
        if not 0 <= cur.selected < cur.size:
            raise RuntimeError("the sampler chain selected no token")
        return int(cur.data[cur.selected].id)

    def _allows(self, token: int) -> bool:
        self._one[0] = (token, 1.0, 0.0)
        cur = _token_array(self._one)
        ll.llama_sampler_apply(self._sampler, ctypes.byref(cur))
        return bool(np.isfinite(self._one[0]["logit"]))

    def close(self) -> None:
        if self._sampler:
            ll.llama_sampler_free(self._sampler)
            self._sampler = None


def _token_array(data: np.ndarray) -> ll.llama_token_data_array:
    """A llama_token_data_array over a numpy buffer (the caller keeps data alive)."""
    pointer = data.ctypes.data_as(ctypes.POINTER(ll.llama_token_data))
    return ll.llama_token_data_array(data=pointer, size=len(data), selected=-1, sorted=False)
