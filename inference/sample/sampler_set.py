"""The runner's samplers, one per generating request, keyed by request id.

Requests without a grammar sample in numpy (numpy_sampler.py), all of a step's rows at
once from llama.cpp's logits matrix; grammar requests keep a llama.cpp sampler chain
(sampler_chain.py), whose grammar sampler has no numpy equivalent.

Keyed by request, not by sequence: a preempted request gets a new sequence when it comes
back but must keep its RNG state and penalty history, or seeded output would change.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from dataclasses import dataclass

import llama_cpp as ll
import numpy as np

from inference.params import SamplingParams
from inference.sample.grammar_chain import SamplerChain
from inference.sample.rows import PreparedRows, RequestSampler, RowPreparer, sample_prepared, verify_draft

_FLOAT = ctypes.sizeof(ctypes.c_float)


@dataclass(slots=True)
class PreparedStep:
    """A step's sampling, prepared before llama_decode (SamplerSet.prepare)."""

    request_ids: Sequence[str]
    fast: list[int]  # positions of the numpy-path requests
    rows: PreparedRows | None


class SamplerSet:
    def __init__(self, n_vocab: int, eog_tokens: list[int], vocab: ll.llama_vocab_p | None = None,
                 numpy_sampling: bool = True) -> None:
        self._vocab = vocab  # for grammars
        self._n_vocab = n_vocab
        self._eog_tokens = eog_tokens
        self._eog_array = np.array(eog_tokens, dtype=np.int64)  # one array for all numpy requests' bans
        self._numpy_sampling = numpy_sampling  # False: every request on a llama.cpp chain
        self._chains: dict[str, SamplerChain] = {}
        self._numpy: dict[str, RequestSampler] = {}
        # The last view of llama.cpp's logits buffer, by (address, rows): building one
        # costs more than the rest of reading it, and a decode step's is the same as the last's.
        self._view: tuple[int, int, np.ndarray] | None = None
        self._preparer = RowPreparer()  # keeps the last step's requests alive until the next differs

    def __len__(self) -> int:
        return len(self._chains) + len(self._numpy)

    def start(self, request_id: str, params: SamplingParams, prompt: list[int]) -> None:
        self.stop(request_id)  # a reused id must not leak the old state
        if not params.needs_chain and self._numpy_sampling:
            sampler = RequestSampler(params, self._eog_array)
            sampler.accept_prompt(prompt)
            self._numpy[request_id] = sampler
            return
        chain = SamplerChain(params, self._n_vocab, self._eog_tokens, self._vocab)
        chain.accept_prompt(prompt)
        self._chains[request_id] = chain

    def stop(self, request_id: str) -> None:
        self._numpy.pop(request_id, None)
        chain = self._chains.pop(request_id, None)
        if chain is not None:
            chain.close()

    def prepare(self, request_ids: Sequence[str]) -> PreparedStep:
        """What sampling these requests' rows will need, built before the decode, while the
        caches still hold the engine's own state (see numpy_sampler.PreparedRows)."""
        fast: list[int] = []
        for i, request_id in enumerate(request_ids):
            if request_id in self._numpy:
                fast.append(i)
            elif request_id not in self._chains:
                raise KeyError(f"request {request_id} has no sampler (start_sampling was not called)")
        rows = self._preparer.prepare([self._numpy[request_ids[i]] for i in fast]) if fast else None
        return PreparedStep(request_ids, fast, rows)

    def sample_step(self, ctx: ll.llama_context_p, prepared: PreparedStep, batch_rows: Sequence[int]) -> list[int]:
        """Sample each request's next token from its batch row (rows in increasing order:
        the batch's rows with logits). The numpy requests' rows are modified in place."""
        if prepared.rows is not None and len(prepared.fast) == len(batch_rows) == batch_rows[-1] + 1:
            # The usual decode step: no chains, and batch rows 0..n-1 are outputs 0..n-1.
            return sample_prepared(self._first_outputs(ctx, len(batch_rows)), prepared.rows)
        tokens = [0] * len(prepared.request_ids)
        for i, request_id in enumerate(prepared.request_ids):
            chain = self._chains.get(request_id)
            if chain is not None:
                tokens[i] = chain.sample(ctx, batch_rows[i])
        if prepared.rows is not None:
            logits = self._logits_rows(ctx, [batch_rows[i] for i in prepared.fast])
            for i, token in zip(prepared.fast, sample_prepared(logits, prepared.rows)):
                tokens[i] = token
        return tokens

    def verify(self, ctx: ll.llama_context_p, request_id: str, first_row: int, draft: Sequence[int]) -> list[int]:
        """A request's draft rows (batch rows first_row.. : its decode token, then each
        draft token), verified with its own sampler (rows.verify_draft): the draft tokens
        it keeps and the token sampled after them."""
        sampler = self._numpy.get(request_id)
        if sampler is None:
            raise KeyError(f"request {request_id} has no numpy sampler to verify a draft with")
        self._preparer.release(sampler)
        logits = self._logits_rows(ctx, list(range(first_row, first_row + len(draft) + 1)))
        return verify_draft(logits, sampler, draft)

    def _first_outputs(self, ctx: ll.llama_context_p, n: int) -> np.ndarray:
        """llama.cpp's first n logits rows, as a view kept while its buffer stays put."""
        base = _logits_address(ctx)
        view = self._view
        if view is None or view[:2] != (base, n):
            matrix = np.ctypeslib.as_array(ctypes.cast(base, ctypes.POINTER(ctypes.c_float)), shape=(n, self._n_vocab))
            view = self._view = (base, n, matrix)
        return view[2]

    def _logits_rows(self, ctx: ll.llama_context_p, batch_rows: list[int]) -> np.ndarray:
        """The rows' logits as one (rows, n_vocab) matrix: a view of llama.cpp's buffer
        when they are consecutive outputs, else a copy."""
        base = _logits_address(ctx)
        stride = self._n_vocab * _FLOAT

        def output(row: int) -> int:
            return (_address(ll.llama_get_logits_ith(ctx, row)) - base) // stride

        # Outputs follow the batch's order (llama.cpp numbers them so): first..last
        # spanning len(rows) means consecutive.
        first, last = output(batch_rows[0]), output(batch_rows[-1])
        consecutive = last - first == len(batch_rows) - 1
        outputs = [] if consecutive else [output(row) for row in batch_rows]
        n = last + 1 if consecutive else max(outputs) + 1
        matrix = self._first_outputs(ctx, n)
        return matrix[first:] if consecutive else matrix[outputs]

    def close(self) -> None:
        for chain in self._chains.values():
            chain.close()
        self._chains.clear()
        self._numpy.clear()
        self._preparer.clear()
        self._view = None


def _address(pointer: ctypes._Pointer) -> int:
    return ctypes.cast(pointer, ctypes.c_void_p).value or 0


# llama_get_logits returning the address as an int: no pointer object to build and cast
# on every step (ctypes casts cost microseconds on caches the decode has just emptied).
_get_logits = ctypes.cast(ll.llama_get_logits, ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p))


def _logits_address(ctx: ll.llama_context_p) -> int:
    return _get_logits(ctx) or 0
