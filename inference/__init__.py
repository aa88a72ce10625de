"""The Chorus inference engine: one continuously batched llama.cpp context.

This package imports neither Qt nor storage. Public entry points are re-exported here.
"""

from inference.errors import EngineError, ModelLoadError, RequestError
from inference.ids import new_request_id
from inference.outputs import Delta, FinishReason, RequestStats
from inference.params import ChatRequest, LoadSettings, SamplingParams

__all__ = [
    "ChatRequest",
    "Delta",
    "EngineError",
    "FinishReason",
    "LoadSettings",
    "ModelLoadError",
    "RequestError",
    "RequestStats",
    "SamplingParams",
    "new_request_id",
]
