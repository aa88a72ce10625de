"""PrefixTree: exact cell accounting of shared token prefixes (pure Python)."""

from __future__ import annotations

import random

import pytest

from inference.kv.cache_manager import KvCacheManager, SeqState
from inference.kv.prefix_tree import PrefixMatch, PrefixTree, common_prefix_len
from tests.support.reference_kv import ReferenceKv


def tree_with(**seqs: list[int]) -> PrefixTree:
    """A tree where seq N (given as s0=..., s1=...) computed its tokens independently."""
    tree = PrefixTree()
    for name, tokens in seqs.items():
        tree.append(int(name[1:]), tokens)
    return tree


# ----- common_prefix_len --------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ([], [], 0),
        ([1, 2, 3], [], 0),
        ([1, 2, 3], [1, 2, 3], 3),
        ([1, 2, 3], [1, 2], 2),
        ([1, 2, 3], [1, 9, 3], 1),
        ([5], [6], 0),
    ],
)
def test_common_prefix_len_small(a: list[int], b: list[int], expected: int) -> None:
    assert common_prefix_len(a, b) == expected
    assert common_prefix_len(b, a) == expected


@pytest.mark.parametrize("diff_at", [0, 1, 63, 64, 65, 127, 128, 129, 199])
def test_common_prefix_len_crosses_the_64_token_stride(diff_at: int) -> None:
    a = list(range(200))
    b = list(a)
    b[diff_at] = -1
    assert common_prefix_len(a, b) == diff_at
    assert common_prefix_len(a, a[:diff_at]) == diff_at


# ----- append / match -----------------------------------------------------------------


def test_empty_tree() -> None:
    tree = PrefixTree()
    assert tree.cells_used == 0
    assert tree.cells_shared() == 0
    assert tree.sequences() == []
    assert tree.length(3) == 0
    assert tree.tokens(3) == []
    assert tree.match([1, 2, 3]) == PrefixMatch(0, frozenset())
    assert tree.exclusive_cells(3) == 0
    assert tree.truncate(3, 0) == 0


def test_append_counts_cells_and_extends_a_private_leaf() -> None:
    tree = PrefixTree()
    tree.append(0, [1, 2, 3])
    tree.append(0, [4])
    tree.append(0, [])
    assert tree.cells_used == 4
    assert tree.length(0) == 4
    assert tree.tokens(0) == [1, 2, 3, 4]
    assert tree.sequences() == [0]
    assert tree.exclusive_cells(0) == 4
    # a private leaf grows in place: still one node
    assert len(list(tree._nodes())) == 1


def test_append_does_not_alias_the_callers_list() -> None:
    tree = PrefixTree()
    tokens = [1, 2, 3]
    tree.append(0, tokens)
    tokens.append(99)
    tree.append(0, [4])
    assert tokens == [1, 2, 3, 99]
    assert tree.tokens(0) == [1, 2, 3, 4]


def test_match_full_partial_and_none() -> None:
    tree = tree_with(s0=[1, 2, 3, 4])
    assert tree.match([1, 2, 3, 4, 5]) == PrefixMatch(4, frozenset({0}))
    assert tree.match([1, 2, 9]) == PrefixMatch(2, frozenset({0}))
    assert tree.match([1, 2]) == PrefixMatch(2, frozenset({0}))
    assert tree.match([7, 1, 2]) == PrefixMatch(0, frozenset())
    assert tree.match([]) == PrefixMatch(0, frozenset())


def test_match_reports_only_sequences_holding_the_whole_match() -> None:
    tree = tree_with(s0=[1, 2, 3, 4])
    tree.fork([1, 2, 3, 4], 2, 1)  # seq 1 holds [1, 2] only
    tree.append(1, [7])
    assert tree.match([1, 2, 3]) == PrefixMatch(3, frozenset({0}))
    assert tree.match([1, 2]) == PrefixMatch(2, frozenset({0, 1}))
    assert tree.match([1, 2, 7, 7]) == PrefixMatch(3, frozenset({1}))


# ----- fork ----------------------------------------------------------------------------


