"""One reusable llama_batch, filled from the step's chunks.

llama_batch_init allocates fixed C arrays and ctypes indexes them without bounds checks,
so the capacity is checked before the first write: an oversized step must fail loudly
and leave the batch as it was, never write past the arrays.
"""

from __future__ import annotations

from dataclasses import dataclass

import llama_cpp as ll


@dataclass(frozen=True, slots=True)
class BatchItem:
    seq: int
    start: int  # position of tokens[0]
    tokens: list[int]
    logits: bool  # need logits for the last token


class TokenBatch:
    def __init__(self, capacity: int, n_seq_max: int) -> None:
        self.capacity = capacity
        self._batch: ll.llama_batch | None = ll.llama_batch_init(capacity, 0, n_seq_max)

    @property
    def batch(self) -> ll.llama_batch:
        if self._batch is None:
            raise RuntimeError("the llama_batch was freed")
        return self._batch

    def fill(self, items: list[BatchItem]) -> list[int]:
        """Write items into the batch. Returns the batch row of each item's logits (-1
        where none were asked for). Raises ValueError, having written nothing, when the
        items hold more tokens than the batch."""
        n_tokens = sum(len(item.tokens) for item in items)
        if n_tokens > self.capacity:
            raise ValueError(f"a step of {n_tokens} tokens exceeds the batch of {self.capacity} (n_batch)")
        b = self.batch
        i = 0
        logit_rows: list[int] = []
        for item in items:
            for pos, tok in enumerate(item.tokens, start=item.start):
                b.token[i] = tok
                b.pos[i] = pos  # type: ignore[call-overload]  # typed 2-D upstream; llama.h: llama_pos *
                b.n_seq_id[i] = 1
                b.seq_id[i][0] = item.seq
                b.logits[i] = 0
                i += 1
            if item.logits and item.tokens:
                b.logits[i - 1] = 1
                logit_rows.append(i - 1)
            else:
                logit_rows.append(-1)
        b.n_tokens = i
        return logit_rows

    def free(self) -> None:
        if self._batch is not None:
            ll.llama_batch_free(self._batch)
            self._batch = None
