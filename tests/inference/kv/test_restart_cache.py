"""The disk prompt cache in the engine core, on the fake runner (no model): what is saved,
when a saved prefix is restored, and that a bad file never costs a request more than its
prefill."""

from __future__ import annotations

import json
from pathlib import Path

from inference.core.engine_core import EngineCore
from inference.kv.cache_manager import SeqState
from inference.kv.disk_cache import MIN_SAVE_TOKENS
from inference.kv.disk_store import KEY_BYTES, KvDiskStore
from inference.outputs import FinishReason, Phase
from inference.params import ChatRequest, LoadSettings, SamplingParams
from tests.support.core_driver import Driver, prompt, recording
from tests.support.fake_runner import FakeClock, FakeRunner
from tests.support.reference_kv import Cell

KEY = b"m" * KEY_BYTES


class StateRunner(FakeRunner):
    """The fake runner with llama.cpp's per-sequence state calls over its reference KV."""

    refuse_loads = False

    def state_seq_get(self, seq: int) -> bytes:
        return json.dumps([[c.pos, c.token] for c in self.kv.seq_cells(seq)]).encode()

    def state_seq_set(self, seq: int, data: bytearray) -> bool:
        self.kv.seq_rm(seq, 0, -1)
        cells = json.loads(bytes(data))
        if self.refuse_loads or self.kv.used + len(cells) > self.kv.n_cells:
            return False
        self.kv.cells += [Cell(pos, token, {seq}) for pos, token in cells]
        return True


def make(root: Path, n_cells: int = 2048, n_seqs: int = 4) -> Driver:
    clock = FakeClock()
    runner = StateRunner(n_ctx=n_cells, n_batch=512, clock=clock)
    settings = LoadSettings(model_path=Path("fake.gguf"), n_ctx=n_cells, n_seq_max=n_seqs, n_batch=512,
                            n_ubatch=512, decode_reserve=4)
    return recording(EngineCore(runner, settings, clock=clock, store=KvDiskStore(root, KEY, 64 << 20)), runner, clock)


def submit(d: Driver, name: str, tokens: list[int], max_tokens: int = 4, pin: bool = False) -> None:
    chat = ChatRequest(prompt_tokens=tuple(tokens), sampling=SamplingParams.greedy(max_tokens=max_tokens),
                       request_id=name, pin=pin)
    d.deltas += d.core.add_request(chat)


def settle(d: Driver) -> None:
    """What the engine loop does between steps: load what was read, save what finished."""
    assert d.core.disk is not None
    d.core.disk.wait(10)
    d.core.poll_restores()


def finish(d: Driver, name: str) -> None:
    settle(d)
    d.run(lambda: any(x.finished for x in d.of(name)))
    d.core.save_pending()


def shut(d: Driver) -> None:
    d.core.save_pending()
    d.core.close()  # writes finish before a "restart"


def computed_prefill(d: Driver) -> int:
    return sum(p.num_prefill_tokens for p in d.plans)


def conversation(tmp_path: Path, n: int = 600) -> tuple[list[int], list[int]]:
    """Run one turn of an n-token prompt on a first core and stop it; returns the prompt and
    the next turn's prompt (this one, its reply, a new question)."""
    d = make(tmp_path)
    first = prompt(1, n)
    submit(d, "turn1", first)
    finish(d, "turn1")
    reply = [t for x in d.of("turn1") for t in x.token_ids]
    assert reply
    shut(d)
    return first, first + reply + prompt(2, 40)


def test_a_finished_conversation_is_saved_and_restored_after_a_restart(tmp_path):
    first, follow = conversation(tmp_path)
    d = make(tmp_path)  # the restart
    submit(d, "turn2", follow)
    assert d.core.disk is not None and d.core.disk.restoring == 1  # held while its file is read
    assert not d.sched.waiting
    finish(d, "turn2")
    snap = d.core.snapshot()
    assert snap.kv_restores == 1 and snap.prompt_tokens_restored >= len(first) - 1
    # Only the part after the saved sequence was prefilled.
    assert computed_prefill(d) == len(follow) - snap.prompt_tokens_restored
    assert d.final("turn2").finish_reason is FinishReason.LENGTH


def test_a_request_whose_prefix_is_read_from_disk_says_restoring_not_queued(tmp_path):
    """Issue 39, defect 7: after a restart the tab said "queued (position 0)" while the engine
    read the chat's saved prefix back: it was in no queue, and position 0 is none."""
    _first, follow = conversation(tmp_path)
    d = make(tmp_path)
    submit(d, "turn2", follow)
    assert [(x.phase, x.progress) for x in d.of("turn2")] == [(Phase.RESTORING, (0, len(follow)))]
    finish(d, "turn2")
    assert Phase.QUEUED not in {x.phase for x in d.of("turn2")}


