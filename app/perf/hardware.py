"""What the machine is doing: NVIDIA GPUs through NVML (nvidia-ml-py), and this process's
CPU and memory through psutil. Without an NVIDIA GPU or driver it says so and goes on."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import psutil


@dataclass(frozen=True, slots=True)
class GpuSample:
    index: int
    name: str
    utilization_pct: float
    memory_used_mib: float
    memory_total_mib: float
    temperature_c: float | None
    power_w: float | None


@dataclass(frozen=True, slots=True)
class HardwareSample:
    cpu_pct: float  # this process and its children (the engine), 100 = one core
    rss_mib: float
    gpus: tuple[GpuSample, ...] = ()
    gpu_note: str | None = None  # why there are no GPU figures


@dataclass
class HardwareSampler:
    pid: int = field(default_factory=os.getpid)

    def __post_init__(self) -> None:
        self._process = psutil.Process(self.pid)
        self._process.cpu_percent(None)
        self._children: dict[int, psutil.Process] = {}
        self._nvml = None
        self.gpu_note: str | None = None
        try:
            import pynvml

            pynvml.nvmlInit()
            self._nvml = pynvml
            if pynvml.nvmlDeviceGetCount() == 0:
                self.gpu_note = "No NVIDIA GPU found"
        except Exception as exc:  # no library, no driver, no device: all the same here
            self.gpu_note = f"No NVIDIA GPU or driver ({type(exc).__name__.replace('NVMLError_', '')})"

    def sample(self) -> HardwareSample:
        cpu, rss = self._cpu_and_memory()
        return HardwareSample(cpu, rss, self._gpus(), self.gpu_note)

    def _cpu_and_memory(self) -> tuple[float, float]:
        procs = [self._process]
        try:
            for child in self._process.children(recursive=True):
                procs.append(self._children.setdefault(child.pid, child))
        except psutil.Error:
            pass
        cpu = rss = 0.0
        for proc in procs:
            try:
                cpu += proc.cpu_percent(None)
                rss += proc.memory_info().rss / 2**20
            except psutil.Error:
                self._children.pop(proc.pid, None)
        return cpu, rss

    def _gpus(self) -> tuple[GpuSample, ...]:
        if self._nvml is None or self.gpu_note:
            return ()
        nv = self._nvml
        out = []
        for i in range(nv.nvmlDeviceGetCount()):
            h = nv.nvmlDeviceGetHandleByIndex(i)
            mem = nv.nvmlDeviceGetMemoryInfo(h)
            out.append(GpuSample(
                index=i,
                name=_text(nv.nvmlDeviceGetName(h)),
                utilization_pct=float(nv.nvmlDeviceGetUtilizationRates(h).gpu),
                memory_used_mib=mem.used / 2**20,
                memory_total_mib=mem.total / 2**20,
                temperature_c=_optional(lambda h=h: nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU)),
                power_w=_optional(lambda h=h: nv.nvmlDeviceGetPowerUsage(h) / 1000.0),
            ))
        return tuple(out)


def _optional(read):
    try:
        return float(read())
    except Exception:  # a sensor this GPU does not have
        return None


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
