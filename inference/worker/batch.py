"""One reusable llama_batch, filled from the step's chunks.

llama_batch_init allocates fixed C arrays and ctypes indexes them without bounds checks,
so the capacity is checked before the first write: an oversized step must fail loudly
and leave the batch as it was, never write past the arrays.

Each row's sequence id and logits flag are written only where they changed (a decode
step's rows keep theirs, so it writes two values a token, not five), against a Python
mirror of what the C arrays hold. Plain ctypes writes, not numpy views: after a decode
the caches are cold, and numpy's conversion and fancy-indexing code costs more to bring
back than a few dozen ctypes stores.
"""

from __future__ import annotations

import ctypes
from typing import NamedTuple

import llama_cpp as ll
import numpy as np


class BatchItem(NamedTuple):
    seq: int
    start: int  # position of tokens[0]
    tokens: list[int]
    n_logits: int  # how many of the last tokens need logits (1: the last; more: draft rows)


class TokenBatch:
    def __init__(self, capacity: int, n_seq_max: int) -> None:
        self.capacity = capacity
        self._batch: ll.llama_batch | None = ll.llama_batch_init(capacity, 0, n_seq_max)
        b = self._batch
        for i in range(capacity):
            b.n_seq_id[i] = 1  # every token in one sequence
        self._seq_ids = [b.seq_id[i] for i in range(capacity)]
        self._seq_of_row = [-1] * capacity  # what each row's seq_id[0] holds
        self._flag_of_row = [-1] * capacity  # what each row's logits flag holds

    @property
    def batch(self) -> ll.llama_batch:
        if self._batch is None:
            raise RuntimeError("the llama_batch was freed")
        return self._batch

    def fill(self, items: list[BatchItem]) -> list[int]:
        """Write items into the batch. Returns the batch row of each item's first logits
        row (its others follow it; -1 where none were asked for). Raises ValueError, having
        written nothing, when the items hold more tokens than the batch."""
        n_tokens = sum(len(item.tokens) for item in items)
        if n_tokens > self.capacity:
            raise ValueError(f"a step of {n_tokens} tokens exceeds the batch of {self.capacity} (n_batch)")
        b = self.batch
        token, pos, logits = b.token, b.pos, b.logits
        seq_of_row, flag_of_row, seq_ids = self._seq_of_row, self._flag_of_row, self._seq_ids
        i = 0
        logit_rows: list[int] = []
        for item in items:
            seq, first_logits = item.seq, len(item.tokens) - item.n_logits
            for offset, tok in enumerate(item.tokens):
                token[i] = tok
                pos[i] = item.start + offset  # type: ignore[call-overload]  # typed 2-D upstream; llama.h: llama_pos *
                if seq_of_row[i] != seq:
                    seq_ids[i][0] = seq_of_row[i] = seq
                flag = 1 if offset >= first_logits else 0
                if flag_of_row[i] != flag:
                    logits[i] = flag_of_row[i] = flag
                i += 1
            logit_rows.append(i - item.n_logits if item.n_logits and item.tokens else -1)
        b.n_tokens = i
        return logit_rows

    def free(self) -> None:
        if self._batch is not None:
            ll.llama_batch_free(self._batch)
            self._batch = None


class EmbeddingBatch:
    """A llama_batch of embedding rows (an image's), one sequence per fill: llama.cpp's
    batch carries token ids or embeddings, never both, so an image's rows go in a
    llama_decode of their own. No logits: an image never ends a prompt.

    A model with M-RoPE (Qwen-VL) reads four positions a row, section-major (all rows' t,
    then y, x and an unused fourth): llama_batch_init allocates one, so this batch holds
    its own array of four and gives llama.cpp's back before freeing."""

    def __init__(self, capacity: int, n_embd: int, mrope: bool = False) -> None:
        self.capacity = capacity
        self.n_embd = n_embd
        self._batch: ll.llama_batch | None = ll.llama_batch_init(capacity, n_embd, 1)
        b = self._batch
        for i in range(capacity):
            b.n_seq_id[i] = 1
            b.logits[i] = 0
        # The address, not the field: a ctypes pointer read from a struct shares its memory.
        self._allocated_pos = ctypes.cast(b.pos, ctypes.c_void_p).value
        self._mrope_pos: np.ndarray | None = None
        if mrope:
            self._mrope_pos = np.zeros(4 * capacity, dtype=np.int32)  # llama_pos is int32
            b.pos = self._mrope_pos.ctypes.data_as(ctypes.POINTER(ll.llama_pos))

    @property
    def batch(self) -> ll.llama_batch:
        if self._batch is None:
            raise RuntimeError("the llama_batch was freed")
        return self._batch

    def fill(self, seq: int, start: int, rows: np.ndarray, mrope: np.ndarray | None = None) -> None:
        """rows at positions start, start + 1...; with M-RoPE at mrope's (n x 3: t, y, x)."""
        n = rows.shape[0]
        if n > self.capacity or rows.shape[1] != self.n_embd:
            raise ValueError(f"{n} embedding rows of {rows.shape[1]} exceed the batch's {self.capacity}x{self.n_embd}")
        if (mrope is None) != (self._mrope_pos is None):
            raise ValueError("a model's image rows take M-RoPE positions or plain ones, not both")
        b = self.batch
        src = np.ascontiguousarray(rows, dtype=np.float32)
        ctypes.memmove(b.embd, src.ctypes.data, src.nbytes)
        if self._mrope_pos is not None and mrope is not None:
            sections = self._mrope_pos[: 4 * n].reshape(4, n)
            sections[:3] = mrope.T
            sections[3] = 0
        else:
            for i in range(n):
                b.pos[i] = start + i  # type: ignore[call-overload]  # typed 2-D upstream; llama.h: llama_pos *
        for i in range(n):
            b.seq_id[i][0] = seq
        b.n_tokens = n

    def free(self) -> None:
        if self._batch is not None:
            # llama_batch_free frees what it allocated, not this batch's own array
            self._batch.pos = ctypes.cast(self._allocated_pos or 0, ctypes.POINTER(ll.llama_pos))  # type: ignore[assignment]  # typed 2-D upstream
            ll.llama_batch_free(self._batch)
            self._batch = None
