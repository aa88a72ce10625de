"""`make gpu-check`'s set-up from the prepared folder (`make gpu-prepare`'s .gpu/), with no
network: the carried wheels, the stand-in model, llama-cpp-python built from the trimmed
sources by this machine's own toolchain (CUDA for one architecture, or the CPU), and the C
sampling kernel. Everything lands in a work folder: installs in work/site, which goes first
on PYTHONPATH (`pip install --target`), so the Python that runs the check keeps its own
packages (on the lent machine, its PyTorch environment's numpy, Jinja2, psutil and NVML).

Each step reports a dict (ok, seconds, and what went wrong in a line or a log's tail); a step
that runs past its time is stopped with all its processes (the build's compilers too)."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import sysconfig
import tarfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from app.bench import gpu_model
from app.bench.gpu_toolchain import CudaToolchain, find_toolchain

MANIFEST = "manifest.json"
KERNEL_SOURCE = Path("inference/sample/_kernel.c")
_PROGRESS = re.compile(r"\[(\d+)/(\d+)\]")


class PreparedError(RuntimeError):
    """The prepared folder is missing or incomplete: one line saying what to do."""


@dataclass(frozen=True)
class Prepared:
    folder: Path
    manifest: dict

    def path(self, relative: str) -> Path:
        return self.folder / relative

    @property
    def sources(self) -> Path:
        return self.path(self.manifest["llama_cpp_python"]["archive"])

    @property
    def wheels(self) -> list[Path]:
        return [self.path(w) for w in self.manifest["wheels"]]


def load_prepared(folder: Path) -> Prepared:
    manifest = folder / MANIFEST
    if not manifest.is_file():
        raise PreparedError(f"gpu-check: no {manifest}: run `make gpu-prepare` on a machine with network first, "
                            "then bring its folder along")
    prepared = Prepared(folder, json.loads(manifest.read_text()))
    missing = [p for p in (prepared.sources, *prepared.wheels, prepared.path(prepared.manifest["model"]["archive"]))
               if not p.is_file()]
    if missing:
        raise PreparedError(f"gpu-check: {folder} is incomplete ({missing[0].name} missing): run `make gpu-prepare` "
                            "again")
    return prepared


@dataclass(frozen=True)
class Workspace:
    work: Path
    logs_dir: Path | None = None  # default: work/logs

    @property
    def site(self) -> Path:
        return self.work / "site"

    @property
    def build(self) -> Path:
        return self.work / "build"

    @property
    def logs(self) -> Path:
        return self.logs_dir or self.work / "logs"

    def make(self) -> Workspace:
        for folder in (self.site, self.build, self.logs):
            folder.mkdir(parents=True, exist_ok=True)
        return self


# ----- running a step ---------------------------------------------------------------------


def run_logged(cmd: Sequence[str], log: Path, timeout_s: float, env: Mapping[str, str] | None = None,
               cwd: Path | None = None) -> int | None:
    """cmd with its output appended to log; its exit status, or None when it ran past
    timeout_s and was stopped, with every process it started (its own session)."""
    with log.open("a") as out:
        out.write(f"$ {shlex.join(cmd)}\n")
        out.flush()
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=dict(env) if env else None, cwd=cwd,
                                start_new_session=True)
        try:
            return proc.wait(timeout=max(timeout_s, 0.1))
        except subprocess.TimeoutExpired:
            _stop_group(proc)
            out.write(f"\n[stopped after {timeout_s:.0f} s]\n")
            return None


def _stop_group(proc: subprocess.Popen) -> None:
    for sig, wait_s in ((signal.SIGTERM, 10), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait_s)
            return
        except subprocess.TimeoutExpired:
            continue


def log_tail(log: Path, lines: int = 12) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def build_progress(log: Path) -> str | None:
    """The build's last `[done/total]` step as printed by ninja (how far a stopped build got)."""
    try:
        found = _PROGRESS.findall(log.read_text(errors="replace"))
    except OSError:
        return None
    return f"{found[-1][0]}/{found[-1][1]}" if found else None


