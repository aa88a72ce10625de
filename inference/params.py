"""Input dataclasses: how to load a model, how to sample, what to generate; request ids."""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from inference.errors import RequestError

# Request ids are minted one way wherever a request starts (engine, app, HTTP server).
# 48 random bits: no two requests of a session meet, and an id stays short enough for logs.
ID_HEX_CHARS = 12


def new_request_id(prefix: str = "") -> str:
    """A fresh request id: `prefix` and 12 hex digits, e.g. "3f9c0a1b2c4d" or "http-3f9c0a1b2c4d"."""
    return prefix + uuid.uuid4().hex[:ID_HEX_CHARS]


# max_tokens meaning "until end-of-generation or a full context".
UNLIMITED = -1

# The most alternatives logprobs may ask for at each position (OpenAI's top_logprobs limit).
MAX_TOP_LOGPROBS = 20

# Priorities, higher first; the app sets them from what the user sees and changes them as
# the user switches tabs (Engine.set_priority). Waiting ages every request up by one level
# per Scheduler.aging_s (30 s), so a lower one is never starved, only delayed.
PRIORITY_VISIBLE_TAB = 10  # the reply in the tab the user looks at
PRIORITY_TAB = 1  # replies in the other open tabs
PRIORITY_BACKGROUND = 0  # server (API) requests: the default of ChatRequest
# A request's priority below 0: work on spare capacity (a chat's generated title). The
# scheduler runs it after every other request and takes its sequence back for any other.
SPARE_PRIORITY = -1


def is_spare(priority: int) -> bool:
    return priority < 0


@dataclass(frozen=True, slots=True)
class SamplingParams:
    temperature: float = 0.7
    top_k: int = 40
    top_p: float = 0.95
    min_p: float = 0.05
    repeat_penalty: float = 1.1
    repeat_last_n: int = 64
    # OpenAI's, over the same window: a token's logit minus frequency × its count there,
    # minus presence once if it is there at all. Rows with either sample in llama.cpp's
    # chain (grammar_chain.py), whose penalties sampler has both; the C kernel has not.
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    seed: int | None = None
    max_tokens: int = 512
    stop: tuple[str, ...] = ()
    ignore_eos: bool = False
    # None: no log-probabilities. k in 0..MAX_TOP_LOGPROBS: each generated token's
    # log-probability and the k most likely tokens at its position (Delta.logprobs).
    logprobs: int | None = None
    # GBNF text (llama.cpp's grammar format, rule "root") the output must follow, e.g.
    # inference.sample.grammars.JSON_OBJECT. One that does not parse ends the request with an error.
    grammar: str | None = None

    @classmethod
    def greedy(cls, max_tokens: int = 512, **overrides: Any) -> SamplingParams:
        """Greedy decoding; overrides: any other field (unknown names raise TypeError)."""
        return replace(cls(temperature=0.0, repeat_penalty=1.0, max_tokens=max_tokens), **overrides)

    @property
    def needs_chain(self) -> bool:
        """Sampled by a llama.cpp sampler chain: a grammar, or OpenAI's penalties."""
        return self.grammar is not None or self.frequency_penalty != 0.0 or self.presence_penalty != 0.0

    def validate(self) -> None:
        problems = []
        if self.temperature < 0:
            problems.append(f"temperature must be >= 0, got {self.temperature}")
        if self.top_k < 0:
            problems.append(f"top_k must be >= 0, got {self.top_k}")
        if not 0.0 < self.top_p <= 1.0:
            problems.append(f"top_p must be in (0, 1], got {self.top_p}")
        if not 0.0 <= self.min_p <= 1.0:
            problems.append(f"min_p must be in [0, 1], got {self.min_p}")
        if self.repeat_penalty <= 0:
            problems.append(f"repeat_penalty must be > 0, got {self.repeat_penalty}")
        for name in ("frequency_penalty", "presence_penalty"):
            if not -2.0 <= getattr(self, name) <= 2.0:
                problems.append(f"{name} must be in [-2, 2], got {getattr(self, name)}")
        if self.repeat_last_n < -1:
            problems.append(f"repeat_last_n must be >= -1, got {self.repeat_last_n}")
        if self.max_tokens < UNLIMITED:
            problems.append(f"max_tokens must be >= 0 (or -1 for unlimited), got {self.max_tokens}")
        if any(not isinstance(s, str) or not s for s in self.stop):
            problems.append("stop strings must be non-empty strings")
        if self.logprobs is not None and not (
            isinstance(self.logprobs, int) and 0 <= self.logprobs <= MAX_TOP_LOGPROBS
        ):
            problems.append(f"logprobs must be in 0..{MAX_TOP_LOGPROBS}, got {self.logprobs!r}")
        if self.grammar is not None and (not isinstance(self.grammar, str) or not self.grammar.strip()):
            problems.append("grammar must be non-empty GBNF text")
        if self.grammar is not None and self.ignore_eos:
            problems.append("a grammar cannot be combined with ignore_eos (the grammar decides where output ends)")
        if problems:
            raise RequestError("; ".join(problems))


