"""The Chorus inference engine: one continuously batched llama.cpp context.

This package is the one door for app/ and ui/ (an import-linter contract): everything they
use of the engine is named here. Inside, the rooms are

    core/       the engine thread, its synchronous step, request handles, the delta router,
                the output processor, metrics
    sched/      the scheduler and its time-aware step budget
    kv/         the KV cache manager, the prefix tree, the prompt cache on disk
    sample/     the sampling paths (C kernel, numpy, llama.cpp's chain), grammars, log-probabilities
    worker/     the only code that drives llama.cpp's context; its backend helpers
    tokenizer/  chat templates, the input processor, special tokens, detokenizing, stops
    gguf/       GGUF headers, file checks and memory estimates, in pure Python

with the request's data types (params, outputs, request, errors) at the root. It imports
neither Qt nor storage. The names that load llama.cpp (the engine, the input processor,
the backend) are imported on first use, so that a process that only passes deltas and
settings around (the desktop window) never loads it.
"""

from __future__ import annotations

import importlib
import os
from typing import TYPE_CHECKING, Any

# llama.cpp's CPU threads are an OpenMP team that meets at a barrier after every graph
# operation; libgomp spins 300,000 times there before sleeping. With more runnable threads
# than cores (another program busy, two engines) a spinning thread holds the core its partner
# needs: 64 tokens beside two `yes` took 3.4-8.2 s (median 4.5) against 1.1 s quiet. Spinning
# 3,000 times keeps the quiet speed (median 1.02 s against 1.07) and halves that (1.9-2.4 s,
# 5 of 5; passive waiting, no spin: 1.5-3.6 s and 1.3 s quiet). docs/engine.md has the table.
# Read by libgomp when llama.cpp loads, which this package's modules do: set before any of
# them; engine processes inherit it. A user's own OpenMP setting wins.
if "OMP_WAIT_POLICY" not in os.environ and "GOMP_SPINCOUNT" not in os.environ:
    os.environ["GOMP_SPINCOUNT"] = "3000"

from inference.client import DeltaSink, EngineClient
from inference.core.lanes import Lane
from inference.core.metrics import MetricsSnapshot, percentile
from inference.errors import EngineError, ModelLoadError, RequestError, SchemaError
from inference.outputs import (
    BackendInfo,
    Delta,
    FinishReason,
    ModelInfo,
    Phase,
    RequestStats,
    TokenLogprob,
    TopLogprob,
)
from inference.owner import TITLE_OWNER, Owner, api_owner, chat_owner, job_owner
from inference.params import (
    CHAT_FIELDS,
    KV_TYPES,
    OVERFLOW_POLICIES,
    PRIORITY_BACKGROUND,
    PRIORITY_TAB,
    PRIORITY_VISIBLE_TAB,
    SAMPLING_FIELDS,
    SPARE_PRIORITY,
    SPECULATIVE_MODES,
    UNLIMITED,
    ChatRequest,
    LoadSettings,
    SamplingParams,
    is_spare,
    new_request_id,
    physical_cores,
    reply_room,
)
from inference.sampling_fields import ANTHROPIC, OPENAI, RESPONSES, ApiKey, Bounds, ChatSetting, SamplingField

if TYPE_CHECKING:
    from inference.core.engine import Engine
    from inference.core.handle import Completion, RequestHandle
    from inference.core.router import DeltaRouter
    from inference.sample.grammars import JSON_OBJECT
    from inference.sample.json_schema import gbnf_grammar, lark_grammar, lark_json, lark_literal, schema_grammar
    from inference.tokenizer.chat_template import template_problem, template_supports_tools
    from inference.tokenizer.content_parts import MAX_IMAGES, image_bytes
    from inference.tokenizer.input_processor import InputProcessor
    from inference.worker import backend
    from inference.worker.embedding_worker import EmbeddingWorker
    from inference.worker.image_file import MAX_IMAGE_BYTES, decode_image
    from inference.worker.vocab_loader import load_input_processor

# name -> the module that defines it, imported when the name is first used
_LAZY = {
    "Engine": "inference.core.engine",
    "Completion": "inference.core.handle",
    "RequestHandle": "inference.core.handle",
    "DeltaRouter": "inference.core.router",
    "InputProcessor": "inference.tokenizer.input_processor",
    # llguidance (~50 ms to import), for the requests that ask for structured output
    "JSON_OBJECT": "inference.sample.grammars",
    "schema_grammar": "inference.sample.json_schema",
    "lark_grammar": "inference.sample.json_schema",
    "gbnf_grammar": "inference.sample.json_schema",
    "lark_json": "inference.sample.json_schema",
    "lark_literal": "inference.sample.json_schema",
    "template_problem": "inference.tokenizer.chat_template",
    "MAX_IMAGES": "inference.tokenizer.content_parts",  # the most images one request may show
    "image_bytes": "inference.tokenizer.content_parts",  # an image_url part's data: URL, decoded as the engine does
    "template_supports_tools": "inference.tokenizer.chat_template",
    "load_input_processor": "inference.worker.vocab_loader",
    "EmbeddingWorker": "inference.worker.embedding_worker",
    # an image file checked by the engine's own limits before a command stores anything (Pillow)
    "decode_image": "inference.worker.image_file",
    "MAX_IMAGE_BYTES": "inference.worker.image_file",
}
# a module of its own: llama.cpp's backend (versions, CPU features, GPU offload, its log)
_LAZY_MODULES = {"backend": "inference.worker.backend"}


def __getattr__(name: str) -> Any:
    if name in _LAZY_MODULES:
        value = importlib.import_module(_LAZY_MODULES[name])
    elif name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
    else:
        raise AttributeError(f"module 'inference' has no attribute {name!r}")
    globals()[name] = value
    return value


__all__ = [
    "ANTHROPIC",
    "CHAT_FIELDS",
    "KV_TYPES",
    "MAX_IMAGES",
    "MAX_IMAGE_BYTES",
    "OPENAI",
    "OVERFLOW_POLICIES",
    "JSON_OBJECT",
    "PRIORITY_BACKGROUND",
    "PRIORITY_TAB",
    "PRIORITY_VISIBLE_TAB",
    "RESPONSES",
    "SAMPLING_FIELDS",
    "SPARE_PRIORITY",
    "SPECULATIVE_MODES",
    "TITLE_OWNER",
    "UNLIMITED",
    "ApiKey",
    "BackendInfo",
    "Bounds",
    "ChatRequest",
    "ChatSetting",
    "Completion",
    "Delta",
    "DeltaRouter",
    "DeltaSink",
    "EngineClient",
    "EmbeddingWorker",
    "Engine",
    "EngineError",
    "FinishReason",
    "InputProcessor",
    "Lane",
    "LoadSettings",
    "MetricsSnapshot",
    "ModelInfo",
    "ModelLoadError",
    "Owner",
    "Phase",
    "RequestError",
    "RequestHandle",
    "RequestStats",
    "SamplingParams",
    "SamplingField",
    "SchemaError",
    "TokenLogprob",
    "TopLogprob",
    "api_owner",
    "backend",
    "chat_owner",
    "decode_image",
    "image_bytes",
    "schema_grammar",
    "lark_grammar",
    "gbnf_grammar",
    "lark_json",
    "lark_literal",
    "is_spare",
    "job_owner",
    "load_input_processor",
    "new_request_id",
    "percentile",
    "physical_cores",
    "reply_room",
    "template_problem",
    "template_supports_tools",
]