# ----- the steps ------------------------------------------------------------------------


def install_wheels(prepared: Prepared, ws: Workspace, timeout_s: float) -> dict:
    """The carried wheels into ws.site, from the folder alone (--no-index, --no-deps)."""
    started = time.monotonic()
    log = ws.logs / "wheels.log"
    cmd = [sys.executable, "-m", "pip", "install", "--disable-pip-version-check", "--no-index", "--no-deps",
           "--no-compile", "--no-cache-dir", "--upgrade", "--target", str(ws.site),
           *map(str, prepared.wheels)]
    status = run_logged(cmd, log, timeout_s)
    return _result(started, status, log, wheels=[w.name for w in prepared.wheels])


def unpack_model(prepared: Prepared, ws: Workspace) -> tuple[Path, dict]:
    """The stand-in GGUF out of its .xz, checked against the manifest's sha256."""
    started = time.monotonic()
    model = prepared.manifest["model"]
    path = ws.work / model["file"]
    if not (path.is_file() and gpu_model.sha256(path) == model["sha256"]):
        gpu_model.decompress(prepared.path(model["archive"]), path)
        if gpu_model.sha256(path) != model["sha256"]:
            return path, {"ok": False, "seconds": _since(started), "error": f"{path.name}: sha256 differs"}
    return path, {"ok": True, "seconds": _since(started), "file": path.name, "note": model["note"]}


def build_llama(prepared: Prepared, ws: Workspace, backend: str, cuda_arch: str, timeout_s: float) -> dict:
    """llama-cpp-python from the trimmed sources into ws.site: with CUDA for cuda_arch alone
    (and llama.cpp's CPU backend, as every build has), or for the CPU only."""
    started = time.monotonic()
    log = ws.logs / "build.log"
    src = _unpack_sources(prepared.sources, ws.work / "src")
    env, toolchain = build_env(ws, backend, cuda_arch)
    if backend == "cuda" and toolchain is None:
        return {"ok": False, "seconds": _since(started), "error": "no nvcc on PATH"}
    cmd = [sys.executable, "-m", "pip", "install", "-v", "--disable-pip-version-check", "--no-index",
           "--no-deps", "--no-build-isolation", "--no-compile", "--no-cache-dir", "--upgrade",
           "--target", str(ws.site), str(src)]
    status = run_logged(cmd, log, timeout_s, env=env)
    extra: dict[str, object] = {"backend": backend, "cmake_args": env["CMAKE_ARGS"],
                                "progress": build_progress(log), "jobs": env["CMAKE_BUILD_PARALLEL_LEVEL"]}
    if toolchain is not None:
        extra["toolchain"] = toolchain.describe()
    return _result(started, status, log, **extra)


def build_env(ws: Workspace, backend: str, cuda_arch: str) -> tuple[dict[str, str], CudaToolchain | None]:
    """The build's environment: CMAKE_ARGS for the backend, every core, scikit-build-core's
    build folder kept in ws (a rerun on the same machine is incremental), the carried
    scikit-build-core first on PYTHONPATH."""
    args: list[str] = []
    toolchain = None
    if backend == "cuda":
        toolchain = find_toolchain()
        # One GPU: NCCL (multi-GPU) left out, so nothing else is looked for or linked.
        args = ["-DGGML_CUDA=on", f"-DCMAKE_CUDA_ARCHITECTURES={cuda_arch}", "-DGGML_CUDA_NCCL=off"]
        args += toolchain.cmake_args() if toolchain else []
    env = dict(os.environ, CMAKE_ARGS=shlex.join(args), CMAKE_BUILD_PARALLEL_LEVEL=str(os.cpu_count() or 1),
               SKBUILD_BUILD_DIR=str(ws.build), SKBUILD_CMAKE_VERBOSE="false", SKBUILD_BUILD_VERBOSE="false",
               PYTHONPATH=_path_list(ws.site, os.environ.get("PYTHONPATH")))
    return env, toolchain


