"""What one side of `chorus bench` measured (the engine, or a baseline), in the report's fields."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from inference import percentile


def seconds_at(values: Sequence[float | None], q: float) -> float:
    """A latency percentile for the report; NaN where nothing was measured (one-token
    replies have no inter-token gaps), so ratios and tables still print."""
    got = percentile([v for v in values if v is not None], q)
    return math.nan if got is None else got


def or_nan(value: float | None) -> float:
    return math.nan if value is None else value


@dataclass
class RunResult:
    wall_s: float
    gen_tok_s: float
    decode_tok_s: float
    ttft_p50_s: float
    ttft_p95_s: float
    itl_p50_s: float
    itl_p95_s: float
    prompt_tokens_computed: int
    kv_cells_peak: int
    max_batch_seqs: int
    # Decode-only steps (engine only; None for the baseline): EngineCore.step() outside
    # llama_decode, and the samplers' part of it, in milliseconds.
    host_ms_per_step: float | None = None
    host_ms_per_step_p50: float | None = None
    host_ms_per_step_p95: float | None = None
    sample_ms_per_step: float | None = None
    step_ms_per_step: float | None = None
    # Speculative decoding (engine only): draft tokens verified and kept, and tokens
    # generated per engine step.
    draft_tokens: int | None = None
    draft_tokens_accepted: int | None = None
    generated_per_step: float | None = None