@dataclass(frozen=True, slots=True)
class ChatRequest:
    """One generation: a chat (messages) or raw prompt tokens, plus how to sample it.

    priority: higher runs first (the tab the user looks at); waiting time ages every
    request upwards so nothing starves. Below 0 (SPARE_PRIORITY): only on spare capacity,
    yielding to every other request.
    """

    messages: tuple[dict, ...] = ()
    prompt_tokens: tuple[int, ...] | None = None
    sampling: SamplingParams = field(default_factory=SamplingParams)
    priority: int = PRIORITY_BACKGROUND
    request_id: str | None = None
    # Keep this request's prompt KV pinned when it finishes (a shared system prompt). Its
    # prompt is the prefix every chat starting with these messages shares, whatever the
    # template (PromptTokenizer.shared_prefix_tokens), not the messages' own render.
    pin: bool = False
    # What a chat longer than the context keeps in the model's view (tokenizer/overflow.py):
    # "stop" refuses it; "drop_oldest" keeps the newest turns that fit with room for the
    # reply; "truncate_middle" keeps the first exchange too. The system prompt always stays.
    overflow: str = "stop"
    # Set by prepare: messages[start:start + count] were left out of the prompt (overflow).
    dropped: tuple[int, int] = (0, 0)
    # The last message is an assistant reply to go on with (Continue after the token limit):
    # the template renders the messages before it with the generation prompt, then its text
    # follows with no end-of-turn, so the model writes the rest of that same reply (as
    # vLLM's continue_final_message).
    continue_final: bool = False
    # The tools the chat offers, in OpenAI's shape ({"type": "function", "function": {name,
    # description, parameters}}), given to a chat template with a tool format of its own
    # (ChatTemplate.render's `tools`); None: none (a template without one is shown them
    # in the system prompt by the caller).
    tools: tuple[dict, ...] | None = None


SPECULATIVE_MODES = ("off", "lookup", "draft")
# ChatRequest.overflow: what a chat longer than the context keeps (tokenizer/overflow.py)
OVERFLOW_STOP = "stop"
OVERFLOW_DROP_OLDEST = "drop_oldest"
OVERFLOW_TRUNCATE_MIDDLE = "truncate_middle"
OVERFLOW_POLICIES = (OVERFLOW_STOP, OVERFLOW_DROP_OLDEST, OVERFLOW_TRUNCATE_MIDDLE)
KV_TYPES = ("f16", "q8_0", "q4_0")


def physical_cores() -> int:
    try:
        import psutil

        return psutil.cpu_count(logical=False) or os.cpu_count() or 1
    except Exception:  # noqa: BLE001 - psutil missing or unable to read the topology
        return os.cpu_count() or 1


