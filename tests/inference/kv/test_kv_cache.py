"""KvCacheManager: sequence ids, prefix reuse, eviction and room (pure Python).

The backend is the reference unified KV cache from tests/support/reference_kv.py, so every test
also checks that what the manager believes matches what llama.cpp would hold.
"""

from __future__ import annotations

import pytest

from inference.kv.cache_manager import Allocation, KvCacheManager, KvStats, SeqState
from tests.support.reference_kv import ReferenceKv


def make(n_cells: int = 100, n_seqs: int = 4) -> tuple[KvCacheManager, ReferenceKv]:
    ref = ReferenceKv(n_cells)
    return KvCacheManager(n_cells, n_seqs, backend=ref), ref


def admit(kv: KvCacheManager, ref: ReferenceKv, tokens: list[int], reserve: int = 0) -> Allocation:
    """Allocate like the scheduler does and compute the uncached tokens."""
    alloc = kv.allocate(tokens, reuse_limit=len(tokens) - 1, reserve_cells=reserve)
    assert alloc is not None, "allocation refused"
    ref.decode(alloc.seq, alloc.cached, tokens[alloc.cached :])
    kv.append(alloc.seq, tokens[alloc.cached :])
    return alloc


def finished(kv: KvCacheManager, ref: ReferenceKv, tokens: list[int]) -> int:
    """A request that ran and ended, leaving its KV idle."""
    seq = admit(kv, ref, tokens).seq
    kv.release(seq)
    return seq


def assert_consistent(kv: KvCacheManager, ref: ReferenceKv) -> None:
    assert kv.cells_used == ref.used
    for seq in range(kv.n_seqs):
        assert kv.seq_tokens(seq) == ref.seq_tokens(seq)
        if kv.state(seq) is SeqState.FREE:
            assert ref.seq_len(seq) == 0


def span(start: int, n: int) -> list[int]:
    return list(range(start, start + n))


# ----- allocation and prefix reuse ---------------------------------------------------


def test_first_allocation_gets_seq_0_with_nothing_cached() -> None:
    kv, ref = make()
    alloc = kv.allocate(span(0, 10), reuse_limit=9, reserve_cells=5)
    assert alloc == Allocation(seq=0, cached=0)
    assert kv.state(0) is SeqState.ACTIVE
    assert kv.cells_used == 0  # nothing is counted before it is decoded
    assert ref.calls == []


def test_prefix_is_copied_from_an_idle_sequence_when_a_seq_id_is_free() -> None:
    kv, ref = make()
    a = finished(kv, ref, span(0, 10))
    alloc = admit(kv, ref, span(0, 6) + [99, 98])
    assert alloc.seq != a
    assert alloc.cached == 6
    assert ref.copies() == [("cp", a, alloc.seq, 0, 6)]
    # the idle sequence keeps its whole tail for someone else
    assert kv.state(a) is SeqState.IDLE
    assert kv.seq_tokens(a) == span(0, 10)
    assert kv.seq_tokens(alloc.seq) == span(0, 6) + [99, 98]
    assert kv.cells_used == 12
    assert kv.stats().cells_shared == 6
    assert_consistent(kv, ref)


def test_prefix_is_copied_from_a_running_sequence() -> None:
    kv, ref = make()
    a = admit(kv, ref, span(0, 10)).seq
    b = admit(kv, ref, span(0, 8) + [50])
    assert b.cached == 8
    assert ref.copies() == [("cp", a, b.seq, 0, 8)]
    assert kv.state(a) is SeqState.ACTIVE
    assert_consistent(kv, ref)


def test_reuse_limit_leaves_the_last_token_to_compute() -> None:
    kv, ref = make()
    finished(kv, ref, span(0, 10))
    alloc = kv.allocate(span(0, 10), reuse_limit=9, reserve_cells=0)
    assert alloc is not None and alloc.cached == 9
    alloc_all = kv.allocate(span(0, 10), reuse_limit=10, reserve_cells=0)
    assert alloc_all is not None and alloc_all.cached == 10