def test_fork_whole_sequence_shares_every_cell() -> None:
    tree = tree_with(s0=[1, 2, 3])
    source = tree.fork([1, 2, 3, 9], 3, 5)
    assert source == 0
    assert tree.tokens(5) == [1, 2, 3]
    assert tree.cells_used == 3
    assert tree.cells_shared() == 3
    assert tree.exclusive_cells(0) == 0
    assert tree.exclusive_cells(5) == 0


def test_fork_mid_node_splits_and_keeps_both_sequences_intact() -> None:
    tree = tree_with(s0=[1, 2, 3, 4, 5])
    assert tree.fork([1, 2, 3, 8], 3, 1) == 0
    assert tree.tokens(0) == [1, 2, 3, 4, 5]
    assert tree.tokens(1) == [1, 2, 3]
    assert tree.length(1) == 3
    assert tree.cells_used == 5
    assert tree.cells_shared() == 3
    assert tree.exclusive_cells(0) == 2
    assert tree.exclusive_cells(1) == 0
    # diverging after the split adds a branch; the shared head is not counted twice
    tree.append(1, [8, 8])
    assert tree.tokens(1) == [1, 2, 3, 8, 8]
    assert tree.tokens(0) == [1, 2, 3, 4, 5]
    assert tree.cells_used == 7
    assert tree.exclusive_cells(1) == 2
    assert tree.match([1, 2, 3, 4]) == PrefixMatch(4, frozenset({0}))
    assert tree.match([1, 2, 3, 8]) == PrefixMatch(4, frozenset({1}))
    assert tree.match([1, 2, 3]) == PrefixMatch(3, frozenset({0, 1}))


def test_fork_of_a_fork_splits_a_split_node_again() -> None:
    tree = tree_with(s0=list(range(10)))
    tree.fork(list(range(10)), 6, 1)
    tree.fork(list(range(10)), 3, 2)
    tree.append(2, [100])
    tree.append(1, [200])
    assert tree.tokens(0) == list(range(10))
    assert tree.tokens(1) == list(range(6)) + [200]
    assert tree.tokens(2) == list(range(3)) + [100]
    assert tree.cells_used == 12
    assert tree.cells_shared() == 6  # [0..2] held by 3, [3..5] held by 2
    assert tree.cells_held_by({2}) == 4
    assert tree.cells_held_by({1, 2}) == 8
    assert tree.cells_held_by({0, 1, 2}) == 12
    assert tree.cells_held_by(set()) == 0
    assert tree.cells_held_by({42}) == 0


def test_cells_held_by_with_a_prefix_adds_its_cached_cells_once() -> None:
    tree = tree_with(s0=list(range(10)))
    tree.fork(list(range(10)), 4, 1)
    tree.append(1, [50, 51])
    # seq 0: [0..3]{0,1} [4..9]{0};  seq 1: [0..3]{0,1} [50,51]{1}
    assert tree.cells_held_by(set(), list(range(7)) + [99]) == 7
    assert tree.cells_held_by({1}, list(range(7))) == 6 + 3  # [0..3] counted once
    assert tree.cells_held_by({0}, list(range(7))) == 10
    assert tree.cells_held_by({1}, [0, 1, 50, 51]) == 6  # the prefix path is seq 1's own
    assert tree.cells_held_by({1}, [0, 1, 2, 3, 50]) == 6
    assert tree.cells_held_by({1}, [77]) == 6  # nothing cached
    assert tree.cells_held_by({1}, []) == 6
    assert tree.cells_held_by(set(), [0, 1, 2, 3, 50]) == 5


def test_fork_into_a_non_empty_sequence_is_refused() -> None:
    tree = tree_with(s0=[1, 2, 3], s1=[4])
    with pytest.raises(ValueError, match="not empty"):
        tree.fork([1, 2, 3], 2, 1)
    assert tree.tokens(1) == [4]
    assert tree.cells_used == 4


@pytest.mark.parametrize(("tokens", "length"), [([1, 2, 3], 4), ([1, 9], 2), ([1, 2], 0), ([5], 1)])
def test_fork_of_uncached_tokens_is_refused(tokens: list[int], length: int) -> None:
    tree = tree_with(s0=[1, 2, 3])
    with pytest.raises(ValueError, match="cached"):
        tree.fork(tokens, length, 1)
    assert tree.length(1) == 0
    assert tree.sequences() == [0]
    assert tree.cells_shared() == 0


