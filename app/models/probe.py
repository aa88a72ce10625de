"""What the model dialog may know before a model loads: whether this llama.cpp build can
offload to a GPU, and how much memory a GGUF file will take with the current settings.

The dialog gets this object from the controller and never reads model files itself.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from inference import LoadSettings, backend
from inference.gguf import GgufError, GgufHeader, MemoryEstimate, estimate_memory, read_gguf_header


class ModelProbe:
    def __init__(self, settings: Callable[[], LoadSettings]) -> None:
        self._settings = settings  # the current ones: n_ctx and KV type may change
        self._headers: dict[tuple[Path, int, float], GgufHeader] = {}
        self._gpu: bool | None = None

    def gpu_offload_supported(self) -> bool:
        if self._gpu is None:
            self._gpu = backend.gpu_offload_supported()
        return self._gpu

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
