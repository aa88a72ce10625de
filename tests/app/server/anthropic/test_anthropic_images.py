"""/v1/messages with Anthropic's image blocks (base64 sources), through the official
`anthropic` client, on the real default model with the tests' tiny projector: seen, and
every refusal a 400 in Anthropic's error shape."""

from __future__ import annotations

import base64
import re

import anthropic
import pytest

from tests.inference.core.test_engine_images import BLUE, RED
from tests.inference.worker.test_image_file import bomb_png
from tests.support.served import anthropic_client, serving
from tests.support.tiny_projector import IMAGE_TOKENS, write_tiny_projector

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def projector(tmp_path_factory):
    return write_tiny_projector(tmp_path_factory.mktemp("mmproj") / "tiny-mmproj.gguf")


def image(data: bytes, media: str = "image/png") -> dict:
    return {"type": "image", "source": {"type": "base64", "media_type": media,
                                        "data": base64.b64encode(data).decode()}}


def looking_at(*blocks: dict, text: str = "What is in this picture?") -> dict:
    content = [*blocks, {"type": "text", "text": text}]
    return dict(model="smollm2", max_tokens=8, messages=[{"role": "user", "content": content}],
                extra_body={"temperature": 0})


def refused(api: anthropic.Anthropic, ask: dict) -> dict:
    with pytest.raises(anthropic.BadRequestError) as err:
        api.messages.create(**ask)
    assert err.value.status_code == 400 and err.value.body["type"] == "error"
    assert err.value.body["error"]["type"] == "invalid_request_error"
    return err.value.body["error"]


def test_an_image_block_is_seen_and_bad_ones_are_400s(make_engine, projector):
    engine = make_engine(n_ctx=2048, n_seq_max=4, reproducible=True, mmproj=projector)
    with serving(engine) as server:
        api = anthropic_client(server, timeout=180)
        seen = api.messages.create(**looking_at(image(RED)))
        blind = api.messages.create(**looking_at())
        assert seen.usage.input_tokens == blind.usage.input_tokens + IMAGE_TOKENS
        assert api.messages.count_tokens(model="m", messages=looking_at(image(RED))["messages"]).input_tokens \
            == seen.usage.input_tokens
        assert api.messages.create(**looking_at(image(BLUE))).content[0].text != seen.content[0].text
        assert engine.metrics(fresh=True).images_encoded == 2  # RED once, for the call and the count
        url = {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.png"}}
        for ask, words in [
            (looking_at(url), "messages.0.content.0.source .*fetches no remote images"),
            (looking_at(image(b"<svg/>", "image/svg+xml")), r"media_type has the media type image/svg\+xml"),
            (looking_at(image(RED[: len(RED) // 2])), "damaged or truncated"),
            (looking_at(image(b"hello, I am text named .png")), "not a PNG, JPEG"),
            (looking_at(image(bomb_png(20_000, 20_000))), "pixels"),
            (looking_at(*[image(RED)] * 17), "show 17 images; a request may show at most 16"),
        ]:
            assert re.search(words, refused(api, ask)["message"]), words
        assert api.messages.create(**looking_at(image(RED))).usage.input_tokens == seen.usage.input_tokens


def test_a_model_without_a_projector_answers_400(shared_engine):
    with serving(shared_engine) as server:
        error = refused(anthropic_client(server), looking_at(image(RED)))
        assert "without a vision projector" in error["message"]
