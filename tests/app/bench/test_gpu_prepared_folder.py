"""The folder `make gpu-prepare` made (.gpu/), where there is one (skipped otherwise): it and
the checkout travel to the lent GPU machine within 64 MiB, each file the manifest names is
there, the wheels install on its Python 3.12 on x86-64 Linux, the sources hold the CUDA
backend and no other, and every name is one the device tool carries."""

from __future__ import annotations

import json
import re
import tarfile
from pathlib import Path

import pytest

from app.bench.gpu_prepare import CARRY_LIMIT, FOLDER, folder_bytes, travelling_bytes
from tests.support.paths import ROOT

PREPARED = ROOT / FOLDER
MANIFEST = PREPARED / "manifest.json"
pytestmark = pytest.mark.skipif(not MANIFEST.is_file(), reason="no .gpu/ here: make gpu-prepare makes it")
# Names the device tool brings back and carries: letters, digits, '.', '_' and '-'.
CARRIED_NAME = re.compile(r"^[A-Za-z0-9._-]+$")
CP312_LINUX = re.compile(r"-(py3-none-any|cp312-cp312-manylinux[_0-9a-z.]*x86_64"
                         r"|cp3\d+-abi3-manylinux[_0-9a-z.]*x86_64)\.whl$")


@pytest.fixture(scope="module")
def manifest() -> dict:
    return json.loads(MANIFEST.read_text())


def test_the_folder_and_the_checkout_travel_within_64_mib() -> None:
    total = folder_bytes(PREPARED) + travelling_bytes(ROOT)
    assert total <= CARRY_LIMIT, f"{total / 2**20:.1f} MiB travel: over {CARRY_LIMIT / 2**20:.0f} MiB"


def test_every_file_the_manifest_names_is_there_with_its_size(manifest: dict) -> None:
    sources = PREPARED / manifest["llama_cpp_python"]["archive"]
    model = PREPARED / manifest["model"]["archive"]
    assert sources.stat().st_size == manifest["llama_cpp_python"]["bytes"]
    assert model.stat().st_size == manifest["model"]["xz_bytes"]
    assert all((PREPARED / w).is_file() for w in manifest["wheels"])
    if manifest.get("python_headers"):  # optional: from a Python 3.12 of the preparing machine
        with tarfile.open(PREPARED / manifest["python_headers"]) as tar:
            assert "python3.12/Python.h" in tar.getnames()
    assert manifest["bytes"] == folder_bytes(PREPARED) - MANIFEST.stat().st_size


def test_the_wheels_are_the_ones_the_machine_lacks_and_install_on_its_python(manifest: dict) -> None:
    names = [Path(w).name for w in manifest["wheels"]]
    assert sorted(n.split("-")[0] for n in names) == ["diskcache", "llguidance", "scikit_build_core"]
    assert all(CP312_LINUX.search(n) for n in names), names


def test_the_sources_hold_llama_cpp_python_with_ggml_cuda_and_no_other_backend(manifest: dict) -> None:
    with tarfile.open(PREPARED / manifest["llama_cpp_python"]["archive"]) as tar:
        names = tar.getnames()
    top = f"llama_cpp_python-{manifest['llama_cpp_python']['version']}/"
    assert all(n.startswith(top) for n in names)
    ggml = top + "vendor/llama.cpp/ggml/src/"
    assert top + "pyproject.toml" in names and ggml + "ggml-cuda/CMakeLists.txt" in names
    backends = {n[len(ggml):].split("/")[0] for n in names if n.startswith(ggml) and "/" in n[len(ggml):]}
    assert backends == {"ggml-cpu", "ggml-cuda"}


def test_every_path_has_a_name_the_device_tool_carries_and_none_is_a_link() -> None:
    for path in PREPARED.rglob("*"):
        assert CARRIED_NAME.match(path.name), path
        assert not path.is_symlink(), path
