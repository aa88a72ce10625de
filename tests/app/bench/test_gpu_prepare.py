"""`make gpu-prepare` and gpu-check's set-up, without a GPU or a network: which files of the
llama-cpp-python sdist are kept, the stand-in model's layers, where the CUDA libraries are
found, a step stopped with its processes, the build's progress read off its log."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

from app.bench import gpu_model
from app.bench.gpu_build import Prepared, Workspace, build_progress, python_include, run_logged
from app.bench.gpu_sources import kept, top_folder, trim_sdist
from app.bench.gpu_toolchain import find_toolchain
from inference.gguf import read_gguf_header
from tests.support.waiting import wait_until

L = "vendor/llama.cpp/"


@pytest.mark.parametrize("path", [
    "pyproject.toml", "CMakeLists.txt", "README.md", "llama_cpp/llama_cpp.py", "llama_cpp/server/app.py",
    L + "CMakeLists.txt", L + "src/llama.cpp", L + "common/common.cpp", L + "vendor/nlohmann/json.hpp",
    L + "ggml/CMakeLists.txt", L + "ggml/src/ggml.c", L + "ggml/src/CMakeLists.txt",
    L + "ggml/src/ggml-cuda/template-instances/mmq-instance-q4_1.cu", L + "ggml/src/ggml-cpu/ggml-cpu.c",
    L + "tools/mtmd/clip.cpp", L + "tools/mtmd/models/siglip.cpp", L + "cmake/license.cmake",
])
def test_what_a_build_reads_is_kept(path: str) -> None:
    assert kept(path)


@pytest.mark.parametrize("path", [
    "tests/test_llama.py", "docs/index.md", "examples/high_level_api/x.py", "vendor/other/x.c",
    L + "ggml/src/ggml-vulkan/ggml-vulkan.cpp", L + "ggml/src/ggml-metal/ggml-metal.m",
    L + "ggml/src/ggml-hip/CMakeLists.txt", L + "models/ggml-vocab-llama-bpe.gguf", L + "tests/test-backend-ops.cpp",
    L + "tools/server/server.cpp", L + "docs/build.md", L + "tools/mtmd/test-1.jpeg", L + "tools/mtmd/tests/x.py",
    L + "gguf-py/gguf/gguf.py", L + "examples/simple/simple.cpp",
])
def test_what_no_build_reads_is_left_out(path: str) -> None:
    assert not kept(path)


def test_the_trimmed_archive_has_the_sdists_top_folder_and_only_kept_files(tmp_path: Path) -> None:
    sdist = tmp_path / "llama_cpp_python-9.9.9.tar.gz"
    files = {"pyproject.toml": b"[project]", L + "ggml/src/ggml-cuda/ggml-cuda.cu": b"//cu",
             L + "ggml/src/ggml-vulkan/v.cpp": b"//vk", "docs/a.md": b"# a"}
    with tarfile.open(sdist, "w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(f"llama_cpp_python-9.9.9/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    out = tmp_path / "trimmed.tar.xz"
    assert sorted(trim_sdist(sdist, out)) == ["pyproject.toml", L + "ggml/src/ggml-cuda/ggml-cuda.cu"]
    assert top_folder(out) == "llama_cpp_python-9.9.9"
    with tarfile.open(out) as tar:
        member = tar.extractfile("llama_cpp_python-9.9.9/" + L + "ggml/src/ggml-cuda/ggml-cuda.cu")
        assert member is not None and member.read() == b"//cu"


def test_stand_in_layers_take_the_tensors_of_the_first_ones_in_turn() -> None:
    assert gpu_model.layer_source("blk.8.attn_q.weight", 8) == "blk.0.attn_q.weight"
    assert gpu_model.layer_source("blk.29.ffn_down.weight", 8) == "blk.5.ffn_down.weight"
    assert gpu_model.layer_source("blk.7.attn_q.weight", 8) is None
    assert gpu_model.layer_source("token_embd.weight", 8) is None
    assert gpu_model.layer_source("output_norm.weight", 8) is None


@pytest.mark.model
def test_the_stand_in_is_the_real_file_with_its_later_layers_copies_of_the_first(model_path: Path,
                                                                                   tmp_path: Path) -> None:
    out = tmp_path / "stand-in.gguf"
    stand_in = gpu_model.write_stand_in(model_path, out, real_layers=8)
    assert (stand_in.n_layer, stand_in.replaced_tensors) == (30, 22 * 9)
    real, made = read_gguf_header(model_path), read_gguf_header(out)
    assert made.tensors == real.tensors and made.metadata == real.metadata
    assert out.stat().st_size == model_path.stat().st_size

    def data(path: Path, name: str) -> bytes:
        tensor = next(t for t in real.tensors if t.name == name)
        with path.open("rb") as f:
            f.seek(real.data_offset + tensor.offset)
            return f.read(tensor.nbytes)

    assert data(out, "blk.29.ffn_up.weight") == data(model_path, "blk.5.ffn_up.weight")
    assert data(out, "blk.29.ffn_up.weight") != data(model_path, "blk.29.ffn_up.weight")
    for name in ("blk.7.attn_k.weight", "token_embd.weight", "output_norm.weight"):
        assert data(out, name) == data(model_path, name)
    with pytest.raises(gpu_model.StandInError, match="30 layers"):
        gpu_model.write_stand_in(model_path, tmp_path / "all.gguf", real_layers=30)


def test_repeated_layers_cost_next_to_nothing_in_the_xz_and_come_back_whole(tmp_path: Path) -> None:
    layer = os.urandom(1 << 20)  # incompressible, as quantized weights nearly are
    original = tmp_path / "layers.bin"
    original.write_bytes(layer * 6)  # one layer and five copies, as the stand-in's
    packed = tmp_path / "layers.bin.xz"
    gpu_model.compress(original, packed)
    assert packed.stat().st_size < 1.1 * len(layer)
    back = tmp_path / "back.bin"
    gpu_model.decompress(packed, back)
    assert gpu_model.sha256(back) == gpu_model.sha256(original)


def executable(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


def touch(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"")
    return path


def test_cuda_libraries_outside_the_toolkit_are_named_to_cmake_with_their_headers(tmp_path: Path) -> None:
    toolkit = tmp_path / "cuda-13.0"
    nvcc = executable(toolkit / "bin" / "nvcc", "#!/bin/sh\necho nvcc\n")
    touch(toolkit / "lib64" / "libcudart.so")
    wrapper = executable(tmp_path / "bin" / "nvcc", f'#!/bin/sh\nexec {nvcc} "$@"\n')
    site = tmp_path / "site-packages"
    wheel = site / "nvidia" / "cu13"
    cublas = touch(wheel / "lib" / "libcublas.so.13")
    touch(wheel / "lib" / "libcublasLt.so.13")
    touch(wheel / "include" / "cublas_v2.h")
    driver = touch(tmp_path / "driver" / "libcuda.so.1")

    chain = find_toolchain(str(wrapper), search=[str(site)], driver_dirs=[str(driver.parent)])
    assert chain is not None and chain.nvcc == nvcc and chain.toolkit == toolkit and chain.missing == []
    args = chain.cmake_args()
    assert f"-DCMAKE_CUDA_COMPILER={nvcc}" in args and f"-DCUDA_cublas_LIBRARY={cublas}" in args
    assert f"-DCUDA_cuda_driver_LIBRARY={driver}" in args and f"-DCMAKE_CUDA_FLAGS=-I{wheel / 'include'}" in args
    assert not any("cudart" in a for a in args)  # the toolkit has it: CMake finds it there
    assert chain.runtime_dirs() == [str(toolkit / "lib64"), str(wheel / "lib")]


def test_a_full_toolkit_needs_no_names_and_a_missing_library_is_reported(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    toolkit = tmp_path / "cuda"
    nvcc = executable(toolkit / "bin" / "nvcc", "#!/bin/sh\n")
    for name in ("libcudart.so", "libcublas.so", "libcublasLt.so", "stubs/libcuda.so"):
        touch(toolkit / "lib64" / name)
    full = find_toolchain(str(nvcc), search=[], driver_dirs=[])
    assert full is not None and full.cmake_args() == [f"-DCMAKE_CUDA_COMPILER={nvcc}"] and full.missing == []
    (toolkit / "lib64" / "libcublas.so").unlink()
    (toolkit / "lib64" / "libcublasLt.so").unlink()
    partial = find_toolchain(str(nvcc), search=[str(tmp_path)], driver_dirs=[])
    assert partial is not None and partial.missing == ["libcublas.so", "libcublasLt.so"]
    monkeypatch.setenv("PATH", str(tmp_path / "no-bin"))
    assert find_toolchain(search=[]) is None  # no nvcc: no CUDA build


def test_a_step_past_its_time_is_stopped_with_the_processes_it_started(tmp_path: Path) -> None:
    log = tmp_path / "step.log"
    pid_file = tmp_path / "child.pid"
    started = time.monotonic()
    status = run_logged(["/bin/sh", "-c", f"sleep 60 & echo $! > {pid_file}; echo started; wait"], log, 1.0)
    assert status is None and time.monotonic() - started < 15
    child = int(pid_file.read_text())

    def ended() -> bool:  # gone, or a zombie until its new parent reaps it
        state = subprocess.run(["ps", "-o", "stat=", "-p", str(child)], capture_output=True, text=True).stdout
        return state.strip()[:1] in ("", "Z")

    wait_until(ended, "the step's child to end", timeout=10)
    text = log.read_text()
    assert "started" in text and "[stopped after 1 s]" in text
    assert run_logged([sys.executable, "-c", "raise SystemExit(3)"], log, 30) == 3


def test_the_builds_progress_is_its_last_ninja_step(tmp_path: Path) -> None:
    log = tmp_path / "build.log"
    log.write_text("-- Configuring done\n[1/336] Building C object a.o\n[212/336] Building CUDA object b.o\nerror\n")
    assert build_progress(log) == "212/336"
    log.write_text("-- Configuring done\n")
    assert build_progress(log) is None


def test_a_python_without_its_headers_compiles_the_kernel_against_the_carried_ones(tmp_path: Path) -> None:
    headers = tmp_path / "prepared" / "python3.12-include.tar.xz"
    headers.parent.mkdir()
    with tarfile.open(headers, "w:xz") as tar:
        info = tarfile.TarInfo("python3.12/Python.h")
        info.size = 4
        tar.addfile(info, io.BytesIO(b"/**/"))
    prepared = Prepared(headers.parent, {"python_headers": headers.name})
    ws = Workspace(tmp_path / "work").make()
    own = tmp_path / "own-include"
    own.mkdir()
    assert python_include(prepared, ws, own) == ws.work / "include" / "python3.12"
    assert (ws.work / "include" / "python3.12" / "Python.h").is_file()
    (own / "Python.h").write_text("")
    assert python_include(prepared, ws, own) == own  # this Python's own, when it has them
    assert python_include(Prepared(headers.parent, {}), ws, tmp_path / "none") is None
