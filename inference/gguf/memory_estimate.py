"""How much memory a GGUF model will take, before llama.cpp loads it.

Weights: the tensors' bytes as stored in the file (llama.cpp maps them as they are).
KV cache: 2 (K and V) x layers x context cells x KV width per cell x bytes per element,
where the KV width is head size x KV heads (grouped-query attention). Compute buffers
(a few tens of MB, growing with the batch size) are not counted. Models with sliding-window
layers (Gemma 3) keep a smaller cache on those layers, so the KV figure is an upper bound.

Offloading n GPU layers puts the last n repeating layers (their weights and KV) on the
GPU, and with n > layers also the output layer, as llama.cpp does; the token embeddings
stay in system memory.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from inference.gguf.reader import GgufError, GgufHeader, as_float, as_int

# Bytes per element of each KV cache type Chorus uses (Q8_0: 34-byte blocks of 32 values;
# Q4_0: 18-byte blocks of 32).
KV_BYTES_PER_ELEMENT = {"f16": 2.0, "q8_0": 34 / 32, "q4_0": 18 / 32, "f32": 4.0}
# llama.cpp rounds the context up to a multiple of this many cells.
KV_CELL_PADDING = 256
_BLOCK = re.compile(r"blk\.(\d+)\.")
_OUTPUT_TENSORS = ("output.weight", "output_norm.weight", "output.bias", "output_norm.bias")


@dataclass(frozen=True, slots=True)
class ModelShape:
    architecture: str
    n_layer: int
    n_embd: int
    n_head: int
    n_embd_k_gqa: int  # K width per layer and cell: key head size x KV heads
    n_embd_v_gqa: int
    n_ctx_train: int


@dataclass(frozen=True, slots=True)
class MemoryEstimate:
    n_layer: int
    n_ctx: int  # cells the KV cache will have (padded as llama.cpp does)
    kv_type: str
    gpu_layers: int  # layers offloaded (0 on a CPU-only build)
    weights_bytes: int
    kv_bytes: int
    weights_gpu_bytes: int
    kv_gpu_bytes: int

    @property
    def total_bytes(self) -> int:
        return self.weights_bytes + self.kv_bytes

    @property
    def gpu_bytes(self) -> int:
        return self.weights_gpu_bytes + self.kv_gpu_bytes


def model_shape(header: GgufHeader) -> ModelShape:
    arch = header.arch_value
    try:
        n_layer = as_int(arch("block_count"))
        n_embd = as_int(arch("embedding_length"))
        n_head = _per_layer_max(arch("attention.head_count"))
    except (TypeError, ValueError):
        kind = header.architecture or "model"
        raise GgufError(f"{header.path.name} lacks the layer count, width or heads of a {kind}") from None
    n_head_kv = arch("attention.head_count_kv", n_head)
    head_k = as_int(arch("attention.key_length", n_embd // max(n_head, 1)))
    head_v = as_int(arch("attention.value_length", head_k))
    kv_heads = _per_layer_mean(n_head_kv, n_layer)
    return ModelShape(
        architecture=header.architecture,
        n_layer=n_layer,
        n_embd=n_embd,
        n_head=n_head,
        n_embd_k_gqa=round(head_k * kv_heads),
        n_embd_v_gqa=round(head_v * kv_heads),
        n_ctx_train=as_int(arch("context_length", 0) or 0),
    )


def kv_cache_bytes(shape: ModelShape, n_ctx: int, kv_type: str = "f16", layers: int | None = None) -> int:
    layers = shape.n_layer if layers is None else layers
    per_cell = (shape.n_embd_k_gqa + shape.n_embd_v_gqa) * KV_BYTES_PER_ELEMENT[kv_type]
    return round(layers * padded_ctx(n_ctx) * per_cell)


def padded_ctx(n_ctx: int) -> int:
    return -(-n_ctx // KV_CELL_PADDING) * KV_CELL_PADDING


def estimate_memory(
    header: GgufHeader,
    n_ctx: int,
    gpu_layers: int | None = None,
    gpu_supported: bool = False,
    kv_type: str = "f16",
) -> MemoryEstimate:
    """gpu_layers None means llama.cpp's default in Chorus: everything if the build can."""
    shape = model_shape(header)
    if not gpu_supported:
        offloaded = 0
    else:
        offloaded = shape.n_layer + 1 if gpu_layers is None else max(0, gpu_layers)
    on_gpu_blocks = min(offloaded, shape.n_layer)
    first_gpu_block = shape.n_layer - on_gpu_blocks
    weights_gpu = 0
    for t in header.tensors:
        block = _BLOCK.match(t.name)
        offloaded_block = block is not None and int(block.group(1)) >= first_gpu_block
        offloaded_output = t.name in _OUTPUT_TENSORS and offloaded > shape.n_layer
        if offloaded_block or offloaded_output:
            weights_gpu += t.nbytes
    return MemoryEstimate(
        n_layer=shape.n_layer,
        n_ctx=padded_ctx(n_ctx),
        kv_type=kv_type,
        gpu_layers=min(offloaded, shape.n_layer + 1),
        weights_bytes=header.data_bytes,
        kv_bytes=kv_cache_bytes(shape, n_ctx, kv_type),
        weights_gpu_bytes=weights_gpu,
        kv_gpu_bytes=kv_cache_bytes(shape, n_ctx, kv_type, layers=on_gpu_blocks),
    )


def _per_layer_max(value: object) -> int:
    # Some architectures (OpenELM) give a head count per layer.
    return int(max(value)) if isinstance(value, list) else as_int(value)


def _per_layer_mean(value: object, n_layer: int) -> float:
    if isinstance(value, list):
        return sum(value) / max(len(value), 1)
    return as_float(value)
