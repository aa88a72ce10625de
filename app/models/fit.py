"""Whether a model will fit this machine: "fits", "tight" or "too large", before downloading it.

Thresholds (of what is free now, not of the machine's total):
- RAM: the whole estimate (weights + KV cache) against available RAM. Up to 70% fits:
  the OS, the app and its compute buffers (not in the estimate) keep the rest. Up to 95% is
  tight: it loads, but other programs may be pushed to swap. Above that, too large.
- GPU (when NVML sees one and part of the model goes there): the GPU share against free GPU
  memory, fits up to 85% (llama.cpp's compute buffers live there too), tight up to 95%.
  With a GPU the RAM side is only what stays off it (total - GPU share); the worse of the
  two verdicts is the answer.
- A vision model's projector (HubFile.projector) counts with its file's size: in RAM, and
  on the GPU when the model's layers go there (llama.cpp's mtmd puts it beside them).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import psutil

from app.models.hub_types import HubFile
from inference.gguf import MemoryEstimate

RAM_FITS = 0.70
GPU_FITS = 0.85
TIGHT = 0.95


class Fit(enum.Enum):
    FITS = "fits"
    TIGHT = "tight"
    TOO_LARGE = "too large"


_ORDER = {Fit.FITS: 0, Fit.TIGHT: 1, Fit.TOO_LARGE: 2}


@dataclass(frozen=True)
class FitVerdict:
    fit: Fit
    reason: str  # one line, e.g. "1.2 GB of 15.6 GB free RAM"


def assess(total_bytes: int, gpu_bytes: int, ram_available: int, gpu_free: int | None) -> FitVerdict:
    on_gpu = gpu_bytes if gpu_free is not None else 0
    ram = _verdict(total_bytes - on_gpu, ram_available, RAM_FITS, "RAM")
    if not on_gpu or gpu_free is None:
        return ram
    gpu = _verdict(on_gpu, gpu_free, GPU_FITS, "GPU memory")
    worse = max((ram, gpu), key=lambda v: _ORDER[v.fit])
    if worse.fit is Fit.FITS:
        return FitVerdict(Fit.FITS, f"{gpu.reason}, {ram.reason}")
    return worse


def assess_file(file: HubFile, estimate: MemoryEstimate | None, ram_available: int,
                gpu_free: int | None) -> FitVerdict:
    """A Hub file's verdict from its estimate (None: the header could not be read, so the
    weights alone), its projector counted."""
    total, on_gpu = (estimate.total_bytes, estimate.gpu_bytes) if estimate else (file.size_bytes, 0)
    projector = file.projector.size_bytes if file.projector is not None else 0
    return assess(total + projector, on_gpu + projector if on_gpu else 0, ram_available, gpu_free)


def _verdict(need: int, free: int, fits_share: float, what: str) -> FitVerdict:
    reason = f"{gb(need)} of {gb(free)} free {what}"
    if free > 0 and need <= fits_share * free:
        return FitVerdict(Fit.FITS, reason)
    if free > 0 and need <= TIGHT * free:
        return FitVerdict(Fit.TIGHT, reason)
    return FitVerdict(Fit.TOO_LARGE, reason)


def gb(n: int) -> str:
    return f"{n / 1e9:.1f} GB" if n >= 1e8 else f"{n / 1e6:.0f} MB"


def machine_memory() -> tuple[int, int | None]:
    """(available RAM, free memory of the GPU with the most free, or None without NVML/GPU)."""
    return int(psutil.virtual_memory().available), _gpu_free()


def _gpu_free() -> int | None:
    # The same NVML access as app/perf/hardware.py's HardwareSampler, without its sampling state.
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            count = pynvml.nvmlDeviceGetCount()
            free = [int(pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(i)).free)
                    for i in range(count)]
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # no library, no driver, no device: all mean "no GPU figure"
        return None
    return max(free) if free else None


def best_file(files: list[HubFile], verdicts: dict[str, FitVerdict]) -> HubFile | None:
    """The largest file (best quality) that fits; else the smallest that is tight; else None."""
    def with_fit(fit: Fit) -> list[HubFile]:
        return [f for f in files if f.name in verdicts and verdicts[f.name].fit is fit]

    fitting = with_fit(Fit.FITS)
    if fitting:
        return max(fitting, key=lambda f: f.size_bytes)
    tight = with_fit(Fit.TIGHT)
    return min(tight, key=lambda f: f.size_bytes) if tight else None
