"""Taking over an idle sequence when every sequence is idle (pure Python): a request that
asks a finished chat's prompt again (a retry, a repeated round) drops that chat's old reply
tail rather than evicting another chat whole. Before, eight chats asked again on eight
sequences each evicted the next one's prompt: 79 prompt tokens computed instead of 8."""

from __future__ import annotations

from inference.kv.cache_manager import KvCacheManager
from tests.inference.kv.test_kv_cache import admit, assert_consistent, make

SHARED = list(range(100, 140))  # a system prompt every chat starts with


def chat(i: int) -> list[int]:
    return SHARED + [500 + 10 * i + k for k in range(6)]  # its own question


def finish_with_reply(kv: KvCacheManager, ref, tokens: list[int], reply: list[int]) -> int:
    alloc = admit(kv, ref, tokens)
    ref.decode(alloc.seq, len(tokens), reply)
    kv.append(alloc.seq, reply)
    kv.release(alloc.seq)
    return alloc.seq


def test_asking_every_chat_again_finds_each_prompt_cached() -> None:
    kv, ref = make(n_cells=400, n_seqs=3)
    seqs = [finish_with_reply(kv, ref, chat(i), [900 + i] * 8) for i in range(3)]
    cached = []
    for i in range(3):
        alloc = kv.allocate(chat(i), reuse_limit=len(chat(i)) - 1, reserve_cells=0)
        assert alloc is not None
        cached.append(alloc.cached)
        assert alloc.seq == seqs[i]  # its own sequence, its old reply dropped
        ref.decode(alloc.seq, alloc.cached, chat(i)[alloc.cached:])
        kv.append(alloc.seq, chat(i)[alloc.cached:])
    assert cached == [len(chat(i)) - 1 for i in range(3)]
    assert_consistent(kv, ref)


def test_a_long_tail_is_kept_when_evicting_a_small_chat_loses_less() -> None:
    kv, ref = make(n_cells=400, n_seqs=2)
    long_reply = finish_with_reply(kv, ref, chat(0), [900] * 60)
    small = finish_with_reply(kv, ref, [7, 8, 9], [1])  # another chat, 4 cells of its own
    alloc = kv.allocate(chat(0), reuse_limit=len(chat(0)) - 1, reserve_cells=0)
    assert alloc is not None and alloc.seq == small  # evicted, and chat 0's prefix copied there
    assert kv.seq_len(long_reply) == len(chat(0)) + 60  # the long reply is still cached