def test_fork_then_appending_to_the_source_branches_too() -> None:
    tree = tree_with(s0=[1, 2])
    tree.fork([1, 2], 2, 1)
    tree.append(0, [3])
    tree.append(1, [4])
    assert tree.tokens(0) == [1, 2, 3]
    assert tree.tokens(1) == [1, 2, 4]
    assert tree.cells_used == 4
    assert tree.cells_shared() == 2


# ----- duplicate first-token children ---------------------------------------------------


def test_independently_computed_same_tokens_hold_separate_cells() -> None:
    tree = tree_with(s0=[1, 2, 3], s1=[1, 2, 3])
    assert tree.cells_used == 6
    assert tree.cells_shared() == 0
    assert tree.exclusive_cells(0) == 3
    assert tree.exclusive_cells(1) == 3
    match = tree.match([1, 2, 3])
    assert match.length == 3 and len(match.holders) == 1  # one physical copy is matched
    assert tree.remove(0) == 3
    assert tree.match([1, 2, 3]) == PrefixMatch(3, frozenset({1}))


def test_match_prefers_the_duplicate_child_with_the_longest_match() -> None:
    tree = tree_with(s0=[1, 2, 9], s1=[1, 2, 3, 4])
    assert tree.match([1, 2, 3, 4, 5]) == PrefixMatch(4, frozenset({1}))
    assert tree.match([1, 2, 9, 9]) == PrefixMatch(3, frozenset({0}))
    assert tree.fork([1, 2, 3, 4], 4, 7) == 1
    assert tree.cells_used == 7
    assert tree.cells_shared() == 4


# ----- truncate / remove ------------------------------------------------------------------


def test_truncate_private_sequence_mid_node() -> None:
    tree = tree_with(s0=[1, 2, 3, 4, 5])
    assert tree.truncate(0, 2) == 3
    assert tree.tokens(0) == [1, 2]
    assert tree.cells_used == 2
    assert tree.truncate(0, 2) == 0
    assert tree.truncate(0, 10) == 0
    tree.append(0, [7])
    assert tree.tokens(0) == [1, 2, 7]
    assert len(list(tree._nodes())) == 1  # grows the trimmed node in place again


def test_truncate_shared_cells_frees_nothing() -> None:
    tree = tree_with(s0=[1, 2, 3, 4])
    tree.fork([1, 2, 3, 4], 4, 1)
    assert tree.truncate(1, 2) == 0
    assert tree.tokens(1) == [1, 2]
    assert tree.tokens(0) == [1, 2, 3, 4]
    assert tree.cells_used == 4
    assert tree.cells_shared() == 2
    assert tree.exclusive_cells(0) == 2


def test_truncate_across_a_branch_point() -> None:
    tree = tree_with(s0=[1, 2, 3, 4])
    tree.fork([1, 2, 3, 4], 2, 1)
    tree.append(1, [5, 6])
    # seq 1 is [1,2 | 5,6]; cutting at 1 drops its private branch and one shared cell
    assert tree.truncate(1, 1) == 2
    assert tree.tokens(1) == [1]
    assert tree.tokens(0) == [1, 2, 3, 4]
    assert tree.cells_used == 4
    assert tree.cells_shared() == 1
    tree.append(1, [8])
    assert tree.tokens(1) == [1, 8]
    assert tree.cells_used == 5


def test_remove_returns_exclusive_cells_and_forgets_the_sequence() -> None:
    tree = tree_with(s0=[1, 2, 3, 4])
    tree.fork([1, 2, 3, 4], 3, 1)
    tree.append(1, [9, 9])
    expected = tree.exclusive_cells(1)
    assert expected == 2
    assert tree.remove(1) == expected
    assert 1 not in tree.sequences()
    assert tree.length(1) == 0
    assert tree.cells_used == 4
    assert tree.remove(0) == 4
    assert tree.cells_used == 0
    assert list(tree._nodes()) == []


