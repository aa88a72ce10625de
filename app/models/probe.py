"""What the model dialog may know before a model loads: whether this llama.cpp build can
offload to a GPU (as the engine reported it: the window's process loads no llama.cpp), and
how much memory a GGUF file will take with the current settings.

The dialog gets this object from the controller and never reads model files itself.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from inference import BackendInfo, LoadSettings
from inference.gguf import GgufError, GgufHeader, MemoryEstimate, estimate_memory, read_gguf_header


class ModelProbe:
    def __init__(self, settings: Callable[[], LoadSettings], backend: Callable[[], BackendInfo | None]) -> None:
        self._settings = settings  # the current ones: n_ctx and KV type may change
        self._backend = backend  # the engines' build, once one reported it
        self._headers: dict[tuple[Path, int, float], GgufHeader] = {}

    def gpu_offload_supported(self) -> bool:
        """False until an engine said otherwise: a CPU estimate is the safe one."""
        backend = self._backend()
        return backend is not None and backend.gpu_offload

    def estimate(self, path: str | Path, gpu_layers: int | None = None) -> MemoryEstimate:
        """Raises GgufError (a ValueError) with a readable message for a file it can't read."""
        settings = self._settings()
        return estimate_memory(
            self._header(Path(path)),
            n_ctx=settings.n_ctx,
            gpu_layers=gpu_layers,
            gpu_supported=self.gpu_offload_supported(),
            kv_type=settings.cache_type(),
        )

    def _header(self, path: Path) -> GgufHeader:
        # Each change of the GPU layers asks again; the header is read once per file version.
        try:
            stat = path.stat()
        except OSError as exc:
            raise GgufError(f"cannot read {path.name}: {exc.strerror or exc}") from None
        key = (path, stat.st_size, stat.st_mtime)
        if key not in self._headers:
            self._headers[key] = read_gguf_header(path)
        return self._headers[key]