def test_next_turn_takes_over_its_idle_sequence_without_copying() -> None:
    kv, ref = make()
    turn1 = span(0, 10)
    a = finished(kv, ref, turn1)
    finished(kv, ref, [7, 7, 7])  # another conversation, unrelated
    ref.calls.clear()
    alloc = admit(kv, ref, turn1 + [40, 41, 42])
    assert alloc == Allocation(seq=a, cached=10)
    assert ref.calls == []  # no seq_cp, no seq_rm: its own KV continues
    assert kv.seq_tokens(a) == turn1 + [40, 41, 42]
    assert kv.stats().evictions == 0
    assert_consistent(kv, ref)


def test_an_idle_holder_is_truncated_and_taken_over_only_when_no_seq_id_is_left() -> None:
    kv, ref = make(n_seqs=1)
    a = finished(kv, ref, span(0, 10))
    ref.calls.clear()
    alloc = admit(kv, ref, span(0, 4) + [77])
    assert alloc == Allocation(seq=a, cached=4)
    assert ref.calls == [("rm", a, 4, -1)]
    assert kv.seq_tokens(a) == span(0, 4) + [77]
    assert kv.stats().evictions == 1
    assert_consistent(kv, ref)


def test_exact_idle_holder_is_preferred_over_a_longer_one() -> None:
    kv, ref = make()
    long = finished(kv, ref, span(0, 10))
    short = kv.allocate(span(0, 6), reuse_limit=6, reserve_cells=0)  # prefill-only, all cached
    assert short is not None and short.cached == 6
    kv.release(short.seq)
    ref.calls.clear()
    alloc = admit(kv, ref, span(0, 6) + [60])
    assert alloc.seq == short.seq
    assert ref.calls == []
    assert kv.seq_tokens(long) == span(0, 10)


# ----- refusals leave nothing half-done ------------------------------------------------


def test_no_seq_id_returns_none_and_changes_nothing() -> None:
    kv, ref = make(n_seqs=2)
    admit(kv, ref, span(0, 5))
    admit(kv, ref, span(0, 5))
    before = (kv.stats(), list(ref.calls))
    assert kv.allocate(span(0, 5) + [9], reuse_limit=5, reserve_cells=0) is None
    assert kv.allocate([42, 43], reuse_limit=1, reserve_cells=0) is None
    assert (kv.stats(), ref.calls) == before


def test_no_room_returns_none_without_evicting_anything() -> None:
    kv, ref = make(n_cells=30)
    admit(kv, ref, span(0, 15))  # active: 15 cells that cannot go
    idle = finished(kv, ref, span(100, 10))
    before = (kv.stats(), list(ref.calls))
    # 20 new cells do not fit even if the idle sequence went: refuse without evicting it
    assert kv.allocate(span(200, 20), reuse_limit=19, reserve_cells=0) is None
    assert (kv.stats(), ref.calls) == before
    assert kv.state(idle) is SeqState.IDLE
    # the reserve counts too
    assert kv.allocate(span(200, 10), reuse_limit=9, reserve_cells=6) is None
    assert kv.state(idle) is SeqState.IDLE
    # 15 fit once the idle one is evicted
    alloc = kv.allocate(span(200, 10), reuse_limit=9, reserve_cells=5)
    assert alloc is not None
    assert kv.state(idle) is SeqState.FREE
    assert kv.stats().evictions == 1
    assert_consistent(kv, ref)


def test_idle_holder_of_the_prefix_does_not_block_a_request_that_fits() -> None:
    """One long idle chat fills most cells; a new chat shares only its system prompt.

    Copying the prefix and then evicting the idle chat makes room, so the request must
    be admitted rather than refused (with nothing running it would be refused for ever).
    """
    kv, ref = make(n_cells=100, n_seqs=4)
    system = span(0, 10)
    long_chat = finished(kv, ref, system + span(1000, 80))
    alloc = admit(kv, ref, system + span(2000, 40), reserve=4)
    assert alloc.cached == 10
    assert ref.copies() == [("cp", long_chat, alloc.seq, 0, 10)]
    assert kv.state(long_chat) is SeqState.FREE  # evicted after the copy
    assert kv.seq_tokens(alloc.seq) == system + span(2000, 40)
    assert_consistent(kv, ref)


