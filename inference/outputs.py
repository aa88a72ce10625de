"""Small immutable messages that leave the engine thread."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple


class FinishReason(str, enum.Enum):
    STOP = "stop"  # end-of-generation token or a stop string
    LENGTH = "length"  # max_tokens reached
    CONTEXT_FULL = "context_full"  # the sequence reached the context size
    CANCELLED = "cancelled"
    ERROR = "error"
    INTERRUPTED = "interrupted"  # the engine went away mid-reply (its process died)


class Phase(str, enum.Enum):
    """What a request is doing, as a tab would show it."""

    QUEUED = "queued"
    RESTORING = "restoring"  # its prompt's saved prefix is being read back from the disk cache
    PREFILLING = "prefilling"
    DECODING = "decoding"
    FINISHED = "finished"


@dataclass(frozen=True, slots=True)
class RequestStats:
    prompt_tokens: int
    cached_tokens: int  # prompt tokens reused from the prefix cache
    generated_tokens: int
    queue_s: float  # from submit to admission
    ttft_s: float | None  # from submit to first generated token
    decode_tok_s: float | None  # after the first token
    itl_p50_s: float | None
    itl_p95_s: float | None
    total_s: float
    # (start, count): the chat's messages[start:start + count] were not in the prompt (a
    # chat longer than the context, cut by its overflow policy)
    messages_dropped: tuple[int, int] = (0, 0)
    # The stop string that ended the reply (finish STOP); None for end-of-generation and
    # every other end. Anthropic's API names it (stop_reason "stop_sequence").
    stop_string: str | None = None
    # The prompt's tokens that are images' embedding rows (a projector's), and how many of
    # them came from the prefix cache (the image was neither encoded nor prefilled again).
    image_tokens: int = 0
    image_tokens_cached: int = 0


@dataclass(frozen=True, slots=True)
class TopLogprob:
    """One of the most likely tokens at a position, with its log-probability."""

    token: str
    bytes: bytes
    logprob: float


@dataclass(frozen=True, slots=True)
class TokenLogprob:
    """A generated token's log-probability under the model (log-softmax of the raw
    logits, before any sampling setting) and the most likely alternatives there."""

    token: str
    bytes: bytes
    logprob: float
    top: tuple[TopLogprob, ...] = ()


class Delta(NamedTuple):
    """A change of one request: new text, a phase change, or its end.

    text holds only what is new since the previous delta, never the whole reply.

    A NamedTuple, not a frozen dataclass: one is built per request per step, and a tuple
    is built in C (a frozen dataclass's init costs five times as much, a call per field).
    """

    request_id: str
    text: str = ""
    token_ids: tuple[int, ...] = ()
    phase: Phase = Phase.DECODING
    # PREFILLING: prompt tokens computed so far / total. QUEUED: position in the queue.
    progress: tuple[int, int] | None = None
    finish_reason: FinishReason | None = None
    error: str | None = None
    stats: RequestStats | None = None
    # One per token of token_ids, for requests that ask for logprobs.
    logprobs: tuple[TokenLogprob, ...] = ()

    @property
    def finished(self) -> bool:
        return self.finish_reason is not None

    @classmethod
    def finished_with(
        cls,
        request_id: str,
        reason: FinishReason,
        error: str | None = None,
        stats: RequestStats | None = None,
        *,
        text: str = "",
        token_ids: tuple[int, ...] = (),
        logprobs: tuple[TokenLogprob, ...] = (),
    ) -> Delta:
        """The last delta of a request: why it ended, and the text it ended with, if any.

        The one way to build it, so that phase and finish_reason can never disagree."""
        return cls(
            request_id,
            text=text,
            token_ids=token_ids,
            phase=Phase.FINISHED,
            finish_reason=reason,
            error=error,
            stats=stats,
            logprobs=logprobs,
        )


@dataclass(frozen=True, slots=True)
class BackendInfo:
    """What the engine's llama.cpp build is and can do: the process that loads no llama.cpp
    (the desktop window) learns it from the engine's ModelInfo."""

    llama_cpp: str  # libllama's version
    llama_cpp_python: str
    system_info: str  # backends and CPU features of the build
    gpu_offload: bool


@dataclass(frozen=True, slots=True)
class ModelInfo:
    """What the engine loaded: reported once it is ready (and over the engine process's pipe)."""

    path: Path
    description: str
    n_params: int
    size_bytes: int
    n_ctx_train: int
    n_ctx: int
    n_seq_max: int
    n_gpu_layers: int
    gpu_offload_supported: bool
    backend: BackendInfo | None = None
    # The template chats are rendered with (its tool format decides how tools are offered).
    chat_template: str | None = None
    # The vision projector loaded with the model (LoadSettings.mmproj): the model sees images.
    mmproj: Path | None = None

    @property
    def sees_images(self) -> bool:
        """The model was loaded with a vision projector: chats may show it images."""
        return self.mmproj is not None
