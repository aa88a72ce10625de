"""One llama_sampler chain per sequence: its own penalties history and RNG state."""

from __future__ import annotations

import inspect
import random

import llama_cpp as ll

from inference.params import SamplingParams

# Biasing end-of-generation tokens this far down makes them unreachable.
NEVER = -float("inf")


def _penalties(n_vocab: int, last_n: int, repeat: float) -> ll.llama_sampler_p:
    # llama.cpp added n_vocab as the first argument in 2026; accept both signatures.
    if _PENALTIES_TAKES_VOCAB:
        return ll.llama_sampler_init_penalties(n_vocab, last_n, repeat, 0.0, 0.0)
    return ll.llama_sampler_init_penalties(last_n, repeat, 0.0, 0.0)


_PENALTIES_TAKES_VOCAB = len(inspect.signature(ll.llama_sampler_init_penalties).parameters) == 5


class SamplerChain:
    def __init__(self, params: SamplingParams, n_vocab: int, eog_tokens: list[int]) -> None:
        self._chain: ll.llama_sampler_p | None = ll.llama_sampler_chain_init(ll.llama_sampler_chain_default_params())
        self._penalty_window = params.repeat_last_n if params.repeat_penalty != 1.0 else 0
        if params.ignore_eos and eog_tokens:
            self._add(self._logit_bias(n_vocab, eog_tokens))
        if params.repeat_penalty != 1.0 and params.repeat_last_n != 0:
            self._add(_penalties(n_vocab, params.repeat_last_n, params.repeat_penalty))
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
        if self._penalty_window == 0:
            return
        window = tokens if self._penalty_window < 0 else tokens[-self._penalty_window :]
        for tok in window:
            ll.llama_sampler_accept(self._chain, tok)

    def sample(self, ctx: ll.llama_context_p, batch_index: int) -> int:
        """Sample from the logits of one batch row; the chain accepts the token itself."""
        return ll.llama_sampler_sample(self._chain, ctx, batch_index)

    def close(self) -> None:
        if self._chain:
            ll.llama_sampler_free(self._chain)
            self._chain = None
