"""A radix tree of the token prefixes that are physically in the KV cache.

Each node is a run of KV cells at consecutive positions. Every sequence id is a path
from the root to its leaf, and every sequence on a node shares that node's cells
(they got there through `llama_memory_seq_cp`, which shares cells in a unified cache).
So the cells in use are exactly the tokens of all nodes, counted once.

Two sequences that computed the same tokens independently hold different cells; the
tree then has two children that start with the same token. That is rare (the scheduler
makes a request wait for an in-flight prefix instead of computing it twice) and it
keeps the accounting exact.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field


@dataclass(eq=False, slots=True)
class _Node:
    tokens: list[int]
    start: int  # position of tokens[0]
    parent: _Node | None  # None for the root alone
    children: dict[int, list[_Node]] = field(default_factory=dict)
    holders: set[int] = field(default_factory=set)

    @property
    def end(self) -> int:
        return self.start + len(self.tokens)

    def up(self) -> _Node:
        """The parent of a node below the root."""
        if self.parent is None:
            raise ValueError("the root of the prefix tree has no parent")
        return self.parent

    def add_child(self, child: _Node) -> None:
        self.children.setdefault(child.tokens[0], []).append(child)

    def remove_child(self, child: _Node) -> None:
        siblings = self.children[child.tokens[0]]
        siblings.remove(child)
        if not siblings:
            del self.children[child.tokens[0]]


@dataclass(frozen=True, slots=True)
class PrefixMatch:
    length: int  # tokens of the query that are cached
    holders: frozenset[int]  # sequences whose KV holds all of them


def common_prefix_len(a: list[int], b: list[int]) -> int:
    """Length of the common prefix; compares slices in C before walking tokens."""
    n = min(len(a), len(b))
    lo = 0
    step = 64
    while lo + step <= n and a[lo : lo + step] == b[lo : lo + step]:
        lo += step
    while lo < n and a[lo] == b[lo]:
        lo += 1
    return lo


class PrefixTree:
    def __init__(self) -> None:
        self._root = _Node(tokens=[], start=0, parent=None)
        self._leaf: dict[int, _Node] = {}
        self._cells = 0

    # ----- queries -----------------------------------------------------------------

    @property
    def cells_used(self) -> int:
        return self._cells

    def cells_shared(self) -> int:
        """Cells that two or more sequences hold."""
        return sum(len(n.tokens) for n in self._nodes() if len(n.holders) >= 2)

    def length(self, seq: int) -> int:
        leaf = self._leaf.get(seq)
        return leaf.end if leaf else 0

    def tokens(self, seq: int) -> list[int]:
        out: list[list[int]] = []
        node = self._leaf.get(seq)
        while node is not None and node is not self._root:
            out.append(node.tokens)
            node = node.parent
        return [t for run in reversed(out) for t in run]

    def sequences(self) -> list[int]:
        return list(self._leaf)

    def exclusive_cells(self, seq: int) -> int:
        """Cells that would be freed if this sequence were removed."""
        total = 0
        node = self._leaf.get(seq)
        while node is not None and node is not self._root and node.holders == {seq}:
            total += len(node.tokens)
            node = node.parent
        return total

    def cells_held_by(self, seqs: set[int], prefix: list[int] | None = None) -> int:
        """Cells that at least one of these sequences holds, plus the cells of the cached
        part of prefix (the path match() finds) that none of them holds."""
        total = sum(len(n.tokens) for n in self._nodes() if not n.holders.isdisjoint(seqs))
        if prefix:
            node, count = self._walk(prefix)
            while node is not self._root:
                if node.holders.isdisjoint(seqs):
                    total += count
                node = node.up()
                count = len(node.tokens)
        return total

    def match(self, tokens: list[int]) -> PrefixMatch:
        node, offset = self._walk(tokens)
        length = node.start + offset
        if length == 0:
            return PrefixMatch(0, frozenset())
        return PrefixMatch(length, frozenset(node.holders))

    # ----- updates -----------------------------------------------------------------

    def fork(self, tokens: list[int], length: int, dst: int) -> int:
        """Make empty sequence dst hold the first `length` cached tokens of `tokens`.

        Returns a sequence that already holds them (the copy source for llama.cpp).
        """
        if dst in self._leaf:
            raise ValueError(f"sequence {dst} is not empty")
        node, offset = self._walk(tokens[:length])
        if node.start + offset != length or length == 0:
            raise ValueError(f"only {node.start + offset} of {length} tokens are cached")
        if offset < len(node.tokens):
            self._split(node, offset)
        source = next(iter(node.holders))
        self._leaf[dst] = node
        while node is not self._root:
            node.holders.add(dst)
            node = node.up()
        return source

    def append(self, seq: int, tokens: list[int]) -> None:
        """Record that `tokens` were computed into seq right after its current end."""
        if not tokens:
            return
        leaf = self._leaf.get(seq, self._root)
        if leaf is not self._root and leaf.holders == {seq} and not leaf.children:
            leaf.tokens.extend(tokens)
        else:
            child = _Node(tokens=list(tokens), start=leaf.end, parent=leaf, holders={seq})
            leaf.add_child(child)
            self._leaf[seq] = child
        self._cells += len(tokens)

    def truncate(self, seq: int, length: int) -> int:
        """Drop seq's tokens at positions >= length. Returns the cells freed."""
        node = self._leaf.get(seq)
        if node is None or node.end <= length:
            return 0
        before = self._cells
        while node is not self._root and node.start >= length:
            parent = node.up()
            self._release(node, seq)
            node = parent
        if node is not self._root and node.end > length:
            lower = self._split(node, length - node.start)
            self._release(lower, seq)
        if node is self._root:
            del self._leaf[seq]
        else:
            self._leaf[seq] = node
        return before - self._cells

    def remove(self, seq: int) -> int:
        return self.truncate(seq, 0)

    # ----- internals ---------------------------------------------------------------

    def _walk(self, tokens: list[int]) -> tuple[_Node, int]:
        """Deepest node matching a prefix of tokens, and how many of its tokens match."""
        node, offset, pos = self._root, 0, 0
        while pos < len(tokens):
            best, best_len = None, 0
            for child in node.children.get(tokens[pos], ()):
                n = common_prefix_len(child.tokens, tokens[pos : pos + len(child.tokens)])
                if n > best_len:
                    best, best_len = child, n
            if best is None:
                break
            node, offset, pos = best, best_len, pos + best_len
            if best_len < len(best.tokens):
                break
        return node, offset

    def _split(self, node: _Node, offset: int) -> _Node:
        """Cut node after `offset` tokens; returns the new lower half."""
        lower = _Node(
            tokens=node.tokens[offset:],
            start=node.start + offset,
            parent=node,
            children=node.children,
            holders=set(node.holders),
        )
        for siblings in lower.children.values():
            for child in siblings:
                child.parent = lower
        del node.tokens[offset:]
        node.children = {}
        node.add_child(lower)
        for seq in lower.holders:
            if self._leaf.get(seq) is node:
                self._leaf[seq] = lower
        return lower

    def _release(self, node: _Node, seq: int) -> None:
        node.holders.discard(seq)
        if not node.holders:
            node.up().remove_child(node)
            self._cells -= len(node.tokens)

    def _nodes(self) -> Iterator[_Node]:
        stack = [self._root]
        while stack:
            node = stack.pop()
            if node is not self._root:
                yield node
            for siblings in node.children.values():
                stack.extend(siblings)
