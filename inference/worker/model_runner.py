"""What EngineCore needs of a model: the narrow seam between engine and llama.cpp.

LlamaRunner implements it on llama.cpp; tests implement it without a model (fake_runner).
EngineCore sees only this: vocabulary, the KV memory calls the cache manager makes, the
per-request sampler lifecycle, and execute(plan) -> sampled tokens.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from inference.kv.cache_manager import KvBackend
from inference.sample.logprobs import SampledLogprobs
from inference.tokenizer.vocab import Vocabulary

if TYPE_CHECKING:
    from inference.params import SamplingParams
    from inference.sched.plan import StepPlan
    from inference.speculative.draft_model import DraftModel

# llama_decode's return codes (llama.h) that the engine tells apart; any other is a failure.
DECODE_OK = 0
DECODE_NO_KV_SLOT = 1


@dataclass(frozen=True, slots=True)
class StepOutput:
    """What one execute() did: llama_decode's code and, per plan chunk, the sampled token
    (None where the chunk asked for no logits). tokens is empty unless code is DECODE_OK."""

    code: int
    tokens: list[int | None]
    # Per plan chunk, for requests asking for logprobs: their sampled token's (else None).
    logprobs: list[SampledLogprobs | None] = field(default_factory=list)
    # Seconds spent in llama_decode (to the results being ready) and in sampling the rows:
    # the engine splits a step's time into the model's and its own host time with them.
    decode_s: float = 0.0
    sample_s: float = 0.0
    # Per plan chunk, when the plan held draft tokens: how many of its draft tokens were
    # kept (the chunk's token in tokens is the one sampled after them); None otherwise.
    kept_drafts: list[int] | None = None
    # Plan chunk index -> why its request must end now (its grammar failed mid-reply).
    errors: dict[int, str] | None = None
    # Plan chunk indexes of the requests whose JSON grammar was steered to close within their
    # max_tokens (inference/sample/grammar.py): they end as cut by it, though complete.
    steered: list[int] | None = None

    @property
    def ok(self) -> bool:
        return self.code == DECODE_OK

    @property
    def no_kv_slot(self) -> bool:
        return self.code == DECODE_NO_KV_SLOT

    @classmethod
    def failed(cls, code: int) -> StepOutput:
        return cls(code, [])


class ModelRunner(KvBackend, Vocabulary, Protocol):
    """A model behind one batched context. Not thread-safe, but for its Vocabulary: the
    engine thread owns it."""

    n_ctx: int

    @property
    def draft_model(self) -> DraftModel | None:
        """Speculative decoding's second model, when one is loaded."""
        ...

    # ----- generated text ----------------------------------------------------------

    def piece(self, token: int) -> bytes:
        """The bytes of one token as generated text shows it (specials hidden)."""
        ...

    def is_eog(self, token: int) -> bool: ...

    # ----- sampling and decoding ---------------------------------------------------

    def start_sampling(self, request_id: str, params: SamplingParams, prompt: list[int]) -> None:
        """Give a request its sampler (its own RNG and penalty history), kept across
        preemptions until stop_sampling."""
        ...

    def stop_sampling(self, request_id: str) -> None:
        """Free a request's sampler; unknown ids are ignored."""
        ...

    def execute(self, plan: StepPlan) -> StepOutput:
        """Decode the plan's chunks in one batch and sample a token for each chunk that
        wants logits, with that request's sampler (and its logprobs if it asks for them).
        Raises ValueError, before touching the model, if the plan holds more tokens than
        one batch can."""
        ...
