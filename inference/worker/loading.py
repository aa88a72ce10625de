"""Loading a GGUF model and making a context on it: what the target model's runner and a
draft model's both do, with the same settings and the same errors."""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from pathlib import Path

import llama_cpp as ll

from inference.errors import ModelLoadError
from inference.params import LoadSettings
from inference.worker import backend
from inference.worker.batch import TokenBatch

ProgressCallback = Callable[[float], None]


def gpu_layers(settings: LoadSettings) -> int:
    """The layers offloaded: the setting, or all of them where this build has a GPU."""
    if settings.n_gpu_layers is not None:
        return settings.n_gpu_layers
    return 999 if ll.llama_supports_gpu_offload() else 0


def load_model(path: Path, n_gpu_layers: int,
               progress: ProgressCallback | None = None) -> tuple[ll.llama_model_p, object | None]:
    """The model, and the progress callback object llama.cpp points at (the caller holds it
    as long as the model: llama.cpp keeps only the pointer). Raises ModelLoadError."""
    params = ll.llama_model_default_params()
    params.n_gpu_layers = n_gpu_layers
    if not backend.cpu_repack_enabled():
        params.use_extra_bufts = False
    callback = None
    if progress is not None:
        report = progress

        @ll.llama_progress_callback
        def on_progress(fraction: float, _user: ctypes.c_void_p) -> bool:
            report(float(fraction))
            return True

        callback = on_progress
        params.progress_callback = on_progress
    backend.clear_last_error()
    model = ll.llama_model_load_from_file(str(path).encode(), params)
    if not model:
        reason = f" ({backend.last_error()})" if backend.last_error() else ""
        raise ModelLoadError(
            f"llama.cpp could not load {path.name}{reason}: the file is damaged, "
            "truncated, or uses an architecture this llama.cpp build does not support"
        )
    return model, callback


def create_context(model: ll.llama_model_p, s: LoadSettings) -> ll.llama_context_p:
    """A context of s.n_ctx cells shared by s.n_seq_max sequences. Raises ModelLoadError."""
    params = ll.llama_context_default_params()
    params.n_ctx = s.n_ctx
    params.n_batch = s.n_batch
    params.n_ubatch = s.n_ubatch
    params.n_seq_max = s.n_seq_max
    params.n_threads = s.threads()
    params.n_threads_batch = s.threads_batch()
    # One cell pool for all sequences: seq_cp shares cells instead of copying them.
    params.kv_unified = True
    params.no_perf = True
    # The reproducible mode's q8_0 cache sends every attention through llama.cpp's CPU
    # kernel that walks a sequence's own cells in order and skips masked ones; the tiled
    # and split-KV kernels chosen by batch shape round differently. So a sequence gets
    # bit-identical logits whatever else shares its batch.
    params.type_k = params.type_v = backend.GGML_TYPES[s.cache_type()]
    flash = s.uses_flash_attn()
    if flash is not None:
        params.flash_attn_type = ll.LLAMA_FLASH_ATTN_TYPE_ENABLED if flash else ll.LLAMA_FLASH_ATTN_TYPE_DISABLED
    ctx = ll.llama_init_from_model(model, params)
    if not ctx:
        raise ModelLoadError(
            f"llama.cpp could not create a context of {s.n_ctx} tokens "
            f"for {s.n_seq_max} sequences (out of memory?)"
        )
    return ctx


def free_model(batch: TokenBatch, ctx: ll.llama_context_p, model: ll.llama_model_p) -> None:
    """Free a batch, the context it was for and the model under it, in that order."""
    batch.free()
    ll.llama_free(ctx)
    ll.llama_model_free(model)
