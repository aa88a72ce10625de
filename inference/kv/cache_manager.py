"""Sequence ids and KV cells of the one llama.cpp context.

The scheduler asks three things of this module: "give this prompt a sequence and tell
me how much of it is cached", "make room for n more cells", and "this request is done".
How cells are shared and which idle sequence is evicted stays in here.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from inference.kv.prefix_tree import PrefixTree


class KvBackend(Protocol):
    """The two llama.cpp memory calls the manager needs (positions: [p0, p1), -1 = end)."""

    def seq_rm(self, seq: int, p0: int, p1: int) -> None: ...

    def seq_cp(self, src: int, dst: int, p0: int, p1: int) -> None: ...


# The position of tokens[index] in a sequence holding tokens (LlamaRunner.position_of): the
# index itself, but where M-RoPE images span fewer positions than rows (inference/positions.py).
PositionOf = Callable[[list[int], int], int]


class SeqState(enum.Enum):
    FREE = "free"
    ACTIVE = "active"  # a running request owns it
    IDLE = "idle"  # cached for reuse, evictable
    PINNED = "pinned"  # a pinned prefix, never evicted


@dataclass(frozen=True, slots=True)
class Allocation:
    seq: int
    cached: int  # tokens already in this sequence's KV


@dataclass(frozen=True, slots=True)
class KvStats:
    cells_total: int
    cells_used: int
    cells_shared: int
    seqs_total: int
    seqs_active: int
    seqs_idle: int
    seqs_pinned: int
    evictions: int  # idle sequences dropped to make room


class KvCacheManager:
    def __init__(self, n_cells: int, n_seqs: int, backend: KvBackend, position_of: PositionOf | None = None) -> None:
        self.n_cells = n_cells
        self.n_seqs = n_seqs
        self._backend = backend
        self._position_of = position_of  # the manager counts tokens; llama.cpp cuts at positions (None: the same)
        self._tree = PrefixTree()
        self._state = [SeqState.FREE] * n_seqs
        self._last_used = [0] * n_seqs
        # The priority of the request an idle sequence last served: idle sequences are
        # evicted lowest priority first, least recently used among equals. A background job
        # finishing items every few hundred ms would otherwise evict the KV of the chat the
        # user types in (idle for the seconds between their messages) at every admission,
        # and each of the chat's turns computed its whole conversation again.
        self._kept_priority = [0] * n_seqs
        self._clock = 0
        self._evictions = 0

    # ----- queries -----------------------------------------------------------------

    @property
    def cells_used(self) -> int:
        return self._tree.cells_used

    @property
    def cells_free(self) -> int:
        return self.n_cells - self._tree.cells_used

    def cached_prefix_len(self, tokens: list[int]) -> int:
        return self._tree.match(tokens).length

    def seq_len(self, seq: int) -> int:
        return self._tree.length(seq)

    def seq_tokens(self, seq: int) -> list[int]:
        return self._tree.tokens(seq)

    def state(self, seq: int) -> SeqState:
        return self._state[seq]

    def stats(self) -> KvStats:
        count = {s: self._state.count(s) for s in SeqState}
        return KvStats(
            cells_total=self.n_cells,
            cells_used=self._tree.cells_used,
            cells_shared=self._tree.cells_shared(),
            seqs_total=self.n_seqs,
            seqs_active=count[SeqState.ACTIVE],
            seqs_idle=count[SeqState.IDLE],
            seqs_pinned=count[SeqState.PINNED],
            evictions=self._evictions,
        )

    def pinned_seq_for(self, tokens: list[int]) -> int | None:
        """A pinned sequence that holds exactly these tokens, if any."""
        for seq, state in enumerate(self._state):
            if state is SeqState.PINNED and self._tree.tokens(seq) == tokens:
                return seq
        return None

    # ----- admission ---------------------------------------------------------------

    def allocate(self, tokens: list[int], reuse_limit: int, reserve_cells: int) -> Allocation | None:
        """Give a new request a sequence, reusing the longest cached prefix of tokens.

        reuse_limit caps how many tokens may come from the cache (the last prompt token
        must be computed to get logits). The request needs room for its uncached tokens
        plus reserve_cells (its first decode tokens and what others have been promised).
        None means "not now": no sequence id or not enough cells.
        """
        match = self._tree.match(tokens[:reuse_limit])
        cached = match.length
        extra_cells = len(tokens) - cached + reserve_cells
        if self._room_after_eviction(tokens[:cached]) < extra_cells:
            return None
        seq = self._take_over_idle(match.holders, cached)
        if seq is None:
            seq = self._free_seq(protect=match.holders)
            if seq is None:
                return None
            if cached:
                source = self._tree.fork(tokens, cached, seq)
                self._backend.seq_cp(source, seq, 0, self._position_in(tokens, cached))
        self._state[seq] = SeqState.ACTIVE
        self._touch(seq)
        if not self.make_room(extra_cells):
            self.release(seq, keep=False)
            return None
        return Allocation(seq, cached)

    def fits(self, tokens: list[int], reuse_limit: int, reserve_cells: int,
             released: frozenset[int] = frozenset()) -> bool:
        """Whether allocate() would find the cells for tokens now (sequence ids aside), or
        once the active sequences in released were given back (kept idle)."""
        cached = self._tree.match(tokens[:reuse_limit]).length
        return self._room_after_eviction(tokens[:cached], released) >= len(tokens) - cached + reserve_cells

    def _take_over_idle(self, holders: frozenset[int], cached: int) -> int | None:
        """Continue an idle sequence in place when it holds the matched prefix.

        The next turn of a conversation lands here: its own previous KV, no copy.
        Prefer a holder whose whole content is the match, so nothing cached is lost.
        """
        idle = [s for s in holders if self._state[s] is SeqState.IDLE]
        if not idle:
            return None
        exact = [s for s in idle if self._tree.length(s) == cached]
        if exact:
            return exact[0]
        seq = min(idle, key=lambda s: self._last_used[s])
        if self._state.count(SeqState.FREE):
            return None  # copying into a free sequence keeps the idle tail cached too
        victim = self._next_victim(protect=holders)
        if victim is not None and self._tree.exclusive_cells(victim) < self._tree.length(seq) - cached:
            return None  # evicting that one loses fewer cached tokens than this tail
        # Dropping this holder's tail (a finished reply the request answers anew) keeps
        # more cached than evicting another chat whole: with every sequence idle, eight
        # chats asked again would otherwise each evict the next one's prompt.
        self._evictions += 1  # its tail beyond the shared prefix is dropped
        self._truncate(seq, cached)
        return seq

    def _free_seq(self, protect: frozenset[int]) -> int | None:
        for seq, state in enumerate(self._state):
            if state is SeqState.FREE:
                return seq
        victim = self._next_victim(protect)
        if victim is None:
            return None
        self._evict_idle(victim)
        return victim

    # ----- growth and room ---------------------------------------------------------

    def append(self, seq: int, tokens: list[int]) -> None:
        """tokens were just decoded into seq (after its current end)."""
        self._tree.append(seq, tokens)
        self._touch(seq)

    def drop_uncommitted(self, seq: int) -> None:
        """Cells llama.cpp holds for seq past what was appended (draft tokens the worker
        did not keep) are freed: the sequence is again exactly what the tree says."""
        self._backend.seq_rm(seq, self._position(seq, self._tree.length(seq)), -1)

    def make_room(self, n_cells: int, protect: frozenset[int] = frozenset()) -> bool:
        """Evict idle sequences (lowest priority, then least recently used, first) until
        n_cells are free."""
        while self.cells_free < n_cells:
            victim = self._next_victim(protect)
            if victim is None:
                return False
            self._evict_idle(victim)
        return True

    def _room_after_eviction(self, prefix: list[int], released: frozenset[int] = frozenset()) -> int:
        """Free cells if every idle sequence were evicted but the cached prefix kept.

        An idle holder of the prefix is copied from (or truncated) before make_room runs,
        so only the prefix's cells must stay, not the holder's whole tail.
        """
        keep = {s for s, st in enumerate(self._state)
                if st in (SeqState.ACTIVE, SeqState.PINNED) and s not in released}
        return self.n_cells - self._tree.cells_held_by(keep, prefix)

    def evict_one(self) -> bool:
        victim = self._next_victim(frozenset())
        if victim is None:
            return False
        self._evict_idle(victim)
        return True

    # ----- release -----------------------------------------------------------------

    def release(self, seq: int, keep: bool = True, priority: int = 0) -> None:
        """The request on seq ended. keep: leave its KV cached for a later turn; priority:
        the request's (its cells are kept longer than those of lower ones)."""
        if keep and self._tree.length(seq) > 0:
            self._state[seq] = SeqState.IDLE
            self._kept_priority[seq] = priority
            self._touch(seq)
        else:
            self._evict(seq)

    def pin(self, seq: int) -> None:
        self._state[seq] = SeqState.PINNED

    def unpin(self, seq: int) -> None:
        if self._state[seq] is SeqState.PINNED:
            self._state[seq] = SeqState.IDLE
            self._touch(seq)

    # ----- sequences loaded from disk (kv_disk_cache.py) -------------------------------

    def restore_slot(self, n_cells: int, needed: int) -> int | None:
        """A free sequence to load n_cells of saved KV into, evicting idle sequences for a
        sequence id and for the cells; needed: the cells the whole admission will take
        (the loaded ones, the prompt's rest, what running requests were promised).
        None when that does not fit without touching active or pinned sequences."""
        if self._room_after_eviction([]) < needed:
            return None
        seq = self._free_seq(protect=frozenset())
        if seq is None or not self.make_room(n_cells):
            return None
        return seq

    def add_restored(self, seq: int, tokens: list[int]) -> None:
        """tokens were loaded into free seq: cache them as an idle sequence. They get
        cells of their own, even where a live sequence holds the same prefix."""
        self._tree.append(seq, tokens)
        self._state[seq] = SeqState.IDLE
        self._touch(seq)

    def drop(self, seq: int) -> None:
        """Forget whatever a failed load left in seq."""
        self._evict(seq)

    def drop_idle_below(self, priority: int) -> int:
        """Evict the idle sequences last used by requests below priority (a job's items,
        below 0); how many."""
        victims = [s for s in self._evictable(frozenset()) if self._kept_priority[s] < priority]
        for seq in victims:
            self._evict(seq)
        return len(victims)

    def clear(self) -> None:
        for seq in range(self.n_seqs):
            if self._state[seq] is not SeqState.FREE:
                self._evict(seq)

    # ----- internals ---------------------------------------------------------------

    def _touch(self, seq: int) -> None:
        self._clock += 1
        self._last_used[seq] = self._clock

    def _evictable(self, protect: frozenset[int]) -> list[int]:
        return [
            s for s, st in enumerate(self._state) if st is SeqState.IDLE and s not in protect
        ]

    def _next_victim(self, protect: frozenset[int]) -> int | None:
        """The idle sequence to evict next: the lowest priority's, least recently used first."""
        candidates = self._evictable(protect)
        return min(candidates, key=lambda s: (self._kept_priority[s], self._last_used[s])) if candidates else None

    def _truncate(self, seq: int, length: int) -> None:
        if self._tree.length(seq) > length:
            cut = self._position(seq, length)  # before the tree forgets the tokens
            self._tree.truncate(seq, length)
            self._backend.seq_rm(seq, cut, -1)

    def _position(self, seq: int, length: int) -> int:
        return self._position_in(self.seq_tokens(seq), length) if self._position_of else length

    def _position_in(self, tokens: list[int], length: int) -> int:
        return self._position_of(tokens, length) if self._position_of else length

    def _evict_idle(self, seq: int) -> None:
        self._evictions += 1
        self._evict(seq)

    def _evict(self, seq: int) -> None:
        # Unconditional: after a failed decode llama.cpp may hold cells the tree never saw.
        self._tree.remove(seq)
        self._backend.seq_rm(seq, 0, -1)
        self._state[seq] = SeqState.FREE
        self._kept_priority[seq] = 0
