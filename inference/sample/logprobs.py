"""Log-probabilities of one logits row: log-softmax of the raw logits, with numpy."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, slots=True)
class SampledLogprobs:
    """A sampled token's log-probability and the top alternatives (token id, logprob),
    most likely first."""

    logprob: float
    top: tuple[tuple[int, float], ...]


def log_softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits.astype(np.float64) - float(np.max(logits))
    return shifted - np.log(np.sum(np.exp(shifted)))


def top_logprobs(logprobs: np.ndarray, k: int) -> tuple[tuple[int, float], ...]:
    """The k most likely tokens, sorted by logprob (highest first; ties by id)."""
    if k <= 0:
        return ()
    k = min(k, logprobs.size)
    best = np.argpartition(-logprobs, k - 1)[:k]
    ranked = sorted(best.tolist(), key=lambda t: (-logprobs[t], t))
    return tuple((int(t), float(logprobs[t])) for t in ranked)


def sampled_logprobs(logits: np.ndarray, token: int, k: int) -> SampledLogprobs:
    lp = log_softmax(logits)
    return SampledLogprobs(float(lp[token]), top_logprobs(lp, k))
