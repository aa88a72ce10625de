"""One generation as the scheduler sees it: tokens, progress, priority. No llama here."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from inference.owner import Owner
from inference.params import ImageEmbedding, SamplingParams
from inference.positions import Shifts, position, position_shifts


class RequestStatus(enum.Enum):
    WAITING = "waiting"
    PREFILLING = "prefilling"
    DECODING = "decoding"
    FINISHED_STOPPED = "finished_stopped"
    FINISHED_LENGTH = "finished_length"
    FINISHED_CANCELLED = "finished_cancelled"
    FINISHED_ERROR = "finished_error"

    @property
    def finished(self) -> bool:
        return self.name.startswith("FINISHED")


@dataclass(eq=False, slots=True)
class Request:
    """tokens holds prompt + generated tokens; num_computed of them are in the KV cache.

    There are no separate prefill and decode phases: each step feeds the next slice of
    tokens[num_computed:], a prompt chunk or the one token sampled last.
    """

    request_id: str
    tokens: list[int]
    sampling: SamplingParams
    priority: int = 0
    arrival_s: float = 0.0
    arrival_index: int = 0
    pin: bool = False
    num_prompt: int = field(init=False)
    num_computed: int = 0
    num_cached: int = 0  # prompt tokens that came from the prefix cache at admission
    seq: int | None = None
    status: RequestStatus = RequestStatus.WAITING
    admitted_s: float | None = None
    preemptions: int = 0
    # The images whose placeholder ids are in tokens, by slot (the worker decodes their rows).
    images: dict[int, ImageEmbedding] = field(default_factory=dict)
    owner: Owner = Owner()  # its lane in the metrics (ChatRequest.owner)
    # Where its indices are ahead of their positions (M-RoPE images); None until first asked.
    _shifts: Shifts | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.num_prompt = len(self.tokens)

    def position(self, index: int) -> int:
        """The position of tokens[index] in its sequence: the index itself, less what the
        M-RoPE images before it span fewer than their rows (inference/positions.py)."""
        if not self.images:
            return index
        if self._shifts is None:  # the prompt's pieces: what is generated after them is text
            self._shifts = position_shifts(self.tokens[: self.num_prompt], self._span)
        return position(self._shifts, index)

    def _span(self, slot: int, first_row: int) -> int | None:
        image = self.images.get(slot)
        return image.span(first_row) if image is not None else None

    @property
    def output_tokens(self) -> list[int]:
        return self.tokens[self.num_prompt :]

    @property
    def num_output(self) -> int:
        return len(self.tokens) - self.num_prompt

    @property
    def num_uncomputed(self) -> int:
        return len(self.tokens) - self.num_computed

    @property
    def wants_output(self) -> bool:
        """False for prefill-only requests (pinning a prefix)."""
        return self.sampling.max_tokens != 0

    @property
    def reuse_limit(self) -> int:
        """How many tokens may come from the cache: the last must be computed for logits."""
        return len(self.tokens) - 1 if self.wants_output else len(self.tokens)

    @property
    def is_decoding(self) -> bool:
        return self.status is RequestStatus.DECODING

    def append_token(self, token: int) -> None:
        self.tokens.append(token)
        self.status = RequestStatus.DECODING
