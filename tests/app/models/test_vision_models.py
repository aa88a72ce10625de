"""Vision models without a Hub: which projector goes with which model file (the rule in
app/models/hub_files.py), the fit and capacity counting the projector, and the catalog's
vision entry."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from app.models import capacity
from app.models import catalog as mc
from app.models.fit import Fit, assess_file
from app.models.hub_files import choose_projector, group_gguf_files, is_projector, projector_reason
from app.models.hub_types import HubFile, HubFilePart
from inference.gguf import MemoryEstimate

MB = 1_000_000


def _files(*named: tuple[str, int]) -> list[HubFile]:
    return group_gguf_files("o/vlm", [HubFilePart(name, size, "a" * 64) for name, size in named], "c" * 40)


def test_a_projector_of_the_model_s_own_quant_is_chosen() -> None:
    files = _files(("SmolVLM-Q8_0.gguf", 175 * MB), ("SmolVLM-f16.gguf", 330 * MB),
                   ("mmproj-SmolVLM-Q8_0.gguf", 104 * MB), ("mmproj-SmolVLM-f16.gguf", 190 * MB))
    assert [f.name for f in files] == ["SmolVLM-Q8_0.gguf", "SmolVLM-f16.gguf"]  # no mmproj among the models
    chosen = {f.name: f.projector.name for f in files if f.projector is not None}
    assert chosen == {"SmolVLM-Q8_0.gguf": "mmproj-SmolVLM-Q8_0.gguf", "SmolVLM-f16.gguf": "mmproj-SmolVLM-f16.gguf"}
    assert projector_reason(files[0]) == "the model's own quant, Q8_0"


def test_without_its_quant_f16_then_the_smallest() -> None:
    q4 = _files(("m-Q4_K_M.gguf", 2000 * MB), ("mmproj-m-Q8_0.gguf", 600 * MB), ("mmproj-m-F16.gguf", 850 * MB))[0]
    assert q4.projector is not None and q4.projector.name == "mmproj-m-F16.gguf"
    assert projector_reason(q4).startswith("F16")
    odd = _files(("m-Q4_K_M.gguf", 2000 * MB), ("mmproj-m-Q8_0.gguf", 600 * MB), ("mmproj-m-Q6_K.gguf", 500 * MB))[0]
    assert odd.projector is not None and odd.projector.name == "mmproj-m-Q6_K.gguf"
    assert projector_reason(odd).startswith("the smallest")


def test_a_model_without_projectors_has_none() -> None:
    (plain,) = _files(("m-Q4_K_M.gguf", 2000 * MB))
    assert plain.projector is None and plain.download_bytes == plain.size_bytes
    assert choose_projector(plain, []) is None


def test_the_projector_naming_the_model_wins_among_equals() -> None:
    files = _files(("gemma-3-4b-it-Q4_K_M.gguf", 2500 * MB), ("mmproj-other-f16.gguf", 300 * MB),
                   ("mmproj-gemma-3-4b-it-f16.gguf", 850 * MB))
    assert files[0].projector is not None and files[0].projector.name == "mmproj-gemma-3-4b-it-f16.gguf"
    assert files[0].download_bytes == 3350 * MB


def test_is_projector() -> None:
    assert is_projector("mmproj-SmolVLM-256M-Instruct-Q8_0.gguf") and is_projector("sub/mmproj-model-f16.gguf")
    assert not is_projector("SmolVLM-256M-Instruct-Q8_0.gguf") and not is_projector("mmproj-notes.txt")


def test_the_fit_counts_the_projector() -> None:
    (vlm,) = _files(("m-Q8_0.gguf", 500 * MB), ("mmproj-m-Q8_0.gguf", 400 * MB))
    alone = MemoryEstimate(n_layer=30, n_ctx=2048, kv_type="f16", gpu_layers=0, weights_bytes=500 * MB,
                           kv_bytes=100 * MB, weights_gpu_bytes=0, kv_gpu_bytes=0)
    assert assess_file(vlm, alone, 1000 * MB, None).fit is Fit.TOO_LARGE  # 1.0 GB of 1.0 GB: projector counted
    assert "1.0 GB of 1.0 GB free RAM" in assess_file(vlm, alone, 1000 * MB, None).reason
    without = HubFile(vlm.repo_id, vlm.name, vlm.quant, vlm.parts, vlm.revision)
    assert assess_file(without, alone, 1000 * MB, None).fit is Fit.FITS  # 600 MB of 1.0 GB
    assert assess_file(vlm, None, 2000 * MB, None).reason.startswith("0.9 GB of")  # no header: files alone


@pytest.mark.model  # reads the real model's header (nothing is loaded)
def test_capacity_counts_the_projector(model_path: Path, tmp_path: Path) -> None:
    from inference.gguf import read_gguf_header

    header = read_gguf_header(model_path)
    ram = 1_000 * MB
    (plain,) = capacity.plan(header, ram, None, False, contexts=(2048,), kv_types=("f16",))
    (vision,) = capacity.plan(header, ram, None, False, contexts=(2048,), kv_types=("f16",),
                              projector_bytes=200 * MB)
    assert vision.weights_bytes == plain.weights_bytes + 200 * MB and vision.chats < plain.chats
    projector = tmp_path / "mmproj-x-f16.gguf"
    projector.write_bytes(b"x" * 1234)
    assert capacity.projector_size(projector) == 1234 and capacity.projector_size(None) == 0
    assert capacity.projector_size(tmp_path / "gone.gguf") == 0
    # What a model pool counts for a CPU load: the projector too.
    from inference import LoadSettings

    cpu = LoadSettings(model_path=model_path, n_ctx=2048, n_gpu_layers=0)
    with_projector = capacity.load_bytes(replace(cpu, mmproj=projector), header, gpu_supported=False)
    assert with_projector == capacity.load_bytes(cpu, header, gpu_supported=False) + 1234


def test_the_catalog_s_vision_model_lives_with_its_projector(tmp_path: Path) -> None:
    spec = mc.CATALOG["smolvlm-256m"]
    folder = tmp_path / "ggml-org" / "SmolVLM-256M-Instruct-GGUF"
    assert mc.model_path(spec, tmp_path) == folder / "SmolVLM-256M-Instruct-Q8_0.gguf"
    assert mc.projector_path(spec, tmp_path) == folder / "mmproj-SmolVLM-256M-Instruct-Q8_0.gguf"
    assert not mc.is_installed(spec, tmp_path)
    folder.mkdir(parents=True)
    mc.model_path(spec, tmp_path).write_bytes(b"model")
    assert not mc.is_installed(spec, tmp_path)  # not without its projector
    mc.projector_path(spec, tmp_path).write_bytes(b"projector")  # type: ignore[union-attr]
    assert mc.is_installed(spec, tmp_path)
    assert mc.projector_path(mc.CATALOG[mc.DEFAULT_MODEL], tmp_path) is None


def test_every_hub_entry_of_the_catalog_is_a_vision_model_with_a_projector_file() -> None:
    hub = [spec for spec in mc.CATALOG.values() if spec.hub is not None]
    assert {spec.key for spec in hub} >= {"smolvlm-256m", "smolvlm-500m", "qwen2.5-vl-3b", "gemma3-4b-it"}
    for spec in hub:
        assert spec.hub is not None and spec.hub.mmproj is not None and spec.sees_images, spec.key
        assert is_projector(spec.hub.mmproj) and not is_projector(spec.filename), spec.key
        assert spec.filename.endswith(".gguf") and spec.hub.repo_id.startswith("ggml-org/"), spec.key