def run_env(ws: Workspace, root: Path, toolchain: CudaToolchain | None) -> dict[str, str]:
    """The environment a bench runs in: ws.site (the built llama_cpp, the wheels) and the
    checkout on PYTHONPATH, the CUDA libraries' folders on LD_LIBRARY_PATH."""
    env = dict(os.environ, PYTHONPATH=_path_list(ws.site, str(root), os.environ.get("PYTHONPATH")),
               PYTHONUNBUFFERED="1")
    if toolchain is not None:
        env["LD_LIBRARY_PATH"] = _path_list(*toolchain.runtime_dirs(), os.environ.get("LD_LIBRARY_PATH"))
    return env


def build_kernel(prepared: Prepared, root: Path, ws: Workspace, timeout_s: float) -> dict:
    """The C sampling kernel (setuptools builds it in a normal install) beside its source, for
    this Python: without it every row is sampled by numpy, and a step's host time is not what
    an installed Chorus spends. Python's headers are this Python's own, or else the carried
    ones of another 3.12 (a distribution's Python may come without them; a patch release
    keeps the C ABI)."""
    started = time.monotonic()
    log = ws.logs / "kernel.log"
    include = python_include(prepared, ws)
    if include is None:
        return {"ok": False, "seconds": _since(started), "error": "no Python.h here and none carried"}
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    out = root / KERNEL_SOURCE.with_name("_kernel" + suffix)
    cmd = ["cc", "-O3", "-shared", "-fPIC", "-fopenmp", f"-I{include}", str(root / KERNEL_SOURCE), "-o", str(out)]
    return _result(started, run_logged(cmd, log, timeout_s), log, module=out.name, include=str(include))


def python_include(prepared: Prepared, ws: Workspace, own: Path | None = None) -> Path | None:
    """The folder with Python.h: own (default: this Python's), else the carried headers
    unpacked into ws; None without either."""
    own = own or Path(sysconfig.get_paths()["include"])
    if (own / "Python.h").is_file():
        return own
    carried = prepared.manifest.get("python_headers")
    if not carried or not prepared.path(carried).is_file():
        return None
    with tarfile.open(prepared.path(carried)) as tar:
        top = tar.getmembers()[0].name.split("/")[0]
        tar.extractall(ws.work / "include", filter="data")
    return ws.work / "include" / top


def probe_llama(ws: Workspace, root: Path, env: Mapping[str, str], want_gpu: bool) -> str | None:
    """Why the built llama_cpp cannot run the bench (one line), or None: it imports from
    ws.site and, for CUDA, offloads."""
    code = ("import sys, llama_cpp as ll; p = ll.__file__; "
            f"ok = p.startswith({str(ws.site)!r}) and ({not want_gpu} or ll.llama_supports_gpu_offload()); "
            "print(p, ll.__version__); sys.exit(0 if ok else 1)")
    try:
        done = subprocess.run([sys.executable, "-c", code], env=dict(env), cwd=root, capture_output=True, text=True,
                              timeout=120)
    except subprocess.TimeoutExpired:
        return "importing llama_cpp took over 120 s"
    if done.returncode == 0:
        return None
    said = (done.stderr.strip().splitlines() or done.stdout.strip().splitlines() or ["no output"])[-1]
    return f"the built llama_cpp does not offload or import: {said}"


def _unpack_sources(archive: Path, dest: Path) -> Path:
    """The trimmed sdist under dest (once): its one top folder."""
    with tarfile.open(archive) as tar:
        top = tar.getmembers()[0].name.split("/")[0]
        if not (dest / top / "pyproject.toml").is_file():
            tar.extractall(dest, filter="data")
    return dest / top


def _result(started: float, status: int | None, log: Path, **extra: object) -> dict:
    result: dict = {"ok": status == 0, "seconds": _since(started), **extra}
    if status is None:
        result["error"] = "ran out of time"
    elif status != 0:
        result["error"] = f"exit status {status}"
        result["log_tail"] = log_tail(log)
    return result


def _since(started: float) -> float:
    return round(time.monotonic() - started, 1)


def _path_list(*parts: str | Path | None) -> str:
    return os.pathsep.join(str(p) for p in parts if p)
