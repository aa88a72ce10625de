"""Input dataclasses: how to load a model, how to sample, what to generate; request ids."""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, get_args, get_type_hints

from inference.errors import RequestError
from inference.owner import Owner
from inference.sampling_fields import (
    ALL_APIS,
    ANTHROPIC,
    OPENAI,
    RESPONSES,
    ApiKey,
    Bounds,
    ChatSetting,
    SamplingField,
    always,
    when_positive,
    when_set,
)

if TYPE_CHECKING:
    import numpy as np

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
    """How a request samples. Each field but the last three is a row of SAMPLING_FIELDS
    below (its bounds, its names in each API, its label), read by everything that lists
    sampling fields; a field added here gets its row there."""

    temperature: float = 0.7
    top_k: int = 40
    top_p: float = 0.95
    min_p: float = 0.05
    repeat_penalty: float = 1.1
    repeat_last_n: int = 64
    # OpenAI's, over the same window: a token's logit minus frequency × its count there,
    # minus presence once if it is there at all. Rows with either sample in llama.cpp's
    # chain (llama_chain.py), whose penalties sampler has both; the C kernel has not.
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    seed: int | None = None
    max_tokens: int = 512
    ignore_eos: bool = False
    # The request's other settings: structured values each API reads in its own way.
    stop: tuple[str, ...] = ()
    # None: no log-probabilities. k in 0..MAX_TOP_LOGPROBS: each generated token's
    # log-probability and the k most likely tokens at its position (Delta.logprobs).
    logprobs: int | None = None
    # The grammar the output must follow: llguidance's definition, as schema_grammar,
    # lark_grammar or gbnf_grammar (inference/sample/json_schema.py) write it, e.g.
    # inference.sample.grammars.JSON_OBJECT. One that does not compile ends the request with an error.
    grammar: str | None = None

    @classmethod
    def greedy(cls, max_tokens: int = 512, **overrides: Any) -> SamplingParams:
        """Greedy decoding; overrides: any other field (unknown names raise TypeError)."""
        return replace(cls(temperature=0.0, repeat_penalty=1.0, max_tokens=max_tokens), **overrides)

    @property
    def needs_chain(self) -> bool:
        """Sampled by a llama.cpp sampler chain: a field the C kernel lacks is on (OpenAI's penalties)."""
        return any(getattr(self, f.name) != f.off for f in SAMPLING_FIELDS if not f.kernel)

    @property
    def penalised(self) -> bool:
        """The penalties stage acts: a penalty is on, over a window that holds tokens."""
        return self.repeat_last_n != 0 and any(
            getattr(self, f.name) != f.off for f in SAMPLING_FIELDS if f.stage == "penalties" and f.off is not None)

    def stages(self) -> tuple[str, ...]:
        """The stages of CHAIN these settings use, in its order; a greedy request's end in
        GREEDY, which takes the first maximum instead of cutting and drawing."""
        used = {"ignore_eos": self.ignore_eos, "penalties": self.penalised, "top_k": self.top_k > 0,
                "min_p": self.min_p > 0.0}
        if self.temperature <= 0.0:
            return (*(s for s in LOGIT_STAGES if used[s]), GREEDY)
        return tuple(s for s in CHAIN if used.get(s, True))

    def validate(self) -> None:
        problems = []
        for f in SAMPLING_FIELDS:
            value = getattr(self, f.name)
            if f.kind is not bool and value is not None and value not in f.bounds:
                problems.append(f"{f.name} must be {f.rule or f.bounds.text()}, got {value}")
        if any(not isinstance(s, str) or not s for s in self.stop):
            problems.append("stop strings must be non-empty strings")
        if self.logprobs is not None and not (
            isinstance(self.logprobs, int) and 0 <= self.logprobs <= MAX_TOP_LOGPROBS
        ):
            problems.append(f"logprobs must be in 0..{MAX_TOP_LOGPROBS}, got {self.logprobs!r}")
        if self.grammar is not None and (not isinstance(self.grammar, str) or not self.grammar.strip()):
            problems.append("grammar must be a non-empty grammar definition")
        if self.grammar is not None and self.ignore_eos:
            problems.append("a grammar cannot be combined with ignore_eos (the grammar decides where output ends)")
        if problems:
            raise RequestError("; ".join(problems))


# The sampler chain's stages, in llama.cpp's order: the spec llama_chain.py builds a chain
# from, rows.py and the C kernel follow, and tests/inference/sample check against
# llama.cpp's own chain. The first change the logits (a greedy request's too); the rest cut
# the candidates and draw one.
LOGIT_STAGES = ("ignore_eos", "penalties")
CHAIN = (*LOGIT_STAGES, "top_k", "top_p", "min_p", "temperature", "dist")
GREEDY = "greedy"


