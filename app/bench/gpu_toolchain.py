"""Where this machine's CUDA pieces are, for CMake: nvcc's toolkit, and any library a CUDA
build of llama.cpp links (cudart, cuBLAS, cuBLASLt, the driver) that the toolkit folder does
not hold. An image can carry nvcc alone and cuBLAS as PyTorch's wheels (nvidia/cu13/lib,
nvidia/cu13/include in site-packages), and the driver in its own mount; CMake's
FindCUDAToolkit looks only beside nvcc, so each such library is named to it by path
(CUDA_<name>_LIBRARY) and its headers' folder added to nvcc's include path."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

# CMake's name for each library (FindCUDAToolkit's CUDA_<name>_LIBRARY) and its file name.
LIBRARIES = {"cudart": "libcudart.so", "cublas": "libcublas.so", "cublasLt": "libcublasLt.so",
             "cuda_driver": "libcuda.so"}
HEADERS = {"cublas": "cublas_v2.h"}
_TOOLKIT_LIB_DIRS = ("lib64", "lib", "targets/x86_64-linux/lib", "lib64/stubs", "targets/x86_64-linux/lib/stubs")
_TOOLKIT_INCLUDE_DIRS = ("include", "targets/x86_64-linux/include")
# Where a driver's libcuda.so.1 is found outside the toolkit (a container's driver mount).
DRIVER_DIRS = ("/usr/local/nvidia/lib64", "/usr/local/nvidia/lib", "/usr/lib/x86_64-linux-gnu", "/usr/lib64",
               "/usr/lib/wsl/lib")


@dataclass
class CudaToolchain:
    nvcc: Path
    toolkit: Path
    libraries: dict[str, Path] = field(default_factory=dict)  # found outside the toolkit
    include_dirs: list[Path] = field(default_factory=list)  # likewise
    missing: list[str] = field(default_factory=list)  # found nowhere: the build will say so

    def cmake_args(self) -> list[str]:
        args = [f"-DCMAKE_CUDA_COMPILER={self.nvcc}"]
        args += [f"-DCUDA_{name}_LIBRARY={path}" for name, path in self.libraries.items()]
        if self.include_dirs:
            args.append("-DCMAKE_CUDA_FLAGS=" + " ".join(f"-I{d}" for d in self.include_dirs))
        return args

    def runtime_dirs(self) -> list[str]:
        """Folders the built libraries load from at run time (LD_LIBRARY_PATH)."""
        dirs = [str(self.toolkit / d) for d in ("lib64", "targets/x86_64-linux/lib") if (self.toolkit / d).is_dir()]
        dirs += [str(p.parent) for name, p in self.libraries.items() if name != "cuda_driver"]
        return list(dict.fromkeys(dirs))

    def describe(self) -> dict:
        return {"nvcc": str(self.nvcc), "toolkit": str(self.toolkit),
                "outside_toolkit": {k: str(v) for k, v in self.libraries.items()},
                "include_dirs": [str(d) for d in self.include_dirs], "missing": self.missing}


def find_toolchain(nvcc: str | None = None, search: Sequence[str] | None = None,
                   driver_dirs: Sequence[str] = DRIVER_DIRS) -> CudaToolchain | None:
    """The toolkit of nvcc (or the one on PATH) and whatever it lacks, looked for in the
    search folders (default: this Python's sys.path, where pip puts nvidia/*) and, for
    the driver, in driver_dirs and ldconfig's cache. None without nvcc."""
    found = nvcc or shutil.which("nvcc")
    if found is None:
        return None
    real = Path(_resolve_nvcc(found))
    chain = CudaToolchain(nvcc=real, toolkit=real.parent.parent)
    roots = [Path(p) for p in (sys.path if search is None else search) if p and Path(p).is_dir()]
    for name, filename in LIBRARIES.items():
        if _in_toolkit(chain.toolkit, _TOOLKIT_LIB_DIRS, filename + "*"):
            continue
        dirs = list(driver_dirs) if name == "cuda_driver" else []
        path = _find_library(filename, roots, dirs) or (_ldconfig(filename) if name == "cuda_driver" else None)
        if path is None:
            chain.missing.append(filename)
        else:
            chain.libraries[name] = path
    for name, header in HEADERS.items():
        if name in chain.libraries and not _in_toolkit(chain.toolkit, _TOOLKIT_INCLUDE_DIRS, header):
            include = _beside(chain.libraries[name], header)
            if include is not None:
                chain.include_dirs.append(include)
    return chain


def _resolve_nvcc(nvcc: str) -> str:
    """nvcc's own path: a wrapper script on PATH (`exec /usr/local/cuda-13.0/bin/nvcc "$@"`)
    or a link is followed to the toolkit's binary."""
    path = os.path.realpath(nvcc)
    try:
        with open(path, "rb") as f:
            head = f.read(512)
    except OSError:
        return path
    if head.startswith(b"#!"):
        for word in head.decode(errors="replace").split():
            word = word.strip("\"'")
            if word.endswith("/nvcc") and os.path.isfile(word) and os.path.realpath(word) != path:
                return os.path.realpath(word)
    return path


def _in_toolkit(toolkit: Path, subdirs: Sequence[str], pattern: str) -> bool:
    return any(glob.glob(str(toolkit / d / pattern)) for d in subdirs)


def _find_library(filename: str, roots: Sequence[Path], dirs: Sequence[str]) -> Path | None:
    """filename (or a versioned one: libcublas.so.13) in nvidia/*/lib under a root, or in
    one of dirs; the unversioned name first, then the newest version."""
    candidates: list[str] = []
    for root in roots:
        candidates += glob.glob(str(root / "nvidia" / "*" / "lib" / (filename + "*")))
    for d in dirs:
        candidates += glob.glob(os.path.join(d, filename + "*"))
    exact = [c for c in candidates if c.endswith(filename)]
    versioned = sorted((c for c in candidates if c not in exact), key=len)
    picked = exact or versioned
    return Path(picked[0]) if picked else None


def _ldconfig(filename: str) -> Path | None:
    try:
        out = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    for line in out.splitlines():
        if line.strip().startswith(filename) and "=>" in line and "x86-64" in line:
            return Path(line.split("=>", 1)[1].strip())
    return None


def _beside(library: Path, header: str) -> Path | None:
    """The include folder that goes with a library from a wheel (nvidia/cu13/lib -> include)."""
    include = library.parent.parent / "include"
    return include if (include / header).is_file() else None