def test_removing_the_source_keeps_the_forked_copy() -> None:
    tree = tree_with(s0=[1, 2, 3, 4])
    tree.fork([1, 2, 3, 4], 2, 1)
    assert tree.remove(0) == 2
    assert tree.tokens(1) == [1, 2]
    assert tree.cells_used == 2
    assert tree.match([1, 2, 3]) == PrefixMatch(2, frozenset({1}))
    tree.append(1, [3])  # now private and childless again: grows in place
    assert tree.tokens(1) == [1, 2, 3]
    assert tree.cells_used == 3


def test_exclusive_cells_stops_at_the_first_shared_node() -> None:
    tree = tree_with(s0=[1, 2, 3])
    tree.fork([1, 2, 3], 3, 1)
    tree.append(1, [4, 5])
    tree.fork([1, 2, 3, 4, 5], 4, 2)
    tree.append(1, [6])
    # seq 1: [1,2,3]{0,1,2} [4]{1,2} [5,6]{1}
    assert tree.exclusive_cells(1) == 2
    assert tree.exclusive_cells(2) == 0
    assert tree.exclusive_cells(0) == 0
    assert tree.cells_used == 6


# ----- randomized against the reference KV cache -----------------------------------------

ALPHABET = 3  # few distinct tokens: lots of shared prefixes and duplicate children


