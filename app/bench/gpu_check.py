"""`make gpu-check`: on the lent GPU machine (no network), from the folder `make gpu-prepare`
made (.gpu/): build llama-cpp-python with CUDA for that GPU alone with the machine's own
toolchain, run the engine bench (app/bench/engine_main.py: `chorus bench --json
--skip-baseline`'s run) with every layer offloaded at 1, 8, 32 and 64 chats while a thread
samples NVML, and print one JSON summary (also written to --out with every log, after each
step, so a check stopped from outside still leaves what it did). Without a GPU: exit 2 and
say why. `--backend cpu` runs the same from the same folder on a machine without a GPU (the
dry run: docs/packaging.md).

Everything is time-boxed so the whole check fits in --total-s (9.5 minutes by default, the
build included, inside the device tool's 10-minute command): each step gets at most its own
cap and never more than what is left; runs the time did not reach say "skipped". Greedy runs
at every size come first: the 8-chat against 1-chat ratio is what the check is for.
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from app.bench import gpu_build
from app.perf.hardware import GpuSample

TOTAL_S = 570.0
BUILD_CAP_S = 360.0
SETUP_CAP_S = 60.0
RUN_CAP_S = 90.0
CUDA_ARCH = "90"  # the H200 (Hopper, compute capability 9.0)
CLAIM_CHATS, CLAIM_RATIO = 8, 3.5  # the seed's claim: 8 chats give >= 3.5x one chat's throughput
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


def scaling(runs: Sequence[RunReport]) -> dict:
    """Per sampling, each size's engine throughput over one chat's: generation (every token
    over the wall time, first tokens included) and decode-only rates."""
    out: dict = {}
    for sampling in dict.fromkeys(r.sampling for r in runs):
        by_chats = {r.chats: r.engine for r in runs if r.ok and r.sampling == sampling and r.engine}
        one = by_chats.get(1)
        if not one:
            continue
        out[sampling] = {str(n): {key: _ratio(eng.get(key), one.get(key)) for key in ("gen_tok_s", "decode_tok_s")}
                         for n, eng in sorted(by_chats.items()) if n != 1}
    return out


def _ratio(a: object, b: object) -> float | None:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b > 0:
        return round(a / b, 2)
    return None


def claim(scale: dict) -> dict:
    """The seed's claim (greedy, CLAIM_CHATS chats >= CLAIM_RATIO x one chat), on both rates."""
    at = scale.get("greedy", {}).get(str(CLAIM_CHATS), {})
    return {"chats": CLAIM_CHATS, "at_least": CLAIM_RATIO,
            **{key: {"ratio": r, "holds": None if r is None else r >= CLAIM_RATIO} for key, r in at.items()}}


def summary(build: dict, runs: Sequence[RunReport], elapsed_s: float, setup: dict | None = None) -> dict:
    ok = [r for r in runs if r.ok]
    scale = scaling(runs)
    return {
        "ok": bool(build.get("ok")) and len(ok) == len(runs) and bool(runs),
        "elapsed_s": round(elapsed_s, 1),
        "setup": setup or {},
        "build": build,
        "runs": [asdict(r) for r in runs],
        "host_ms_per_step": {f"{r.chats}/{r.sampling}": (r.engine or {}).get("host_ms_per_step") for r in ok},
        "scaling": scale,
        "claim": claim(scale),
    }


# ----- the steps ------------------------------------------------------------------------


class Deadline:
    def __init__(self, total_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._end = clock() + total_s

    def cap(self, step_s: float) -> float:
        """Seconds a step may take: its own cap, never past the deadline."""
        return max(0.0, min(step_s, self._end - self._clock()))


def bench_command(python: Path, chats: int, sampling: str, model: Path, max_tokens: int = 64,
                  system_tokens: int = 1000, gpu_layers: int = 999) -> list[str]:
    cmd = [str(python), "-m", "app.bench.engine_main", "--model", str(model), "--chats", str(chats),
           "--max-tokens", str(max_tokens), "--system-tokens", str(system_tokens), "--gpu-layers", str(gpu_layers),
           "--sampling", sampling]
    if sampling == "greedy":
        cmd.append("--native")  # llama.cpp's raw batched decode, the ceiling
    return cmd


def run_bench(root: Path, cmd: list[str], chats: int, sampling: str, deadline: Deadline,
              source: GpuSource | None, env: dict[str, str], log: Path, cap_s: float = RUN_CAP_S) -> RunReport:
    budget = deadline.cap(cap_s)
    if budget < 5:
        return run_report(chats, sampling, 0.0, None, "skipped: the check's time is spent", [])
    sampler = NvmlSampler(source).start() if source is not None else None
    started = time.monotonic()
    try:
        done = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=budget)
        error = None if done.returncode == 0 else (done.stderr.strip().splitlines() or ["failed"])[-1]
        stdout, stderr = done.stdout, done.stderr
    except subprocess.TimeoutExpired as exc:
        error, stdout = f"timed out after {budget:.0f} s", None
        stderr = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else (exc.stderr or "")
    finally:
        readings = sampler.stop() if sampler is not None else []
    with log.open("a") as out:
        out.write(f"===== {chats} chats, {sampling}: {' '.join(cmd)}\n{stderr}\n")
    return run_report(chats, sampling, time.monotonic() - started, stdout, error, readings)


