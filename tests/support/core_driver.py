"""Drives the real EngineCore on a FakeRunner and a fake clock, and checks it every step.

The driver adds requests by their prompt tokens, steps the core, keeps every plan the
scheduler made (including empty ones and re-plans after a failed decode) and every delta,
and after each step checks that the cache manager's cell count, the reference KV and each
running request's computed tokens agree.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from inference.core.engine_core import EngineCore
from inference.kv.cache_manager import KvCacheManager
from inference.outputs import Delta
from inference.owner import Owner
from inference.params import ChatRequest, ImageEmbedding, LoadSettings, SamplingParams
from inference.request import Request
from inference.sched.plan import ScheduledChunk, StepPlan
from inference.sched.scheduler import Scheduler
from tests.support.fake_draft_model import FakeDraftModel
from tests.support.fake_runner import FakeClock, FakeRunner, alphabet


@dataclass
class Driver:
    core: EngineCore
    runner: FakeRunner
    clock: FakeClock
    plans: list[StepPlan] = field(default_factory=list)
    deltas: list[Delta] = field(default_factory=list)

    @property
    def sched(self) -> Scheduler:
        return self.core.scheduler

    @property
    def kv(self) -> KvCacheManager:
        return self.core.kv

    def add(
        self, name: str, tokens: list[int], max_tokens: int = 4, priority: int = 0, pin: bool = False,
        images: tuple[ImageEmbedding, ...] = (), owner: Owner | None = None,
    ) -> Request:
        sampling = SamplingParams.greedy(max_tokens=max_tokens)
        chat = ChatRequest(prompt_tokens=tuple(tokens), sampling=sampling, priority=priority, request_id=name, pin=pin,
                           images=images, owner=owner or Owner())
        self.deltas += self.core.add_request(chat)
        found = [r for r in self.sched.waiting if r.request_id == name]
        assert found, f"{name} was not queued: {self.deltas[-1]}"
        return found[0]

    def step(self) -> StepPlan:
        """One core step; returns the plan it ran (the last one made, after any retries)."""
        made = len(self.plans)
        self.deltas += self.core.step()
        assert len(self.plans) > made, "the core stepped without asking the scheduler"
        self.check()
        return self.plans[-1]

    def run(self, until: Callable[[], bool], max_steps: int = 200) -> int:
        for i in range(max_steps):
            if until():
                return i
            self.step()
        raise AssertionError("condition not reached")

    def check(self) -> None:
        ref = self.runner.kv
        assert self.kv.cells_used == ref.used <= self.kv.n_cells
        for req in self.sched.running:
            assert req.seq is not None
            assert self.kv.seq_tokens(req.seq) == req.tokens[: req.num_computed]
            assert ref.seq_tokens(req.seq) == req.tokens[: req.num_computed]

    def of(self, name: str) -> list[Delta]:
        return [d for d in self.deltas if d.request_id == name]

    def final(self, name: str) -> Delta:
        [last] = [d for d in self.of(name) if d.finished]
        return last


def make_driver(
    n_cells: int = 1024,
    n_seqs: int = 8,
    n_batch: int = 64,
    decode_reserve: int = 4,
    aging_s: float = 30.0,
    step_s: float = 1.0,
    target_itl_s: float = 0.1,
    next_token: Callable[[list[int]], int] = alphabet,
    speculative: str = "off",
    draft_max: int = 16,
    max_step_s: float | None = None,  # fake steps take step_s whatever they hold: no time bound
    draft_step_s: float = 0.1,  # speculative="draft": a FakeDraftModel step's fake seconds
    draft_wrong_every: int = 0,  # ... and every n-th of its draft tokens wrong
) -> Driver:
    """A core over n_cells of KV and n_seqs sequences. Each step "computes" for step_s of
    fake time: with the default target latency that is a slow step, so the prefill share
    never grows past its start (a quarter of n_batch, at least 16)."""
    clock = FakeClock()
    draft = (FakeDraftModel(next_token, clock, draft_step_s, draft_wrong_every) if speculative == "draft"
             else None)
    runner = FakeRunner(n_ctx=n_cells, n_batch=n_batch, clock=clock, step_s=step_s, next_token=next_token,
                        draft_model=draft)
    settings = LoadSettings(
        model_path=Path("fake.gguf"),
        n_ctx=n_cells,
        n_seq_max=n_seqs,
        n_batch=n_batch,
        n_ubatch=n_batch,
        target_itl_s=target_itl_s,
        decode_reserve=decode_reserve,
        speculative=speculative,
        draft_max=draft_max,
        draft_model=Path("fake-draft.gguf") if draft is not None else None,
        max_step_s=max_step_s,
    )
    core = EngineCore(runner, settings, clock=clock)
    core.scheduler.aging_s = aging_s
    return recording(core, runner, clock)


def recording(core: EngineCore, runner: FakeRunner, clock: FakeClock) -> Driver:
    """A driver of `core` that records each plan its scheduler makes (a spy: the core calls
    the real schedule())."""
    driver = Driver(core, runner, clock)
    schedule = core.scheduler.schedule

    def recording_schedule() -> StepPlan:
        plan = schedule()
        driver.plans.append(plan)
        return plan

    core.scheduler.schedule = recording_schedule  # type: ignore[method-assign]
    return driver


SAMPLED = 7  # the token a scheduling test's fake model samples every time


def make_sim(n_seqs: int = 8, n_cells: int = 1024, n_batch: int = 64, decode_reserve: int = 4,
             aging_s: float = 30.0) -> Driver:
    """A core for the scheduler's tests, where what is sampled does not matter: every
    sampled token is SAMPLED. n_batch is the step's token budget."""
    return make_driver(n_cells=n_cells, n_seqs=n_seqs, n_batch=n_batch, decode_reserve=decode_reserve,
                       aging_s=aging_s, next_token=lambda _context: SAMPLED)


def prompt(tag: int, n: int) -> list[int]:
    """n distinct opaque tokens; prompts with different tags share nothing."""
    return [1000 + tag * 1000 + i for i in range(n)]


def chunk_of(plan: StepPlan, req: Request) -> ScheduledChunk | None:
    found = [c for c in plan.chunks if c.request is req]
    assert len(found) <= 1
    return found[0] if found else None