def _bound(*rows: SamplingField) -> tuple[SamplingField, ...]:
    """The rows with their SamplingParams field's default and type."""
    hints, defaults = get_type_hints(SamplingParams), SamplingParams()
    return tuple(replace(row, default=getattr(defaults, row.name),
                         kind=next(t for t in get_args(hints[row.name]) or (hints[row.name],) if t is not type(None)))
                 for row in rows)


# Each sampling field: what the engine accepts, its chain stage, its names in the HTTP APIs,
# whether a remote server is sent it, whether a chat may set it (sampling_fields.py).
SAMPLING_FIELDS = _bound(
    SamplingField("temperature", "How freely tokens are drawn: 0 always takes the likeliest, higher spreads the choice",
                  Bounds(0), stage="temperature", forward=always, cli=True,
                  apis={OPENAI: ApiKey("temperature", 1.0, Bounds(0, 2)),
                        ANTHROPIC: ApiKey("temperature", 1.0, Bounds(0, 1)),
                        RESPONSES: ApiKey("temperature", 1.0, Bounds(0, 2))},
                  chat=ChatSetting("Temperature", 0.0, 2.0, 0.05, 2)),
    SamplingField("top_k", "Draw only from the k likeliest tokens (0: from all of them)",
                  Bounds(0), stage="top_k", off=0, cli=True, apis={ANTHROPIC: ApiKey("top_k", 0)},
                  chat=ChatSetting("Top-k", 0, 1000)),
    SamplingField("top_p", "Draw from the likeliest tokens that together hold this share of the probability",
                  Bounds(0, 1, lo_open=True), stage="top_p", forward=always, cli=True,
                  apis={api: ApiKey("top_p", 1.0) for api in ALL_APIS},
                  chat=ChatSetting("Top-p", 0.05, 1.0, 0.05, 2)),
    SamplingField("min_p", "Leave out the tokens less likely than this fraction of the likeliest one",
                  Bounds(0, 1), stage="min_p", off=0.0, cli=True, chat=ChatSetting("Min-p", 0.0, 1.0, 0.01, 2)),
    SamplingField("repeat_penalty", "Make the tokens of the last repeat_last_n less likely (1: off)",
                  Bounds(0, lo_open=True), stage="penalties", off=1.0, cli=True,
                  chat=ChatSetting("Repeat penalty", 0.5, 2.0, 0.05, 2)),
    SamplingField("frequency_penalty", "OpenAI's: lower a token's logit by this for each time it is in the window",
                  Bounds(-2, 2), stage="penalties", off=0.0, kernel=False,
                  apis={OPENAI: ApiKey("frequency_penalty", 0.0)}),
    SamplingField("presence_penalty", "OpenAI's: lower a token's logit by this once if it is in the window",
                  Bounds(-2, 2), stage="penalties", off=0.0, kernel=False,
                  apis={OPENAI: ApiKey("presence_penalty", 0.0)}),
    SamplingField("repeat_last_n", "How many of the last tokens the penalties look at (-1: all, 0: none)",
                  Bounds(-1), stage="penalties"),
    SamplingField("seed", "The same seed draws the same tokens from the same logits", stage="dist",
                  forward=when_set, cli=True,
                  apis={OPENAI: ApiKey("seed", None, Bounds(-(2**63), 2**64 - 1), wrap=2**32)}),
    SamplingField("ignore_eos", "Go on past the end of the reply until max_tokens (vLLM's and llama.cpp's)",
                  stage="ignore_eos", apis={api: ApiKey("ignore_eos", False) for api in ALL_APIS}),
    # Each API reads the reply's length itself, under the server's cap (max_tokens and
    # max_completion_tokens, Anthropic's required max_tokens, max_output_tokens).
    SamplingField("max_tokens", "The most tokens a reply may have (-1: until the model stops)",
                  Bounds(-1), rule=">= 0 (or -1 for unlimited)", forward=when_positive, cli=True,
                  chat=ChatSetting("Max tokens", UNLIMITED, 1 << 20)),
)
CHAT_FIELDS = tuple(f for f in SAMPLING_FIELDS if f.chat is not None)  # what a chat may set


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
    # Set by prepare: the encoded images the prompt's image tokens stand for (see
    # ImageEmbedding). A message's content may be a list of OpenAI-style parts, {"type":
    # "text", "text": ...} and {"type": "image_url", "image_url": {"url": "data:image/...;
    # base64,..."}}: the one way an image enters a request.
    images: tuple[ImageEmbedding, ...] = ()
    # Who it works for (a tab, an API client, a job): the engine's lanes (core/lanes.py).
    owner: Owner = Owner()


# An image's positions in a prompt are negative token ids, outside every vocabulary:
# -(1 + slot * IMAGE_SLOT_SPAN + i) for its i-th embedding row. The slot is the engine's
# number for one image's bytes under its projector, so two prompts with the same image after
# the same text have the same ids there and share KV cells like any prefix. They fit in the
# int32 the disk prompt cache stores tokens in (32,767 images per engine, 65,536 rows each).
IMAGE_SLOT_SPAN = 1 << 16
MAX_IMAGE_SLOTS = (1 << 31) // IMAGE_SLOT_SPAN - 1


