"""fit.py's verdicts and choice of file, and hub_files.py's quant names and split grouping:
plain functions, no Hub and no model."""

from __future__ import annotations

import pytest

from app.models.fit import Fit, FitVerdict, assess, best_file, machine_memory
from app.models.hub_files import group_gguf_files, quant_of
from app.models.hub_types import HubFile, HubFilePart

GB = 10**9


@pytest.mark.parametrize(("total", "verdict"), [(7 * GB, Fit.FITS), (9 * GB, Fit.TIGHT), (9.6 * GB, Fit.TOO_LARGE)])
def test_ram_thresholds(total, verdict):
    result = assess(int(total), 0, ram_available=10 * GB, gpu_free=None)
    assert result.fit is verdict
    assert result.reason == f"{total / GB:.1f} GB of 10.0 GB free RAM"


def test_without_nvml_the_gpu_share_counts_as_ram():
    assert assess(9 * GB, 8 * GB, ram_available=10 * GB, gpu_free=None).fit is Fit.TIGHT


def test_with_a_gpu_its_share_is_judged_against_free_gpu_memory():
    fits = assess(10 * GB, 8 * GB, ram_available=4 * GB, gpu_free=10 * GB)  # 2 GB stays in RAM
    assert fits.fit is Fit.FITS and "8.0 GB of 10.0 GB free GPU memory" in fits.reason
    tight = assess(10 * GB, 9 * GB, ram_available=16 * GB, gpu_free=10 * GB)
    assert tight.fit is Fit.TIGHT and "GPU memory" in tight.reason
    too_large = assess(10 * GB, 4 * GB, ram_available=6 * GB, gpu_free=24 * GB)  # 6 GB of 6 GB RAM
    assert too_large.fit is Fit.TOO_LARGE and "RAM" in too_large.reason


def test_machine_memory_reads_available_ram():
    ram, gpu = machine_memory()
    assert ram > 0 and (gpu is None or gpu >= 0)


def hub_file(name: str, size: int) -> HubFile:
    return HubFile("o/r", name, quant_of(name), (HubFilePart(name, size, "0" * 64),))


def test_best_file_is_the_largest_that_fits_else_the_smallest_tight_one():
    q4, q6, q8 = hub_file("m-Q4_K_M.gguf", 4), hub_file("m-Q6_K.gguf", 6), hub_file("m-Q8_0.gguf", 8)
    fits, tight, large = (FitVerdict(f, "") for f in (Fit.FITS, Fit.TIGHT, Fit.TOO_LARGE))
    files = [q4, q6, q8]
    assert best_file(files, {q4.name: fits, q6.name: fits, q8.name: tight}) is q6
    assert best_file(files, {q4.name: tight, q6.name: tight, q8.name: large}) is q4
    assert best_file(files, {q4.name: large, q6.name: large, q8.name: large}) is None
    assert best_file(files, {}) is None


@pytest.mark.parametrize(("name", "quant"), [
    ("SmolLM2-135M-Instruct.Q4_1.gguf", "Q4_1"),
    ("gemma-3-270m-q4_k_m.gguf", "Q4_K_M"),
    ("Qwen3-8B-IQ4_XS.gguf", "IQ4_XS"),
    ("Llama-3.1-8B-Instruct-Q8_0.gguf", "Q8_0"),
    ("model-bf16.gguf", "BF16"),
    ("ggml-model-f16.gguf", "F16"),
    ("Q5_K_S/big-Q5_K_S-00001-of-00003.gguf", "Q5_K_S"),
    ("gpt-oss-20b-MXFP4.gguf", "MXFP4"),
    ("model.gguf", None),
])
def test_quant_names_from_file_names(name, quant):
    assert quant_of(name) == quant


def test_grouping_keeps_model_ggufs_and_groups_complete_splits():
    parts = [HubFilePart(n, s, None) for n, s in [
        ("README.md", 1), ("mmproj-model-f16.gguf", 5), ("m-Q4_K_M.gguf", 40),
        ("Q8_0/m-Q8_0-00002-of-00002.gguf", 30), ("Q8_0/m-Q8_0-00001-of-00002.gguf", 50),
        ("F16/m-F16-00001-of-00003.gguf", 50),  # parts 2 and 3 missing: cannot be loaded
    ]]
    files = group_gguf_files("o/r", parts, "c" * 40)
    assert [(f.name, f.quant, f.size_bytes) for f in files] == [
        ("m-Q4_K_M.gguf", "Q4_K_M", 40), ("Q8_0/m-Q8_0-00001-of-00002.gguf", "Q8_0", 80)]
    assert [p.filename for p in files[1].parts] == ["Q8_0/m-Q8_0-00001-of-00002.gguf",
                                                    "Q8_0/m-Q8_0-00002-of-00002.gguf"]
    assert all(f.revision == "c" * 40 for f in files)
