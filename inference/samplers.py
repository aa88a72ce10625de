"""The runner's sampler chains, one per generating request, keyed by request id.

Keyed by request, not by sequence: a preempted request gets a new sequence when it comes
back but must keep its RNG state and penalty history, or seeded output would change.
"""

from __future__ import annotations

import llama_cpp as ll

from inference.params import SamplingParams
from inference.sampler_chain import SamplerChain


class SamplerSet:
    def __init__(self, n_vocab: int, eog_tokens: list[int], vocab: ll.llama_vocab_p | None = None) -> None:
        self._vocab = vocab  # for grammars
        self._n_vocab = n_vocab
        self._eog_tokens = eog_tokens
        self._chains: dict[str, SamplerChain] = {}

    def __len__(self) -> int:
        return len(self._chains)

    def start(self, request_id: str, params: SamplingParams, prompt: list[int]) -> None:
        self.stop(request_id)  # a reused id must not leak the old chain
        chain = SamplerChain(params, self._n_vocab, self._eog_tokens, self._vocab)
        chain.accept_prompt(prompt)
        self._chains[request_id] = chain

    def stop(self, request_id: str) -> None:
        chain = self._chains.pop(request_id, None)
        if chain is not None:
            chain.close()

    def sample(self, request_id: str, ctx: ll.llama_context_p, batch_row: int) -> int:
        """Sample request_id's next token from the logits of one batch row."""
        chain = self._chains.get(request_id)
        if chain is None:
            raise KeyError(f"request {request_id} has no sampler (start_sampling was not called)")
        return chain.sample(ctx, batch_row)

    def close(self) -> None:
        for chain in self._chains.values():
            chain.close()
        self._chains.clear()
