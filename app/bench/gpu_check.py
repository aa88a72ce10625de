"""`make gpu-check`: on a machine with an NVIDIA GPU, build llama-cpp-python with CUDA into
.venv-cuda, run `chorus bench` with every layer offloaded at 1, 8, 32 and 64 chats while a
thread samples NVML, and print one JSON summary. Without a GPU: exit 2 and say why.

Everything is time-boxed so the whole check fits in TOTAL_S (10 minutes, the build
included): each step gets at most its own cap and never more than what is left. The
packages Chorus needs come from the launching virtual environment (.venv, through a .pth
file), so only llama-cpp-python is built; Chorus runs from this checkout.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from app.perf.hardware import GpuSample

TOTAL_S = 600.0
BUILD_CAP_S = 420.0
RUN_CAP_S = 90.0
CHATS = (1, 8, 32, 64)
SAMPLINGS = ("greedy", "default")
NO_GPU = 2  # the exit status without a GPU

GpuSource = Callable[[], Sequence[GpuSample]]


# ----- is there a GPU -----------------------------------------------------------------


def refusal(which: Callable[[str], str | None] = shutil.which,
            count_devices: Callable[[], int] | None = None) -> str | None:
    """Why this machine cannot run the check (one line), or None when it can."""
    if which("nvidia-smi") is None:
        return "gpu-check: no nvidia-smi on PATH: this check needs an NVIDIA GPU and its driver"
    try:
        n = (count_devices or _nvml_device_count)()
    except Exception as exc:  # no library, no driver: NVML's own words
        return f"gpu-check: NVML cannot see a GPU ({type(exc).__name__}: {exc})"
    return None if n > 0 else "gpu-check: NVML reports no NVIDIA device"


def _nvml_device_count() -> int:
    import pynvml

    pynvml.nvmlInit()
    return int(pynvml.nvmlDeviceGetCount())


def nvml_source() -> GpuSource:
    """NVML through the app's own hardware sampler (utilization, memory, power per GPU)."""
    from app.perf.hardware import HardwareSampler

    sampler = HardwareSampler()
    return lambda: sampler.sample().gpus


# ----- sampling NVML while a run goes -------------------------------------------------


@dataclass
class NvmlSampler:
    """Reads a GPU source every interval_s on a background thread until stop()."""

    source: GpuSource
    interval_s: float = 0.1
    readings: list[Sequence[GpuSample]] = field(default_factory=list)
    errors: int = 0

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="nvml-sampler", daemon=True)

    def start(self) -> NvmlSampler:
        self._thread.start()
        return self

    def stop(self) -> list[Sequence[GpuSample]]:
        self._stop.set()
        self._thread.join()
        return self.readings

    def _loop(self) -> None:
        while True:
            try:
                self.readings.append(tuple(self.source()))
            except Exception:  # one failed read is a gap, not the end of the check
                self.errors += 1
            if self._stop.wait(self.interval_s):
                return


def summarize_nvml(readings: Sequence[Sequence[GpuSample]]) -> list[dict]:
    """Per GPU: how many samples, utilization mean and max, memory peak, power mean and max."""
    by_gpu: dict[int, list[GpuSample]] = {}
    for reading in readings:
        for gpu in reading:
            by_gpu.setdefault(gpu.index, []).append(gpu)
    return [_summary(samples) for _, samples in sorted(by_gpu.items())]


def _summary(samples: list[GpuSample]) -> dict:
    util = [s.utilization_pct for s in samples]
    power = [s.power_w for s in samples if s.power_w is not None]
    return {
        "index": samples[0].index,
        "name": samples[0].name,
        "samples": len(samples),
        "utilization_pct_mean": round(sum(util) / len(util), 1),
        "utilization_pct_max": max(util),
        "memory_used_mib_max": round(max(s.memory_used_mib for s in samples), 1),
        "memory_total_mib": round(samples[0].memory_total_mib, 1),
        "power_w_mean": round(sum(power) / len(power), 1) if power else None,
        "power_w_max": round(max(power), 1) if power else None,
    }


# ----- the JSON summary -----------------------------------------------------------------


@dataclass
class RunReport:
    chats: int
    sampling: str
    seconds: float
    ok: bool
    error: str | None = None
    engine: dict | None = None  # the bench JSON's engine object
    native_decode_tok_s: float | None = None
    ratio: dict | None = None
    gpus: list[dict] = field(default_factory=list)


def run_report(chats: int, sampling: str, seconds: float, bench_stdout: str | None, error: str | None,
               readings: Sequence[Sequence[GpuSample]]) -> RunReport:
    """One run's entry: the bench's own figures when it printed its JSON, else the error."""
    report = RunReport(chats, sampling, round(seconds, 2), ok=False, error=error, gpus=summarize_nvml(readings))
    if error is None and bench_stdout is not None:
        try:
            bench = json.loads(bench_stdout)
        except ValueError:
            report.error = "the bench printed no JSON"
            return report
        report.ok = True
        report.engine = bench.get("engine")
        report.native_decode_tok_s = bench.get("native_decode_tok_s")
        report.ratio = bench.get("ratio")
    return report


def summary(build: dict, runs: Sequence[RunReport], elapsed_s: float) -> dict:
    ok = [r for r in runs if r.ok]
    return {
        "ok": bool(build.get("ok")) and len(ok) == len(runs) and bool(runs),
        "elapsed_s": round(elapsed_s, 1),
        "build": build,
        "runs": [asdict(r) for r in runs],
        "host_ms_per_step": {f"{r.chats}/{r.sampling}": (r.engine or {}).get("host_ms_per_step") for r in ok},
    }