def image_token(slot: int, row: int) -> int:
    return -(1 + slot * IMAGE_SLOT_SPAN + row)


def image_slot_row(token: int) -> tuple[int, int]:
    """The (slot, row) an image token id stands for (token < 0)."""
    v = -token - 1
    return v // IMAGE_SLOT_SPAN, v % IMAGE_SLOT_SPAN


# In ImageEmbedding.layout: the place of the image's next embedding row (text tokens are >= 0).
IMAGE_ROW = -1


@dataclass(frozen=True, slots=True, eq=False)
class ImageEmbedding:
    """One image encoded by the model's projector: its embedding rows (n_tokens x n_embd,
    float32), computed once per image bytes and projector (sha256) and shared by every
    request that shows it.

    layout: the image's part of a prompt in order, text tokens the projector's format puts
    around and between its pieces (SmolVLM's overview and tiles, Gemma 3's start and end of
    image) and IMAGE_ROW for each row; () is the rows alone (LLaVA's).
    bidirectional: the rows of each piece attend to each other both ways (Gemma 3): a piece
    is decoded whole in one llama_decode with causal attention off, never split.
    mrope: for a model with M-RoPE (Qwen-VL), each row's (t, y, x) offsets from its piece's
    first position (n_tokens x 3, int32), and spans the positions each piece spans, by its
    first row (inference/positions.py); such pieces are decoded whole too."""

    sha256: str
    slot: int
    embd: np.ndarray
    layout: tuple[int, ...] = ()
    bidirectional: bool = False
    mrope: np.ndarray | None = None
    spans: tuple[tuple[int, int], ...] = ()

    def __post_init__(self) -> None:
        if self.layout and self.layout.count(IMAGE_ROW) != self.n_tokens:
            raise ValueError("an image's layout must place each of its rows once")
        if self.mrope is not None and self.mrope.shape != (self.n_tokens, 3):
            raise ValueError("an image's M-RoPE offsets must be three a row")

    @property
    def whole(self) -> bool:
        """Each piece is decoded in one step, never cut across steps."""
        return self.bidirectional or self.mrope is not None

    def span(self, first_row: int) -> int | None:
        """The positions the piece starting at first_row spans (None: as many as its rows)."""
        return next((n for row, n in self.spans if row == first_row), None)

    @property
    def n_tokens(self) -> int:
        return int(self.embd.shape[0])

    @property
    def token_ids(self) -> list[int]:
        """The image's part of a prompt: its text and a placeholder per row."""
        if not self.layout:
            return [image_token(self.slot, i) for i in range(self.n_tokens)]
        rows = iter(range(self.n_tokens))
        return [image_token(self.slot, next(rows)) if t == IMAGE_ROW else t for t in self.layout]


SPECULATIVE_MODES = ("off", "lookup", "draft")
# ChatRequest.overflow: what a chat longer than the context keeps (tokenizer/overflow.py)
OVERFLOW_STOP = "stop"
OVERFLOW_DROP_OLDEST = "drop_oldest"
OVERFLOW_TRUNCATE_MIDDLE = "truncate_middle"
OVERFLOW_POLICIES = (OVERFLOW_STOP, OVERFLOW_DROP_OLDEST, OVERFLOW_TRUNCATE_MIDDLE)


def reply_room(n_ctx: int, max_tokens: int) -> int:
    """The room a prompt leaves for its reply: the reply's token limit, at most a quarter of
    the context (a reply "until the model stops", max_tokens <= 0, gets the quarter). The one
    rule: the engine cuts an overflowing chat to it (tokenizer/overflow.py) and the app
    sizes a chat's documents by it (app/documents/prompt.py), so a prompt the app built to
    fit is never cut by the engine."""
    return min(max_tokens if max_tokens > 0 else n_ctx // 4, n_ctx // 4)
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
    # Speculative decoding (inference/speculative/): "off", "lookup" (draft tokens from the
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
    # A vision projector (mmproj GGUF) for this model: images in requests are encoded by it
    # (inference/worker/image_encoder.py). None: requests with images are refused.
    mmproj: Path | None = None
    # The most tokens one image may take: a projector that reads images at their own size
    # (Qwen-VL's: up to thousands of tokens) reads a larger one smaller, so it leaves the
    # chat room (llama-server's --image-max-tokens). None: the projector's own limit.
    image_max_tokens: int | None = None

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
        if self.speculative == "draft" and self.mmproj is not None:
            # the draft model would read the image's placeholder ids as its tokens
            raise ValueError("a vision projector (mmproj) does not go with a draft model yet; use lookup")
        if self.image_max_tokens is not None and self.image_max_tokens < 1:
            raise ValueError(f"image_max_tokens must be at least 1, got {self.image_max_tokens}")
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