@dataclass(frozen=True, slots=True)
class LoadSettings:
    model_path: Path
    n_ctx: int = 8192
    n_seq_max: int = 16
    n_batch: int = 512
    n_ubatch: int = 512
    n_threads: int | None = None
    n_threads_batch: int | None = None
    # None: offload everything when llama.cpp was built with GPU support, else 0.
    n_gpu_layers: int | None = None
    # The step latency the adaptive prefill budget aims to stay under while others decode.
    target_itl_s: float = 0.15
    # The longest a step of prompt chunks may take (tokens bounded by the measured seconds
    # per token): what a cancel, or a request raised to the front, waits at most. None: no bound.
    max_step_s: float | None = 0.4
    # Cells held back at admission for each request's first decode tokens.
    decode_reserve: int = 64
    # Bit-identical results whatever the batch holds (greedy output alone == in a batch),
    # at some speed cost: Q8_0 KV cache and the order-preserving attention kernel.
    reproducible: bool = False
    # The disk prompt cache (inference/kv/disk_store.py): KV of pinned system prompts and recent
    # conversations saved under this folder, so a restart does not recompute them. None
    # disables it; so does a size limit of 0 (MiB, over all models' files, LRU).
    kv_cache_dir: Path | None = None
    kv_disk_cache_mb: int = 1024
    # Jinja chat template used instead of the one in the GGUF file (a per-model default of
    # the model library); None: the file's own.
    chat_template: str | None = None
    # Speculative decoding (inference/spec/): "off", "lookup" (draft tokens from the
    # request's own prompt and output, and the engine's other requests'), or "draft" (a
    # draft model, the GGUF at draft_model, with this model's vocabulary, writes them);
    # verified in the step's llama_decode. draft_max: the most draft tokens one sequence
    # verifies in a step; the planner gives fewer (or none) as acceptance and cost decide.
    speculative: str = "off"
    draft_max: int = 32
    draft_model: Path | None = None
    # The KV cache's element type for K and V: "f16", or "q8_0"/"q4_0" (about half and a
    # quarter of the memory per cell; llama.cpp needs flash attention for a quantized V).
    # flash_attn: True/False, or None for llama.cpp's own choice (on where it helps); a
    # quantized cache turns it on. The reproducible mode is q8_0 with flash attention.
    kv_type: str = "f16"
    flash_attn: bool | None = None

    def threads(self) -> int:
        return self.n_threads or physical_cores()

    def threads_batch(self) -> int:
        return self.n_threads_batch or self.threads()

    def validate(self) -> None:
        if self.n_ctx < 64:
            raise ValueError(f"n_ctx must be at least 64, got {self.n_ctx}")
        if not 1 <= self.n_seq_max <= 256:
            raise ValueError(f"n_seq_max must be in 1..256, got {self.n_seq_max}")
        if self.n_batch < self.n_seq_max:
            raise ValueError("n_batch must be at least n_seq_max (one decode token per sequence)")
        if self.n_ubatch > self.n_batch:
            raise ValueError("n_ubatch must not exceed n_batch")
        if self.kv_disk_cache_mb < 0:
            raise ValueError(f"kv_disk_cache_mb must be >= 0, got {self.kv_disk_cache_mb}")
        if self.speculative not in SPECULATIVE_MODES:
            raise ValueError(f"speculative must be one of {', '.join(SPECULATIVE_MODES)}, got {self.speculative!r}")
        if self.speculative == "draft" and self.draft_model is None:
            raise ValueError("speculative decoding with a draft model needs the draft model's file (draft_model)")
        if not 1 <= self.draft_max <= 64:
            raise ValueError(f"draft_max must be in 1..64, got {self.draft_max}")
        if self.kv_type not in KV_TYPES:
            raise ValueError(f"kv_type must be one of {', '.join(KV_TYPES)}, got {self.kv_type!r}")
        if self.kv_type != "f16" and self.flash_attn is False:
            raise ValueError(f"a {self.kv_type} KV cache needs flash attention (llama.cpp quantizes V only with it)")
        if self.reproducible and (self.kv_type not in ("f16", "q8_0") or self.flash_attn is False):
            raise ValueError("the reproducible mode uses a q8_0 KV cache with flash attention")

    def cache_type(self) -> str:
        """The KV cache type the context gets (the reproducible mode's is q8_0)."""
        return "q8_0" if self.reproducible else self.kv_type

    def uses_flash_attn(self) -> bool | None:
        """True or False when decided here; None leaves it to llama.cpp."""
        if self.reproducible or self.cache_type() != "f16":
            return True
        return self.flash_attn