# ----- the steps ------------------------------------------------------------------------


class Deadline:
    def __init__(self, total_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._end = clock() + total_s

    def cap(self, step_s: float) -> float:
        """Seconds a step may take: its own cap, never past the deadline."""
        return max(0.0, min(step_s, self._end - self._clock()))


def build_cuda_venv(root: Path, deadline: Deadline, source: str | None) -> tuple[Path, dict]:
    """.venv-cuda with a CUDA llama-cpp-python (kept when already there) and the launching
    venv's packages behind it."""
    venv = root / ".venv-cuda"
    python = venv / "bin" / "python"
    started = time.monotonic()
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=deadline.cap(60))
    _share_packages(python)
    if _has_cuda_llama(python):
        return python, {"ok": True, "cached": True, "seconds": round(time.monotonic() - started, 1)}
    env = dict(os.environ, CMAKE_ARGS="-DGGML_CUDA=on -DCMAKE_CUDA_ARCHITECTURES=native",
               CMAKE_BUILD_PARALLEL_LEVEL=str(os.cpu_count() or 1), FORCE_CMAKE="1")
    spec = source or f"llama-cpp-python=={_llama_version()}"
    cmd = [str(python), "-m", "pip", "install", "--disable-pip-version-check", "--no-deps",
           "--no-binary", "llama-cpp-python", "--force-reinstall", spec]
    try:
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=deadline.cap(BUILD_CAP_S))
    except subprocess.TimeoutExpired:
        return python, _build_failed(started, "the CUDA build ran out of time")
    if done.returncode != 0 or not _has_cuda_llama(python):
        return python, _build_failed(started, (done.stderr or done.stdout).strip()[-400:] or "no GPU offload")
    return python, {"ok": True, "cached": False, "seconds": round(time.monotonic() - started, 1), "spec": spec}


def _build_failed(started: float, why: str) -> dict:
    return {"ok": False, "cached": False, "seconds": round(time.monotonic() - started, 1), "error": why}


def _share_packages(python: Path) -> None:
    """Make the launching venv's site-packages visible behind .venv-cuda's own (a .pth
    line runs; addsitedir appends, so the CUDA llama_cpp in .venv-cuda wins)."""
    if sys.prefix == sys.base_prefix:
        return
    purelib = sysconfig.get_paths()["purelib"]
    out = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         check=True, capture_output=True, text=True, timeout=30)
    pth = Path(out.stdout.strip()) / "chorus-shared-venv.pth"
    pth.write_text(f"import site; site.addsitedir({purelib!r})\n")


def _has_cuda_llama(python: Path) -> bool:
    probe = ("import sys, llama_cpp as ll; "
             "sys.exit(0 if ll.__file__.startswith(sys.prefix) and ll.llama_supports_gpu_offload() else 1)")
    return subprocess.run([str(python), "-c", probe], capture_output=True, timeout=60).returncode == 0


def _llama_version() -> str:
    import llama_cpp

    return str(llama_cpp.__version__)


def bench_command(python: Path, chats: int, sampling: str, model: str | None) -> list[str]:
    cmd = [str(python), "-m", "app", "bench", "--chats", str(chats), "--max-tokens", "64",
           "--system-tokens", "1000", "--gpu-layers", "999", "--sampling", sampling,
           "--skip-baseline", "--json"]
    if sampling == "greedy":
        cmd.append("--native")  # llama.cpp's raw batched decode, the ceiling
    return cmd + (["--model", model] if model else [])


def run_bench(root: Path, cmd: list[str], chats: int, sampling: str, deadline: Deadline,
              source: GpuSource) -> RunReport:
    budget = deadline.cap(RUN_CAP_S)
    if budget < 5:
        return run_report(chats, sampling, 0.0, None, "skipped: the 10-minute budget is spent", [])
    env = dict(os.environ, PYTHONPATH=str(root))
    sampler = NvmlSampler(source).start()
    started = time.monotonic()
    try:
        done = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=budget)
        error = None if done.returncode == 0 else (done.stderr.strip().splitlines() or ["failed"])[-1]
        stdout = done.stdout
    except subprocess.TimeoutExpired:
        error, stdout = f"timed out after {budget:.0f} s", None
    finally:
        readings = sampler.stop()
    return run_report(chats, sampling, time.monotonic() - started, stdout, error, readings)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gpu-check", description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="catalog name or GGUF path (default: the bench's)")
    parser.add_argument("--source", default=None,
                        help="llama-cpp-python to build: a path or pip spec (default: this venv's version)")
    args = parser.parse_args(argv)
    why = refusal()
    if why is not None:
        print(why, file=sys.stderr)
        return NO_GPU
    root = Path(__file__).resolve().parents[2]
    deadline = Deadline(TOTAL_S)
    started = time.monotonic()
    python, build = build_cuda_venv(root, deadline, args.source)
    runs: list[RunReport] = []
    if build["ok"]:
        source = nvml_source()
        for chats in CHATS:
            for sampling in SAMPLINGS:
                cmd = bench_command(python, chats, sampling, args.model)
                runs.append(run_bench(root, cmd, chats, sampling, deadline, source))
    print(json.dumps(summary(build, runs, time.monotonic() - started), indent=2))
    return 0 if build["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