def test_room_check_counts_a_pinned_and_an_idle_shared_prefix_once() -> None:
    kv, ref = make(n_cells=40, n_seqs=4)
    pinned = finished(kv, ref, span(0, 10))
    kv.pin(pinned)
    idle = finished(kv, ref, span(0, 10) + span(100, 20))  # shares the pinned 10
    assert kv.cells_used == 30
    tokens = span(0, 10) + span(100, 5) + [7] * 20
    # needs 20 new cells + reserve; 15 stay (pinned 10 + 5 of the idle chat's cells)
    before = (kv.stats(), list(ref.calls))
    assert kv.allocate(tokens, reuse_limit=len(tokens) - 1, reserve_cells=6) is None
    assert (kv.stats(), ref.calls) == before
    alloc = admit(kv, ref, tokens, reserve=5)
    assert alloc.cached == 15
    assert kv.state(pinned) is SeqState.PINNED
    assert kv.state(idle) is SeqState.FREE
    assert kv.cells_free == 5
    assert_consistent(kv, ref)


# ----- eviction -------------------------------------------------------------------------


def test_lru_idle_sequence_is_evicted_first() -> None:
    kv, ref = make(n_cells=40, n_seqs=4)
    s0 = finished(kv, ref, span(0, 10))
    s1 = finished(kv, ref, span(100, 10))
    s2 = finished(kv, ref, span(200, 10))
    # s0's next turn makes it the most recently used idle sequence
    assert admit(kv, ref, span(0, 10) + [1]).seq == s0
    kv.release(s0)
    assert kv.cells_free == 9
    ref.calls.clear()
    s3 = admit(kv, ref, span(300, 10)).seq
    assert ref.calls == [("rm", s1, 0, -1)]
    assert [kv.state(s) for s in (s0, s1, s2, s3)] == [
        SeqState.IDLE, SeqState.FREE, SeqState.IDLE, SeqState.ACTIVE,
    ]
    assert kv.stats().evictions == 1
    assert_consistent(kv, ref)


def test_seq_id_shortage_evicts_the_lru_idle_sequence() -> None:
    kv, ref = make(n_cells=100, n_seqs=2)
    old = finished(kv, ref, span(0, 10))
    new = finished(kv, ref, span(100, 10))
    alloc = admit(kv, ref, span(200, 5))
    assert alloc.seq == old
    assert kv.state(new) is SeqState.IDLE
    assert kv.seq_tokens(old) == span(200, 5)
    assert_consistent(kv, ref)


def test_idle_sequences_of_lower_priority_are_evicted_before_older_ones_of_higher() -> None:
    """The chat typed in (priority 10) idles between its turns while a job (priority -1)
    finishes items: each new item evicts a job's sequence, never the chat's. Before, the
    chat's, least recently used, went at the first admission and every turn computed the
    whole conversation again."""
    kv, ref = make(n_cells=200, n_seqs=3)
    chat = admit(kv, ref, span(0, 20)).seq
    kv.release(chat, priority=10)
    job = admit(kv, ref, span(100, 10)).seq
    kv.release(job, priority=-1)
    other = admit(kv, ref, span(300, 10)).seq
    kv.release(other, priority=1)
    for item in range(4):  # each the most recent; the chat the oldest all along
        seq = admit(kv, ref, span(1000 + 100 * item, 10)).seq
        assert seq == job, "a job's item takes the job's idle sequence"
        kv.release(seq, priority=-1)
    assert kv.state(chat) is SeqState.IDLE and kv.seq_tokens(chat) == span(0, 20)
    assert kv.state(other) is SeqState.IDLE
    kv.release(admit(kv, ref, span(2000, 10)).seq, priority=-1)
    assert kv.make_room(175)  # 160 free: the job's 10 cells first, then the tab's; the chat's kept
    assert [kv.state(s) for s in (chat, other, job)] == [SeqState.IDLE, SeqState.FREE, SeqState.FREE]
    assert_consistent(kv, ref)


