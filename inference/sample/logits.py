"""The one reader of llama.cpp's logits: a context's output rows as numpy arrays over its
own buffer (the samplers, the runner's log-probabilities and the draft model read them here).
"""

from __future__ import annotations

import ctypes

import llama_cpp as ll
import numpy as np

_FLOAT = ctypes.sizeof(ctypes.c_float)

# llama_get_logits returning the address as an int: no pointer object to build and cast
# on every step (ctypes casts cost microseconds on caches the decode has just emptied).
_get_logits = ctypes.cast(ll.llama_get_logits, ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p))


class LogitsView:
    """The logits of a context's last decode, n_vocab floats a row with logits, in the
    batch's order (llama.cpp numbers its outputs so)."""

    def __init__(self, n_vocab: int) -> None:
        self.n_vocab = n_vocab
        # The last matrix built, by (address, rows): building one costs more than the rest
        # of reading it, and a decode step's is the same as the last's.
        self._view: tuple[int, int, np.ndarray] | None = None

    def first(self, ctx: ll.llama_context_p, n: int) -> np.ndarray:
        """The first n output rows as one (n, n_vocab) matrix: a view of llama.cpp's buffer."""
        base = _get_logits(ctx) or 0
        view = self._view
        if view is None or view[:2] != (base, n):
            matrix = np.ctypeslib.as_array(ctypes.cast(base, ctypes.POINTER(ctypes.c_float)), shape=(n, self.n_vocab))
            view = self._view = (base, n, matrix)
        return view[2]

    def rows(self, ctx: ll.llama_context_p, batch_rows: list[int]) -> np.ndarray:
        """The batch rows' logits as one (rows, n_vocab) matrix, in increasing batch order: a
        view of llama.cpp's buffer when they are consecutive outputs, else a copy."""
        # first..last spanning len(rows) means consecutive.
        first, last = self._output(ctx, batch_rows[0]), self._output(ctx, batch_rows[-1])
        consecutive = last - first == len(batch_rows) - 1
        outputs = [] if consecutive else [self._output(ctx, row) for row in batch_rows]
        n = last + 1 if consecutive else max(outputs) + 1
        matrix = self.first(ctx, n)
        return matrix[first:] if consecutive else matrix[outputs]

    def row(self, ctx: ll.llama_context_p, batch_row: int) -> np.ndarray:
        """One batch row's logits: a view of llama.cpp's buffer (writes go where llama.cpp's
        own samplers read)."""
        output = self._output(ctx, batch_row)
        return self.first(ctx, output + 1)[output]

    def _output(self, ctx: ll.llama_context_p, batch_row: int) -> int:
        """The output index of a batch row with logits."""
        base = _get_logits(ctx) or 0
        return (_address(ll.llama_get_logits_ith(ctx, batch_row)) - base) // (self.n_vocab * _FLOAT)

    def clear(self) -> None:
        self._view = None


def _address(pointer: ctypes._Pointer) -> int:
    return ctypes.cast(pointer, ctypes.c_void_p).value or 0