@dataclass
class CheckOptions:
    backend: str = "cuda"
    cuda_arch: str = CUDA_ARCH
    chats: tuple[int, ...] = CHATS
    samplings: tuple[str, ...] = SAMPLINGS
    max_tokens: int = 64
    system_tokens: int = 1000
    total_s: float = TOTAL_S
    build_s: float = BUILD_CAP_S
    run_s: float = RUN_CAP_S


@dataclass
class Check:
    """One check's state, written out (summary.json) after every step."""

    root: Path
    prepared: gpu_build.Prepared
    ws: gpu_build.Workspace
    options: CheckOptions
    out: Path | None
    started: float = field(default_factory=time.monotonic)
    setup: dict = field(default_factory=dict)
    build: dict = field(default_factory=dict)
    runs: list[RunReport] = field(default_factory=list)

    def report(self) -> dict:
        result = summary(self.build, self.runs, time.monotonic() - self.started, self.setup)
        if self.out is not None:
            (self.out / "summary.json").write_text(json.dumps(result, indent=2) + "\n")
        return result


def run_check(check: Check, source: GpuSource | None) -> dict:
    options, ws = check.options, check.ws
    deadline = Deadline(options.total_s)
    check.setup = {"python": platform.python_version(), "executable": sys.executable,
                   "prepared": {k: check.prepared.manifest.get(k) for k in ("llama_cpp_python", "wheels", "bytes")},
                   "options": asdict(options)}
    check.setup["wheels"] = gpu_build.install_wheels(check.prepared, ws, deadline.cap(SETUP_CAP_S))
    model, check.setup["model"] = gpu_build.unpack_model(check.prepared, ws)
    check.setup["kernel"] = gpu_build.build_kernel(check.prepared, check.root, ws, deadline.cap(SETUP_CAP_S))
    check.report()
    check.build = gpu_build.build_llama(check.prepared, ws, options.backend, options.cuda_arch,
                                        deadline.cap(options.build_s))
    check.report()
    if not (check.build["ok"] and check.setup["wheels"]["ok"] and check.setup["model"]["ok"]):
        return check.report()
    toolchain = gpu_build.find_toolchain() if options.backend == "cuda" else None
    env = gpu_build.run_env(ws, check.root, toolchain)
    why = gpu_build.probe_llama(ws, check.root, env, want_gpu=options.backend == "cuda")
    if why is not None:
        check.build.update(ok=False, error=why)
        return check.report()
    log = ws.logs / "bench.log"
    layers = 999 if options.backend == "cuda" else 0
    for sampling in options.samplings:
        for chats in options.chats:
            cmd = bench_command(Path(sys.executable), chats, sampling, model, options.max_tokens,
                                options.system_tokens, layers)
            check.runs.append(run_bench(check.root, cmd, chats, sampling, deadline, source, env, log, options.run_s))
            check.report()
    return check.report()


def parse(argv: list[str] | None, root: Path) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="gpu-check", description=__doc__.splitlines()[0])
    parser.add_argument("--prepared", type=Path, default=root / ".gpu", help="make gpu-prepare's folder")
    parser.add_argument("--work", type=Path, default=root / ".gpu-work", help="builds, the model, the installs")
    parser.add_argument("--out", type=Path, default=None, help="folder for summary.json and the logs")
    parser.add_argument("--backend", choices=("cuda", "cpu"), default="cuda",
                        help="cpu: the same steps on a machine without a GPU (the dry run)")
    parser.add_argument("--cuda-arch", default=CUDA_ARCH, help="CMAKE_CUDA_ARCHITECTURES (default: 90, the H200)")
    parser.add_argument("--chats", type=int, nargs="+", default=list(CHATS))
    parser.add_argument("--sampling", choices=SAMPLINGS, nargs="+", default=list(SAMPLINGS))
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--system-tokens", type=int, default=1000)
    parser.add_argument("--total-s", type=float, default=TOTAL_S, help="the whole check's time")
    parser.add_argument("--build-s", type=float, default=BUILD_CAP_S, help="the build's share of it at most")
    parser.add_argument("--run-s", type=float, default=RUN_CAP_S, help="each bench run's at most")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    root = Path(__file__).resolve().parents[2]
    args = parse(argv, root)
    if args.backend == "cuda" and (why := refusal()) is not None:
        print(why, file=sys.stderr)
        return NO_GPU
    try:
        prepared = gpu_build.load_prepared(args.prepared)
    except gpu_build.PreparedError as exc:
        print(exc, file=sys.stderr)
        return NO_GPU + 1
    out = args.out
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    ws = gpu_build.Workspace(args.work, logs_dir=out).make()
    options = CheckOptions(args.backend, args.cuda_arch, tuple(args.chats), tuple(args.sampling), args.max_tokens,
                           args.system_tokens, args.total_s, args.build_s, args.run_s)
    check = Check(root, prepared, ws, options, out)
    result = run_check(check, nvml_source() if args.backend == "cuda" else None)
    print(json.dumps(result, indent=2))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