def assert_agrees(tree: PrefixTree, ref: ReferenceKv, seqs: range) -> None:
    assert tree.cells_used == ref.used
    assert tree.cells_shared() == ref.shared()
    for seq in seqs:
        assert tree.tokens(seq) == ref.seq_tokens(seq), f"seq {seq}"
        assert tree.length(seq) == ref.seq_len(seq), f"seq {seq}"
        assert tree.exclusive_cells(seq) == ref.exclusive(seq), f"seq {seq}"
    assert sorted(tree.sequences()) == sorted(s for s in seqs if ref.seq_len(s))
    group = set(seqs[::2])
    assert tree.cells_held_by(group) == ref.held_by(group)
    for seq in seqs:  # the cells a request forking a prefix of seq would need kept
        query = tree.tokens(seq)[: max(1, tree.length(seq) // 2)] + [ALPHABET]
        match = tree.match(query)
        path = set()
        if match.length:
            holder = next(iter(match.holders))
            path = {id(c) for c in ref.seq_cells(holder) if c.pos < match.length}
        expected = {id(c) for c in ref.cells if c.seqs & group} | path
        assert tree.cells_held_by(group, query) == len(expected)


def random_tokens(rng: random.Random, n: int) -> list[int]:
    return [rng.randrange(ALPHABET) for _ in range(n)]


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_direct_tree_ops_match_reference_kv(seed: int) -> None:
    rng = random.Random(seed)
    n_seqs = 6
    tree, ref = PrefixTree(), ReferenceKv(n_cells=10_000)
    for _ in range(300):
        seq = rng.randrange(n_seqs)
        op = rng.choice(["append", "append", "fork", "fork", "truncate", "remove"])
        if op == "append":
            tokens = random_tokens(rng, rng.randint(1, 5))
            ref.decode(seq, tree.length(seq), tokens)
            tree.append(seq, tokens)
        elif op == "fork" and tree.length(seq) == 0:
            others = [s for s in range(n_seqs) if tree.length(s)]
            if not others:
                continue
            base = tree.tokens(rng.choice(others))
            query = base[: rng.randint(1, len(base))] + random_tokens(rng, rng.randint(0, 3))
            match = tree.match(query)
            length = rng.randint(1, match.length)
            source = tree.fork(query, length, seq)
            assert ref.seq_tokens(source)[:length] == query[:length]
            if length == match.length:
                assert source in match.holders
            ref.seq_cp(source, seq, 0, length)
            assert tree.tokens(seq) == query[:length]
        elif op == "truncate":
            length = rng.randint(0, tree.length(seq))
            before = ref.used
            freed = tree.truncate(seq, length)
            ref.seq_rm(seq, length, -1)
            assert freed == before - ref.used
        elif op == "remove":
            before = ref.used
            freed = tree.remove(seq)
            ref.seq_rm(seq, 0, -1)
            assert freed == before - ref.used
        assert_agrees(tree, ref, range(n_seqs))


def _could_allocate(kv: KvCacheManager, ref: ReferenceKv, reusable: list[int], needed: int) -> bool:
    """Whether evicting idle sequences (keeping the reused prefix) would fit the request."""
    states = [kv.state(s) for s in range(kv.n_seqs)]
    if SeqState.FREE not in states and SeqState.IDLE not in states:
        return False
    keep = {s for s, st in enumerate(states) if st in (SeqState.ACTIVE, SeqState.PINNED)}
    match = kv._tree.match(reusable)
    path = set()
    if match.length:
        path = {id(c) for c in ref.seq_cells(next(iter(match.holders))) if c.pos < match.length}
    stay = {id(c) for c in ref.cells if c.seqs & keep} | path
    return kv.n_cells - len(stay) >= needed - match.length


def _kv_step(kv: KvCacheManager, ref: ReferenceKv, rng: random.Random, prompts: list[list[int]]) -> None:
    """One random thing the scheduler could ask of the KV manager."""
    active = [s for s in range(kv.n_seqs) if kv.state(s) is SeqState.ACTIVE]
    op = rng.choice(["allocate", "allocate", "grow", "grow", "release", "evict", "pin", "room"])
    if op == "allocate":
        base = rng.choice(prompts + [kv.seq_tokens(s) for s in range(kv.n_seqs)])
        tokens = base[: rng.randint(0, len(base))] + random_tokens(rng, rng.randint(1, 8))
        reuse = rng.choice([len(tokens) - 1, len(tokens)])
        reserve = rng.randint(0, 6)
        before = (kv.stats(), len(ref.calls))
        alloc = kv.allocate(tokens, reuse_limit=reuse, reserve_cells=reserve)
        if alloc is None:
            assert (kv.stats(), len(ref.calls)) == before, "a refused allocation changed state"
            assert not _could_allocate(kv, ref, tokens[:reuse], len(tokens) + reserve)
            return
        assert 0 <= alloc.cached <= reuse
        assert ref.seq_tokens(alloc.seq) == tokens[: alloc.cached]
        ref.decode(alloc.seq, alloc.cached, tokens[alloc.cached :])
        kv.append(alloc.seq, tokens[alloc.cached :])
    elif op == "grow" and active:
        seq = rng.choice(active)
        n = rng.randint(1, 4)
        if kv.make_room(n):
            tokens = random_tokens(rng, n)
            ref.decode(seq, kv.seq_len(seq), tokens)
            kv.append(seq, tokens)
    elif op == "release" and active:
        kv.release(rng.choice(active), keep=rng.random() < 0.8)
    elif op == "evict":
        kv.evict_one()
    elif op == "pin" and active:
        seq = rng.choice(active)
        if kv.seq_len(seq):
            kv.pin(seq)
    elif op == "room":
        kv.make_room(rng.randint(0, kv.n_cells))
    pinned = [s for s in range(kv.n_seqs) if kv.state(s) is SeqState.PINNED]
    if pinned and rng.random() < 0.1:
        kv.unpin(rng.choice(pinned))


@pytest.mark.parametrize("seed", [11, 12, 13, 14, 15, 16])
def test_kv_manager_over_reference_kv(seed: int) -> None:
    rng = random.Random(seed)
    n_cells, n_seqs = 48, 5
    ref = ReferenceKv(n_cells)  # raises if the manager lets the cache overflow
    kv = KvCacheManager(n_cells, n_seqs, backend=ref)
    prompts = [random_tokens(rng, 12) for _ in range(3)]
    for _ in range(400):
        _kv_step(kv, ref, rng, prompts)
        assert kv.cells_used == ref.used <= n_cells
        assert kv.cells_free == n_cells - ref.used
        assert_agrees(kv._tree, ref, range(n_seqs))
        for seq in range(n_seqs):
            if kv.state(seq) is SeqState.FREE:
                assert ref.seq_len(seq) == 0
            else:
                assert kv.seq_len(seq) > 0 or kv.state(seq) is SeqState.ACTIVE
    kv.clear()
    assert ref.used == 0 and kv.cells_used == 0
    assert kv.stats().seqs_active == kv.stats().seqs_idle == kv.stats().seqs_pinned == 0