def test_the_restored_reply_is_the_recomputed_one(tmp_path):
    _first, follow = conversation(tmp_path)
    warm = make(tmp_path)
    submit(warm, "t", follow)
    finish(warm, "t")
    cold = make(tmp_path / "elsewhere")
    submit(cold, "t", follow)
    finish(cold, "t")
    assert warm.core.snapshot().prompt_tokens_restored > 0 and cold.core.snapshot().prompt_tokens_restored == 0
    def reply(d: Driver) -> list[int]:
        return [t for x in d.of("t") for t in x.token_ids]

    assert reply(warm) == reply(cold) and len(reply(warm)) == 4


def test_a_short_conversation_is_not_saved(tmp_path):
    d = make(tmp_path)
    submit(d, "short", prompt(1, MIN_SAVE_TOKENS - 10))
    finish(d, "short")
    shut(d)
    assert KvDiskStore(tmp_path, KEY, 1 << 20).entries() == []


def test_a_pinned_system_prompt_is_saved_and_pinned_again_from_disk(tmp_path):
    system = prompt(3, 100)  # short, but pinned: worth keeping
    d = make(tmp_path)
    submit(d, "pin", system, max_tokens=0, pin=True)
    finish(d, "pin")
    shut(d)
    again = make(tmp_path)
    submit(again, "pin", system, max_tokens=0, pin=True)
    finish(again, "pin")
    assert again.kv.pinned_seq_for(system) is not None
    assert computed_prefill(again) == 0 and again.core.snapshot().prompt_tokens_restored == 100


def test_a_damaged_file_costs_only_the_prefill(tmp_path):
    _first, follow = conversation(tmp_path)
    [path] = list(tmp_path.rglob("*.kvs"))
    data = bytearray(path.read_bytes())
    data[-3] ^= 0xFF
    path.write_bytes(bytes(data))
    d = make(tmp_path)
    submit(d, "t", follow)
    finish(d, "t")
    snap = d.core.snapshot()
    assert snap.kv_restore_failures == 1 and snap.prompt_tokens_restored == 0
    assert computed_prefill(d) == len(follow)  # all of it, as with no cache
    assert d.final("t").error is None and not path.exists()


def test_a_blob_llama_refuses_is_deleted_and_the_request_runs(tmp_path):
    _first, follow = conversation(tmp_path)
    d = make(tmp_path)
    assert isinstance(d.runner, StateRunner)
    d.runner.refuse_loads = True
    submit(d, "t", follow)
    finish(d, "t")
    assert d.core.snapshot().kv_restore_failures == 1 and d.core.snapshot().prompt_tokens_restored == 0
    assert d.final("t").error is None and computed_prefill(d) == len(follow)
    shut(d)
    # The refused file is gone; what is left is this turn's own save.
    assert [len(e.tokens) for e in KvDiskStore(tmp_path, KEY, 64 << 20).entries()] == [len(follow) + 3]


def test_a_request_cancelled_while_its_file_is_read_never_runs(tmp_path):
    _first, follow = conversation(tmp_path)
    d = make(tmp_path)
    submit(d, "t", follow)
    d.deltas += d.core.cancel("t")
    settle(d)
    assert not d.sched.waiting and not d.sched.running and d.final("t").finish_reason is FinishReason.CANCELLED


def test_the_live_cache_wins_when_it_holds_as_much(tmp_path):
    first, follow = conversation(tmp_path)
    d = make(tmp_path)
    submit(d, "a", follow)
    finish(d, "a")
    restores = d.core.snapshot().kv_restores
    submit(d, "b", follow)  # the same prompt again: in the live cache now
    assert d.core.disk is not None and d.core.disk.restoring == 0
    finish(d, "b")
    assert d.core.snapshot().kv_restores == restores == 1


def test_a_sequence_reused_before_it_was_saved_is_skipped(tmp_path):
    d = make(tmp_path)
    base = prompt(1, 300)
    submit(d, "a", base)
    settle(d)
    d.run(lambda: any(x.finished for x in d.of("a")))
    [seq] = [s for s in range(d.kv.n_seqs) if d.kv.state(s) is SeqState.IDLE]
    d.kv.drop(seq)  # evicted (or taken over) before the engine got to save it
    d.core.save_pending()
    shut(d)
    assert KvDiskStore(tmp_path, KEY, 1 << 20).entries() == []
