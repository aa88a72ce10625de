"""GGUF files read in pure Python: header metadata, file checks, and memory estimates.

A door of its own besides the package's: the app reads a model's header (the Hub browser,
the model dialog) without loading llama.cpp.
"""

from inference.gguf.memory_estimate import MemoryEstimate, estimate_memory
from inference.gguf.reader import GgufError, GgufHeader, TensorInfo, read_gguf_header, read_gguf_header_prefix

__all__ = ["GgufError", "GgufHeader", "MemoryEstimate", "TensorInfo", "estimate_memory", "read_gguf_header",
           "read_gguf_header_prefix"]
