"""One llama_sampler chain per request: its own penalties history and RNG. Its samplers
are the stages the request's settings use (SamplingParams.stages), in params.CHAIN's order.

The engine uses it for requests with OpenAI's frequency or presence penalty (rows.py and
the C kernel sample the others); the sampling tests build one for any request, to compare
the two. A grammar is a mask on the row's logits before any of them
(grammar.py), so the chain never sees one."""

from __future__ import annotations

import ctypes
import inspect
import random
from collections.abc import Callable

import llama_cpp as ll
import numpy as np

from inference.params import GREEDY, SamplingParams

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


_PENALTIES_TAKES_VOCAB = len(inspect.signature(ll.llama_sampler_init_penalties).parameters) == 5


def _logit_bias(n_vocab: int, tokens: list[int]) -> ll.llama_sampler_p:
    biases = (ll.llama_logit_bias * len(tokens))()
    for i, tok in enumerate(tokens):
        biases[i].token = tok  # type: ignore[assignment]  # ctypes converts int to c_int32
        biases[i].bias = NEVER
    return ll.llama_sampler_init_logit_bias(n_vocab, len(tokens), biases)


def _seed(params: SamplingParams) -> int:
    return (params.seed if params.seed is not None else random.getrandbits(32)) & 0xFFFFFFFF


# llama.cpp's sampler for each stage of params.CHAIN (and GREEDY), from the request's
# settings, the vocabulary's size and its end-of-generation tokens.
STAGE_SAMPLERS: dict[str, Callable[[SamplingParams, int, list[int]], ll.llama_sampler_p]] = {
    "ignore_eos": lambda p, n_vocab, eog: _logit_bias(n_vocab, eog),
    "penalties": lambda p, n_vocab, eog: _penalties(n_vocab, p),
    "top_k": lambda p, n_vocab, eog: ll.llama_sampler_init_top_k(p.top_k),
    "top_p": lambda p, n_vocab, eog: ll.llama_sampler_init_top_p(p.top_p, 1),
    "min_p": lambda p, n_vocab, eog: ll.llama_sampler_init_min_p(p.min_p, 1),
    "temperature": lambda p, n_vocab, eog: ll.llama_sampler_init_temp(p.temperature),
    "dist": lambda p, n_vocab, eog: ll.llama_sampler_init_dist(_seed(p)),
    GREEDY: lambda p, n_vocab, eog: ll.llama_sampler_init_greedy(),
}


class SamplerChain:
    """llama.cpp's chain of the stages a request's settings use (SamplingParams.stages)."""

    def __init__(self, params: SamplingParams, n_vocab: int, eog_tokens: list[int]) -> None:
        self._chain: ll.llama_sampler_p | None = ll.llama_sampler_chain_init(ll.llama_sampler_chain_default_params())
        self._penalty_window = params.repeat_last_n if params.penalised else 0
        self._penalties: ll.llama_sampler_p | None = None
        for stage in params.stages():
            sampler = STAGE_SAMPLERS[stage](params, n_vocab, eog_tokens)
            ll.llama_sampler_chain_add(self._chain, sampler)
            if stage == "penalties":
                self._penalties = sampler

    def accept_prompt(self, tokens: list[int]) -> None:
        """Feed prompt tokens so repeat penalties see them, as llama.cpp's server does."""
        if self._penalty_window == 0 or self._penalties is None:
            return
        window = tokens if self._penalty_window < 0 else tokens[-self._penalty_window :]
        for tok in window:  # to the penalties alone: the rest of the chain has no history
            ll.llama_sampler_accept(self._penalties, tok)

    def sample(self, ctx: ll.llama_context_p, batch_index: int) -> int:
        """Sample from the logits of one batch row; the chain accepts the token itself."""
        return ll.llama_sampler_sample(self._chain, ctx, batch_index)

    def close(self) -> None:
        if self._chain:
            ll.llama_sampler_free(self._chain)
            self._chain = None


def _token_array(data: np.ndarray) -> ll.llama_token_data_array:
    """A llama_token_data_array over a numpy buffer of llama_token_data records (the
    caller keeps data alive): a chain applied to candidates outside a context."""
    pointer = data.ctypes.data_as(ctypes.POINTER(ll.llama_token_data))
    return ll.llama_token_data_array(data=pointer, size=len(data), selected=-1, sorted=False)
