"""A deterministic ModelRunner without a model, for pure-Python tests of EngineCore.

- Vocabulary: ids 0..255 are bytes (their piece is that byte), then BOS and EOS (the only
  end-of-generation token). Every id up to n_vocab is valid in a prompt; ids above EOS are
  opaque and print as nothing.
- KV memory: a ReferenceKv. execute() writes each chunk into it, which asserts that a
  sequence is fed at its end and that the cells never overflow: a scheduler that promised
  too much fails the test instead of corrupting a cache.
- Sampling: next_token(context), where context is the sequence's tokens in the KV after
  this step, so the "model" is a pure function of what it saw. The default writes the
  alphabet by position: a request's text says where it is. Draft tokens are verified
  as the real runner does: the token after each row, drafts kept up to the first miss.
- Failures: fail_next(n) makes the next n executes report llama_decode's "no KV slot"
  (or another code) without touching the KV, as llama.cpp does.
- Time: each execute advances the shared fake clock by step_s, the model's compute time
  (reported as decode_s), then by sample_s, the sampling time (reported as sample_s).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from inference.params import SamplingParams
from inference.sched.plan import ScheduledChunk, StepPlan
from inference.speculative.draft_model import DraftModel
from inference.tokenizer.vocab import SpecialToken
from inference.worker.model_runner import DECODE_NO_KV_SLOT, DECODE_OK, StepOutput
from tests.support.reference_kv import ReferenceKv

BOS = 256
EOS = 257
N_VOCAB = 1 << 20


@dataclass(frozen=True, slots=True)
class FakeSampler:
    params: SamplingParams
    prompt: list[int]  # what a real chain's repeat penalties would have seen


class FakeClock:
    def __init__(self, now: float = 0.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def alphabet(context: list[int]) -> int:
    """'a' after 0 tokens, 'b' after 1, ...: the letter of the position being generated."""
    return ord("a") + len(context) % 26


class FakeRunner:
    def __init__(
        self,
        n_ctx: int = 1024,
        n_batch: int = 512,
        clock: FakeClock | None = None,
        step_s: float = 1.0,
        sample_s: float = 0.0,
        next_token: Callable[[list[int]], int] = alphabet,
        draft_model: DraftModel | None = None,
    ) -> None:
        self.n_ctx = n_ctx
        self.draft_model = draft_model
        self.n_vocab = N_VOCAB
        self.n_batch = n_batch
        self.eog_tokens = [EOS]
        self.clock = clock or FakeClock()
        self.step_s = step_s
        self.sample_s = sample_s
        self.next_token = next_token
        self.kv = ReferenceKv(n_ctx)
        self.samplers: dict[str, FakeSampler] = {}
        self.sampler_starts: list[str] = []  # request ids, in the order samplers were made
        self.executed: list[StepPlan] = []  # plans that reached the model (decoded or failed)
        self.on_execute: Callable[[StepPlan], None] | None = None  # to look in mid-step
        self._failures: list[int] = []

    # ----- vocabulary --------------------------------------------------------------

    def tokenize(self, text: str, add_special: bool = True, parse_special: bool = True) -> list[int]:
        """Bytes; with parse_special, "<s>" and "</s>" are its control tokens."""
        tokens = [BOS] if add_special else []
        for part in re.split("(</?s>)", text) if parse_special else [text]:
            special = {"<s>": BOS, "</s>": EOS}.get(part) if parse_special else None
            tokens += [special] if special is not None else list(part.encode("utf-8"))
        return tokens

    def special_tokens(self) -> list[SpecialToken]:
        return [SpecialToken(BOS, "<s>", False, False), SpecialToken(EOS, "</s>", False, False)]

    @property
    def max_piece_bytes(self) -> int:
        return 4

    def piece(self, token: int) -> bytes:
        return bytes([token]) if token < 256 else b""

    def special_text(self, token: int) -> str:
        return {BOS: "<s>", EOS: "</s>"}.get(token, "")

    def is_eog(self, token: int) -> bool:
        return token == EOS

    @property
    def bos_token(self) -> int:
        return BOS

    @property
    def eos_token(self) -> int:
        return EOS

    @property
    def adds_bos(self) -> bool:
        return True

    def chat_template(self) -> str | None:
        return None  # the engine falls back to ChatML

    def metadata(self, key: str) -> str | None:
        return None

    # ----- KV memory ----------------------------------------------------------------

    def seq_rm(self, seq: int, p0: int, p1: int) -> None:
        self.kv.seq_rm(seq, p0, p1)

    def seq_cp(self, src: int, dst: int, p0: int, p1: int) -> None:
        self.kv.seq_cp(src, dst, p0, p1)

    def seq_pos_max(self, seq: int) -> int:
        return max((c.pos for c in self.kv.seq_cells(seq)), default=-1)

    # ----- sampling and decoding -----------------------------------------------------

    def start_sampling(self, request_id: str, params: SamplingParams, prompt: list[int]) -> None:
        self.samplers[request_id] = FakeSampler(params, list(prompt))
        self.sampler_starts.append(request_id)

    def stop_sampling(self, request_id: str) -> None:
        self.samplers.pop(request_id, None)

    def fail_next(self, n: int = 1, code: int = DECODE_NO_KV_SLOT) -> None:
        self._failures += [code] * n

    def execute(self, plan: StepPlan) -> StepOutput:
        if plan.num_tokens > self.n_batch:
            raise ValueError(f"a step of {plan.num_tokens} tokens exceeds the batch of {self.n_batch} (n_batch)")
        assert all(c.n_tokens > 0 for c in plan.chunks), "an empty chunk reached the model"
        self.executed.append(plan)
        if self.on_execute is not None:
            self.on_execute(plan)
        self.clock.now += self.step_s
        if self._failures:
            return StepOutput.failed(self._failures.pop(0))
        for chunk in plan.chunks:
            self.kv.decode(chunk.seq, chunk.start, chunk.tokens)
        self.clock.now += self.sample_s
        tokens = [self._sample(c) if c.wants_logits else None for c in plan.chunks]
        kept = [self._verify(c, tokens, i) for i, c in enumerate(plan.chunks)] if plan.n_draft else None
        return StepOutput(DECODE_OK, tokens, decode_s=self.step_s, sample_s=self.sample_s, kept_drafts=kept)

    def _verify(self, chunk: ScheduledChunk, tokens: list[int | None], i: int) -> int:
        """A drafted chunk: the model's token after each row, the drafts kept up to the first
        that differs; tokens[i] becomes the one sampled after them."""
        if not chunk.draft:
            return 0
        context = self.kv.seq_tokens(chunk.seq)
        end = chunk.start + chunk.n_tokens  # the decode token's row: the first sampled
        for kept, draft in enumerate(chunk.draft):
            token = self.next_token(context[: end + kept])
            if token != draft:
                tokens[i] = token
                return kept
        tokens[i] = self.next_token(context[: end + len(chunk.draft)])
        return len(chunk.draft)

    def _sample(self, chunk: ScheduledChunk) -> int:
        if chunk.request.request_id not in self.samplers:
            raise KeyError(f"request {chunk.request.request_id} has no sampler")
        context = self.kv.seq_tokens(chunk.seq)
        return self.next_token(context[: chunk.start + chunk.n_tokens] if chunk.draft else context)