def test_idle_sequences_below_a_priority_are_dropped_and_the_rest_kept() -> None:
    """bench-jobs' chat alone: the job's idle items dropped, the chat's own history and a
    pinned prefix kept, a running request untouched."""
    kv, ref = make(n_cells=200, n_seqs=4)
    chat = admit(kv, ref, span(0, 20)).seq
    kv.release(chat, priority=10)
    job = admit(kv, ref, span(100, 10)).seq
    kv.release(job, priority=-1)
    pinned = admit(kv, ref, span(300, 10)).seq
    kv.pin(pinned)
    running = admit(kv, ref, span(500, 10)).seq
    assert kv.drop_idle_below(0) == 1
    assert [kv.state(s) for s in (chat, job, pinned, running)] == [
        SeqState.IDLE, SeqState.FREE, SeqState.PINNED, SeqState.ACTIVE]
    assert kv.cells_used == 40 and kv.drop_idle_below(0) == 0
    assert_consistent(kv, ref)


def test_make_room_evicts_only_what_is_needed_in_lru_order() -> None:
    kv, ref = make(n_cells=30, n_seqs=4)
    a = finished(kv, ref, span(0, 10))
    b = finished(kv, ref, span(100, 10))
    c = finished(kv, ref, span(200, 10))
    assert kv.cells_free == 0
    assert kv.make_room(0)
    assert kv.make_room(5)
    assert [kv.state(s) for s in (a, b, c)] == [SeqState.FREE, SeqState.IDLE, SeqState.IDLE]
    assert kv.make_room(20)
    assert [kv.state(s) for s in (a, b, c)] == [SeqState.FREE, SeqState.FREE, SeqState.IDLE]
    assert kv.stats().evictions == 2
    assert_consistent(kv, ref)


def test_make_room_respects_protect_and_reports_failure() -> None:
    kv, ref = make(n_cells=20, n_seqs=3)
    a = finished(kv, ref, span(0, 10))
    b = finished(kv, ref, span(100, 10))
    assert not kv.make_room(15, protect=frozenset({a, b}))
    assert kv.state(a) is kv.state(b) is SeqState.IDLE
    assert kv.make_room(10, protect=frozenset({a}))
    assert kv.state(a) is SeqState.IDLE and kv.state(b) is SeqState.FREE
    # it evicts what it can before giving up (the scheduler then uses what is free)
    assert not kv.make_room(21)
    assert kv.state(a) is SeqState.FREE
    assert kv.cells_free == 20


def test_pinned_and_active_sequences_are_never_evicted() -> None:
    kv, ref = make(n_cells=30, n_seqs=4)
    pinned = finished(kv, ref, span(0, 10))
    kv.pin(pinned)
    active = admit(kv, ref, span(100, 10)).seq
    assert not kv.evict_one()
    assert not kv.make_room(11)
    assert kv.allocate(span(200, 11), reuse_limit=10, reserve_cells=0) is None
    assert kv.state(pinned) is SeqState.PINNED
    assert kv.state(active) is SeqState.ACTIVE
    assert kv.cells_used == 20
    # a pinned prefix is still shared by copy
    alloc = admit(kv, ref, span(0, 10) + [5])
    assert alloc.cached == 10 and alloc.seq not in (pinned, active)
    assert kv.state(pinned) is SeqState.PINNED
    # once unpinned it is idle and evictable
    kv.unpin(pinned)
    assert kv.state(pinned) is SeqState.IDLE
    kv.unpin(active)  # not pinned: no effect
    assert kv.state(active) is SeqState.ACTIVE
    assert kv.evict_one()
    assert kv.state(pinned) is SeqState.FREE
    assert kv.seq_tokens(alloc.seq) == span(0, 10) + [5]  # its copy survives
    assert_consistent(kv, ref)


