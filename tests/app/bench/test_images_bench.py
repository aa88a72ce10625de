"""`chorus bench-images` (app/bench/images.py) once on the real model with the tests' tiny
projector, small: its report's shape, and the encode counts it is about (the image encoded
once for N chats at once, N times by the encode-each reference, never in the text-only
runs' alone side; after a restart read from disk, not encoded)."""

from __future__ import annotations

import pytest

from app.bench import images
from inference import LoadSettings
from tests.support.tiny_projector import IMAGE_TOKENS, write_tiny_projector

pytestmark = pytest.mark.model


def test_the_image_bench_encodes_once_against_once_a_chat(model_path, tmp_path):
    projector = write_tiny_projector(tmp_path / "tiny-mmproj.gguf")
    options = images.ImageBenchOptions(chats=3, max_tokens=4, text_chats=2, text_tokens=48)
    report = images.run_images_bench(options, LoadSettings(model_path=model_path, n_ctx=2048, mmproj=projector))
    assert report["images_encoded"] == {"at_once": 1, "encode_each": 3}
    assert report["config"]["image_tokens"] == IMAGE_TOKENS
    assert report["config"]["prompt_tokens"] > IMAGE_TOKENS
    for side in ("at_once", "encode_each"):
        assert 0 < report[side]["ttft_p50_s"] <= report[side]["ttft_p95_s"] <= report[side]["wall_s"]
    once, each = report["at_once"]["ttft_p95_s"], report["encode_each"]["ttft_p95_s"]
    assert report["ttft_p95_ratio"] == pytest.approx(once / each)
    alone, beside = report["decode_alone"], report["decode_beside_images"]
    distinct = report["decode_beside_distinct_images"]
    assert (alone["images_encoded"], beside["images_encoded"], distinct["images_encoded"]) == (0, 1, 3)
    assert alone["tokens"] > 0 and beside["tokens"] > 0 and distinct["tokens"] > 0
    assert report["decode_ratio"] == pytest.approx(beside["tok_s"] / alone["tok_s"])
    assert report["decode_beside_text"]["images_encoded"] == 0
    assert report["decode_ratio_text"] == pytest.approx(report["decode_beside_text"]["tok_s"] / alone["tok_s"])
    assert report["decode_ratio_distinct"] == pytest.approx(distinct["tok_s"] / alone["tok_s"])
    restart = report["restart"]
    assert (restart["first_seen"]["images_encoded"], restart["first_seen"]["images_loaded"]) == (1, 0)
    assert (restart["restored"]["images_encoded"], restart["restored"]["images_loaded"]) == (0, 1)
    assert restart["restored"]["tokens_restored"] >= IMAGE_TOKENS  # the saved chat's cells, the image's among them
    assert (restart["cold"]["images_encoded"], restart["cold"]["tokens_restored"]) == (1, 0)
    text = images.render(report, as_json=False)
    assert "images encoded: at once 1, encode each 3" in text and "after a restart" in text


def test_the_image_bench_needs_a_projector(model_path):
    with pytest.raises(ValueError, match="--mmproj"):
        images.run_images_bench(images.ImageBenchOptions(), LoadSettings(model_path=model_path))
