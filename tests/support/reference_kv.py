"""A tiny reference model of llama.cpp's unified KV cache, for pure-Python tests.

Cells are (pos, token, set of seq ids). `seq_cp` shares cells (kv_unified=True: the
destination is added to the source's cells, nothing is duplicated); `seq_rm` takes a
sequence off cells and frees the cells nobody holds any more; `decode` puts new tokens
of one sequence into free cells. It doubles as the KvBackend of KvCacheManager and
records every call so tests can assert on them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

END = float("inf")


@dataclass(slots=True)
class Cell:
    pos: int
    token: int
    seqs: set[int] = field(default_factory=set)


def _range(p0: int, p1: int) -> tuple[float, float]:
    return (0 if p0 < 0 else p0, END if p1 < 0 else p1)


class ReferenceKv:
    def __init__(self, n_cells: int) -> None:
        self.n_cells = n_cells
        self.cells: list[Cell] = []
        self.calls: list[tuple] = []

    # ----- KvBackend -----------------------------------------------------------------

    def seq_cp(self, src: int, dst: int, p0: int, p1: int) -> None:
        self.calls.append(("cp", src, dst, p0, p1))
        lo, hi = _range(p0, p1)
        for cell in self.cells:
            if src in cell.seqs and lo <= cell.pos < hi:
                cell.seqs.add(dst)

    def seq_rm(self, seq: int, p0: int, p1: int) -> None:
        self.calls.append(("rm", seq, p0, p1))
        lo, hi = _range(p0, p1)
        for cell in self.cells:
            if lo <= cell.pos < hi:
                cell.seqs.discard(seq)
        self.cells = [c for c in self.cells if c.seqs]

    # ----- what the runner does --------------------------------------------------------

    def decode(self, seq: int, start: int, tokens: list[int]) -> None:
        """Compute tokens of seq at positions start.. into new cells."""
        assert start == self.seq_len(seq), f"seq {seq} has {self.seq_len(seq)} cells, fed at {start}"
        if len(self.cells) + len(tokens) > self.n_cells:
            raise AssertionError(
                f"KV cache overflow: {len(self.cells)} used + {len(tokens)} > {self.n_cells}"
            )
        for i, token in enumerate(tokens):
            self.cells.append(Cell(start + i, token, {seq}))

    # ----- queries -------------------------------------------------------------------

    @property
    def used(self) -> int:
        return len(self.cells)

    def seq_cells(self, seq: int) -> list[Cell]:
        return sorted((c for c in self.cells if seq in c.seqs), key=lambda c: c.pos)

    def seq_len(self, seq: int) -> int:
        return len(self.seq_cells(seq))

    def seq_tokens(self, seq: int) -> list[int]:
        cells = self.seq_cells(seq)
        assert [c.pos for c in cells] == list(range(len(cells))), f"seq {seq} has gaps"
        return [c.token for c in cells]

    def shared(self) -> int:
        return sum(1 for c in self.cells if len(c.seqs) >= 2)

    def exclusive(self, seq: int) -> int:
        return sum(1 for c in self.cells if c.seqs == {seq})

    def held_by(self, seqs: set[int]) -> int:
        return sum(1 for c in self.cells if c.seqs & seqs)

    def copies(self) -> list[tuple]:
        return [c for c in self.calls if c[0] == "cp"]