def test_pinned_seq_for_finds_exact_token_match_only() -> None:
    kv, ref = make()
    seq = finished(kv, ref, span(0, 5))
    assert kv.pinned_seq_for(span(0, 5)) is None  # idle, not pinned
    kv.pin(seq)
    assert kv.pinned_seq_for(span(0, 5)) == seq
    assert kv.pinned_seq_for(span(0, 4)) is None
    assert kv.pinned_seq_for(span(0, 6)) is None


# ----- release ----------------------------------------------------------------------------


def test_release_keep_leaves_the_kv_idle() -> None:
    kv, ref = make()
    seq = admit(kv, ref, span(0, 10)).seq
    kv.release(seq, keep=True)
    assert kv.state(seq) is SeqState.IDLE
    assert kv.seq_len(seq) == 10
    assert kv.cells_used == 10
    assert ref.calls == []


def test_release_without_keep_frees_cells_and_the_seq_id() -> None:
    kv, ref = make()
    seq = admit(kv, ref, span(0, 10)).seq
    kv.release(seq, keep=False)
    assert kv.state(seq) is SeqState.FREE
    assert kv.cells_used == 0
    assert ref.calls == [("rm", seq, 0, -1)]
    assert kv.stats().evictions == 0  # a dropped request is not an eviction


def test_release_of_an_empty_sequence_frees_it_and_still_clears_llama() -> None:
    """After a failed decode llama.cpp may hold cells the tree never saw."""
    kv, ref = make()
    alloc = kv.allocate([1, 2, 3], reuse_limit=2, reserve_cells=0)
    assert alloc is not None
    ref.decode(alloc.seq, 0, [1, 2])  # partially decoded, never committed to the tree
    kv.release(alloc.seq, keep=True)
    assert kv.state(alloc.seq) is SeqState.FREE
    assert ("rm", alloc.seq, 0, -1) in ref.calls
    assert ref.used == 0


def test_release_of_a_forked_sequence_keeps_the_shared_cells() -> None:
    kv, ref = make()
    a = finished(kv, ref, span(0, 10))
    b = admit(kv, ref, span(0, 8) + [1, 2]).seq
    kv.release(b, keep=False)
    assert kv.cells_used == 10
    assert kv.seq_tokens(a) == span(0, 10)
    assert_consistent(kv, ref)


def test_clear_frees_everything_including_pinned() -> None:
    kv, ref = make()
    p = finished(kv, ref, span(0, 5))
    kv.pin(p)
    finished(kv, ref, span(10, 5))
    admit(kv, ref, span(20, 5))
    kv.clear()
    assert kv.cells_used == 0 and ref.used == 0
    assert all(kv.state(s) is SeqState.FREE for s in range(kv.n_seqs))


# ----- stats ------------------------------------------------------------------------------


def test_stats_counts_cells_and_states() -> None:
    kv, ref = make(n_cells=64, n_seqs=5)
    p = finished(kv, ref, span(0, 8))
    kv.pin(p)
    finished(kv, ref, span(0, 8) + span(100, 4))  # shares 8 with the pinned prefix
    admit(kv, ref, span(200, 6))
    assert kv.stats() == KvStats(
        cells_total=64,
        cells_used=18,
        cells_shared=8,
        seqs_total=5,
        seqs_active=1,
        seqs_idle=1,
        seqs_pinned=1,
        evictions=0,
    )
    assert kv.cells_free == 46


@pytest.mark.parametrize("n_seqs", [1, 3])
def test_every_seq_id_can_be_used(n_seqs: int) -> None:
    kv, ref = make(n_cells=100, n_seqs=n_seqs)
    seqs = {admit(kv, ref, span(10 * i, 5)).seq for i in range(n_seqs)}
    assert seqs == set(range(n_seqs))
    assert kv.allocate([1, 2], reuse_limit=1, reserve_cells=0) is None
