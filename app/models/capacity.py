"""How many chats of a given context fit this machine, for each KV cache type: the
capacity planner behind `chorus models fit` and `--chats-that-fit`.

The engine keeps one unified KV cache, so N chats of C tokens each need N * C cells; a
cell costs what the model's layers and KV width and the cache type make it (the memory
estimate of inference.gguf). The room is what app/models/fit.py counts as fitting (70% of
free RAM, 85% of free GPU memory when the model's layers go there), less the weights and a
margin for llama.cpp's compute buffers. llama.cpp holds at most 256 sequences. A vision
model's projector (its mmproj file, loaded beside the weights: on the GPU when the layers
go there) counts as weights, by its file's size.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from app.models.fit import GPU_FITS, RAM_FITS
from inference import KV_TYPES, LoadSettings
from inference.gguf import GgufHeader, estimate_memory

MAX_CHATS = 256  # llama.cpp's sequence limit (LLAMA_MAX_SEQ)
COMPUTE_MARGIN = 256 * 1024 * 1024  # compute buffers and the app, besides weights and KV
CONTEXTS = (2048, 4096, 8192, 16384)


@dataclass(frozen=True)
class Capacity:
    kv_type: str
    ctx_per_chat: int
    chats: int  # of ctx_per_chat tokens each, at most MAX_CHATS
    kv_bytes_per_chat: int
    weights_bytes: int
    room_bytes: int  # for weights and KV, in the memory that limits (RAM or GPU)
    limit: str  # "RAM" | "GPU memory"


def plan(header: GgufHeader, ram_available: int, gpu_free: int | None, gpu_supported: bool,
         gpu_layers: int | None = None, contexts: tuple[int, ...] = CONTEXTS,
         kv_types: tuple[str, ...] = KV_TYPES, projector_bytes: int = 0) -> list[Capacity]:
    """One Capacity per KV type and context per chat; projector_bytes: the vision
    projector's file, counted with the weights."""
    capacities = []
    for kv_type in kv_types:
        for ctx in contexts:
            one = estimate_memory(header, ctx, gpu_layers, gpu_supported and gpu_free is not None, kv_type)
            on_gpu = one.gpu_layers > 0
            if on_gpu and gpu_free is not None:
                room, weights, per_chat, limit = GPU_FITS * gpu_free, one.weights_gpu_bytes, one.kv_gpu_bytes, \
                    "GPU memory"
            else:
                room, weights, per_chat, limit = RAM_FITS * ram_available, one.weights_bytes, one.kv_bytes, "RAM"
            weights += projector_bytes
            left = room - weights - COMPUTE_MARGIN
            chats = max(0, min(MAX_CHATS, int(left // per_chat))) if per_chat > 0 else MAX_CHATS
            capacities.append(Capacity(kv_type, ctx, chats, per_chat, weights, int(room), limit))
    return capacities


def load_bytes(settings: LoadSettings, header: GgufHeader, gpu_supported: bool) -> int:
    """The RAM loading a model with settings takes, by the estimate: its weights and its KV
    cache for the settings' whole context (what stays off the GPU of both), and the margin
    for llama.cpp's compute buffers, and its vision projector's file when it has one and
    nothing goes to the GPU. What a model pool counts against its budget."""
    one = estimate_memory(header, settings.n_ctx, settings.n_gpu_layers, gpu_supported, settings.cache_type())
    projector = projector_size(settings.mmproj) if one.gpu_layers == 0 else 0
    return (one.weights_bytes - one.weights_gpu_bytes) + (one.kv_bytes - one.kv_gpu_bytes) + projector \
        + COMPUTE_MARGIN


def projector_size(path: Path | str | None) -> int:
    """A vision projector file's size (0 for none, or one that cannot be read)."""
    if not path:
        return 0
    try:
        return Path(path).stat().st_size
    except OSError:
        return 0


def chats_that_fit(settings: LoadSettings, header: GgufHeader, ctx_per_chat: int, ram_available: int,
                   gpu_free: int | None, gpu_supported: bool) -> LoadSettings:
    """settings with n_seq_max and n_ctx for as many chats of ctx_per_chat as fit with its
    KV type (at least one). Raises ValueError when not even one fits."""
    (capacity,) = plan(header, ram_available, gpu_free, gpu_supported, settings.n_gpu_layers,
                       contexts=(ctx_per_chat,), kv_types=(settings.cache_type(),),
                       projector_bytes=projector_size(settings.mmproj))
    if capacity.chats < 1:
        raise ValueError(f"not one chat of {ctx_per_chat} tokens fits in {capacity.limit} with a "
                         f"{capacity.kv_type} KV cache; try a smaller context or --kv-type q4_0")
    chats = capacity.chats
    n_batch = max(settings.n_batch, chats)  # one decode token per sequence in a step
    return replace(settings, n_seq_max=chats, n_ctx=chats * ctx_per_chat, n_batch=n_batch)
