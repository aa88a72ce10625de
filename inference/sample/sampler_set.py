"""The runner's samplers, one per generating request, keyed by request id.

Requests sample in numpy and the C kernel (rows.py), all of a step's rows at once from
llama.cpp's logits matrix; those with OpenAI's frequency or presence penalty keep a
llama.cpp sampler chain (llama_chain.py). A grammar request's row is masked first
(grammar.py), whichever samples it.

Keyed by request, not by sequence: a preempted request gets a new sequence when it comes
back but must keep its RNG state and penalty history, or seeded output would change.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import llama_cpp as ll
import numpy as np

from inference.errors import RequestError
from inference.params import SamplingParams
from inference.sample.bitmask import apply_mask, new_masks
from inference.sample.grammar import GrammarCompiler, GrammarState
from inference.sample.llama_chain import SamplerChain
from inference.sample.logits import LogitsView
from inference.sample.rows import PreparedRows, RequestSampler, RowPreparer, sample_prepared, verify_draft


@dataclass(slots=True)
class PreparedStep:
    """A step's sampling, prepared before llama_decode (SamplerSet.prepare)."""

    request_ids: Sequence[str]
    fast: list[int]  # positions of the numpy-path requests
    rows: PreparedRows | None
    grammars: list[tuple[int, GrammarState]]  # positions of the grammar requests, their states


class SamplerSet:
    def __init__(self, n_vocab: int, eog_tokens: list[int], vocab: ll.llama_vocab_p | None = None) -> None:
        self.grammars = GrammarCompiler(vocab, eog_tokens) if vocab else None
        self._n_vocab = n_vocab
        self._eog_tokens = eog_tokens
        self._eog_array = np.array(eog_tokens, dtype=np.int64)  # one array for all numpy requests' bans
        self._chains: dict[str, SamplerChain] = {}
        self._numpy: dict[str, RequestSampler] = {}
        self._grammar_states: dict[str, GrammarState] = {}
        self._logits = LogitsView(n_vocab)
        self._preparer = RowPreparer()  # keeps the last step's requests alive until the next differs

    def __len__(self) -> int:
        return len(self._chains) + len(self._numpy)

    def start(self, request_id: str, params: SamplingParams, prompt: list[int]) -> None:
        """A request's sampler; RequestError for a grammar that cannot be enforced."""
        self.stop(request_id)  # a reused id must not leak the old state
        if params.grammar is not None:
            if self.grammars is None:
                raise RequestError("this engine has no vocabulary to enforce a grammar with")
            self._grammar_states[request_id] = self.grammars.start(params.grammar, params.max_tokens)
        if not params.needs_chain:
            sampler = RequestSampler(params, self._eog_array)
            sampler.accept_prompt(prompt)
            self._numpy[request_id] = sampler
            return
        chain = SamplerChain(params, self._n_vocab, self._eog_tokens)
        chain.accept_prompt(prompt)
        self._chains[request_id] = chain

    def stop(self, request_id: str) -> None:
        self._numpy.pop(request_id, None)
        self._grammar_states.pop(request_id, None)
        chain = self._chains.pop(request_id, None)
        if chain is not None:
            chain.close()

    def prepare(self, request_ids: Sequence[str]) -> PreparedStep:
        """What sampling these requests' rows will need, built before the decode, while the
        caches still hold the engine's own state (see rows.PreparedRows)."""
        fast: list[int] = []
        for i, request_id in enumerate(request_ids):
            if request_id in self._numpy:
                fast.append(i)
            elif request_id not in self._chains:
                raise KeyError(f"request {request_id} has no sampler (start_sampling was not called)")
        rows = self._preparer.prepare([self._numpy[request_ids[i]] for i in fast]) if fast else None
        states = self._grammar_states
        grammars = [(i, states[r]) for i, r in enumerate(request_ids) if r in states] if states else []
        return PreparedStep(request_ids, fast, rows, grammars)

    def sample_step(self, ctx: ll.llama_context_p, prepared: PreparedStep, batch_rows: Sequence[int]) -> list[int]:
        """Sample each request's next token from its batch row (rows in increasing order:
        the batch's rows with logits). The numpy requests' rows are modified in place."""
        masks = self._masks(prepared)
        if prepared.rows is not None and len(prepared.fast) == len(batch_rows) == batch_rows[-1] + 1:
            # The usual decode step: no chains, and batch rows 0..n-1 are outputs 0..n-1.
            logits = self._logits.first(ctx, len(batch_rows))
            for (i, _), mask in zip(prepared.grammars, masks):
                apply_mask(logits[i], mask)
            return self._accepted(prepared, sample_prepared(logits, prepared.rows))
        tokens = [0] * len(prepared.request_ids)
        masked = dict(zip((i for i, _ in prepared.grammars), masks))
        for i, request_id in enumerate(prepared.request_ids):
            chain = self._chains.get(request_id)
            if chain is not None:
                if i in masked:  # in llama.cpp's own buffer, where the chain reads it
                    apply_mask(self._logits.row(ctx, batch_rows[i]), masked[i])
                tokens[i] = chain.sample(ctx, batch_rows[i])
        if prepared.rows is not None:
            logits = self._logits.rows(ctx, [batch_rows[i] for i in prepared.fast])
            for row, i in enumerate(prepared.fast):
                if i in masked:
                    apply_mask(logits[row], masked[i])
            for i, token in zip(prepared.fast, sample_prepared(logits, prepared.rows)):
                tokens[i] = token
        return self._accepted(prepared, tokens)

    def grammar_errors(self, request_ids: Sequence[str]) -> dict[str, str]:
        """The requests among request_ids whose grammar failed (they can only end now)."""
        errors: dict[str, str] = {}
        for request_id in request_ids:
            state = self._grammar_states.get(request_id)
            if state is not None and state.error:
                errors[request_id] = state.error
        return errors

    def _masks(self, prepared: PreparedStep) -> np.ndarray:
        """Each grammar request's mask for this step, in prepared.grammars' order."""
        masks = new_masks(len(prepared.grammars), self._n_vocab)
        for (_, state), mask in zip(prepared.grammars, masks):
            state.fill(mask)
        return masks

    @staticmethod
    def _accepted(prepared: PreparedStep, tokens: list[int]) -> list[int]:
        for i, state in prepared.grammars:
            state.accept(tokens[i])
        return tokens

    def verify(self, ctx: ll.llama_context_p, request_id: str, first_row: int, draft: Sequence[int]) -> list[int]:
        """A request's draft rows (batch rows first_row.. : its decode token, then each
        draft token), verified with its own sampler (rows.verify_draft): the draft tokens
        it keeps and the token sampled after them."""
        sampler = self._numpy.get(request_id)
        if sampler is None:
            raise KeyError(f"request {request_id} has no numpy sampler to verify a draft with")
        self._preparer.release(sampler)
        logits = self._logits.rows(ctx, list(range(first_row, first_row + len(draft) + 1)))
        return verify_draft(logits, sampler, draft)

    def close(self) -> None:
        for chain in self._chains.values():
            chain.close()
        self._chains.clear()
        self._numpy.clear()
        self._grammar_states.clear()
        self._preparer.clear()
        self._logits.clear()

