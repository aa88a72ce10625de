"""A real vision model, where one is installed: SmolVLM-256M from the catalog (`chorus
models fetch smolvlm-256m`, its projector with it). Skipped elsewhere: these machines cannot
download it, and nothing downloads at test time (the other image tests run the same paths
with the tests' tiny projectors). What a real model adds: that it sees (a plain red image is
"red"), and that its tiles read as llama.cpp's own helper reads them, with its own markers.

    pytest -m vlm    # where SmolVLM-256M is installed
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from PIL import Image

from app.models import catalog as model_catalog
from app.paths import data_dir, models_dir
from inference.core.engine import Engine
from inference.params import LoadSettings
from tests.inference.core.test_engine_image_formats import assert_reads_as_llama_cpp, image_then

pytestmark = [pytest.mark.model, pytest.mark.vlm]  # a real model: not in `make test-fast`


@pytest.fixture(scope="module")
def smolvlm() -> tuple[Path, Path]:
    spec = model_catalog.CATALOG["smolvlm-256m"]
    folder = models_dir(data_dir())
    projector = model_catalog.projector_path(spec, folder)
    if not model_catalog.is_installed(spec, folder) or projector is None or not projector.is_file():
        pytest.skip("SmolVLM-256M is not installed here (chorus models fetch smolvlm-256m)")
    return model_catalog.model_path(spec, folder), projector


@pytest.fixture(scope="module")
def engine(smolvlm):
    model, projector = smolvlm
    settings = LoadSettings(model_path=model, mmproj=projector, n_ctx=4096, n_seq_max=2, reproducible=True)
    with Engine.start(settings) as started:
        yield started, settings


def png(colour: tuple[int, int, int], size: tuple[int, int] = (512, 384)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, colour).save(out, "PNG")
    return out.getvalue()


RED = png((220, 20, 20))


def test_smolvlm_sees_the_colour_of_a_plain_image(engine):
    running, _ = engine
    chat = image_then("What colour is this image? Answer with one word.", RED, n=8)
    done = running.submit(chat).result(300)
    assert done.error is None and "red" in done.text.lower()


def test_smolvlm_s_tiles_read_as_llama_cpp_reads_them(engine):
    running, settings = engine
    [embedding] = running.prepare(image_then("Describe it.", RED)).images
    assert embedding.layout and embedding.n_tokens > 64  # an overview and tiles, with their markers
    assert_reads_as_llama_cpp(running, settings, RED)


def test_a_second_question_about_the_image_computes_only_its_own_text(engine):
    running, _ = engine
    running.submit(image_then("What is this?", RED, n=2)).result(300)
    again = running.submit(image_then("Is it bright?", RED, n=2)).result(300)
    assert again.stats and again.stats.image_tokens_cached == again.stats.image_tokens > 0
