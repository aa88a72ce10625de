"""/v1/responses with input_image parts (data: URLs), through the official `openai` client,
on the real default model with the tests' tiny projector: seen, carried by
previous_response_id, and every refusal a 400 naming its field."""

from __future__ import annotations

import openai
import pytest

from tests.inference.core.test_engine_images import BLUE, RED, data_url
from tests.inference.worker.test_image_file import bomb_png
from tests.support.served import client, serving
from tests.support.tiny_projector import IMAGE_TOKENS, write_tiny_projector

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def projector(tmp_path_factory):
    return write_tiny_projector(tmp_path_factory.mktemp("mmproj") / "tiny-mmproj.gguf")


def image(url: str) -> dict:
    return {"type": "input_image", "image_url": url, "detail": "auto"}


def looking_at(*images: dict, text: str = "What is in this picture?") -> dict:
    content = [{"type": "input_text", "text": text}, *images]
    return dict(model="smollm2", input=[{"role": "user", "content": content}], temperature=0, max_output_tokens=8)


def refused(api: openai.OpenAI, ask: dict) -> openai.BadRequestError:
    with pytest.raises(openai.BadRequestError) as err:
        api.responses.create(**ask)
    return err.value


def test_an_input_image_is_seen_kept_and_bad_ones_are_400s(make_engine, projector, tmp_path):
    engine = make_engine(n_ctx=2048, n_seq_max=4, reproducible=True, mmproj=projector)
    with serving(engine, responses_db=tmp_path / "chorus.db") as server:
        api = client(server)
        seen = api.responses.create(**looking_at(image(data_url(RED))))
        blind = api.responses.create(**looking_at())
        assert seen.usage.input_tokens == blind.usage.input_tokens + IMAGE_TOKENS
        assert api.responses.create(**looking_at(image(data_url(BLUE)))).output_text != seen.output_text
        # continued: the stored turn shows its image again, from the cache (no new encode)
        more = api.responses.create(model="smollm2", input="And its colour?", previous_response_id=seen.id,
                                    temperature=0, max_output_tokens=4)
        assert more.usage.input_tokens > seen.usage.input_tokens + seen.usage.output_tokens
        assert more.usage.input_tokens_details.cached_tokens >= seen.usage.input_tokens - 1
        assert engine.metrics(fresh=True).images_encoded == 2
        for ask, param, words in [
            (looking_at(image("https://example.com/cat.png")), "input[0].content[1].image_url",
             "fetches no remote images"),
            (looking_at({"type": "input_image", "file_id": "file-abc"}), "input[0].content[1].image_url",
             "got a file_id"),
            (looking_at(image("data:image/svg+xml;base64,PHN2Zz4=")), "input[0].content[1].image_url",
             "media type image/svg+xml"),
            (looking_at(*[image(data_url(RED))] * 17), "input", "a request may show at most 16"),
            (looking_at(image(data_url(RED[: len(RED) // 2]))), "input", "damaged or truncated"),
            (looking_at(image(data_url(b"hello, I am text named .png"))), "input", "not a PNG, JPEG"),
            (looking_at(image(data_url(bomb_png(20_000, 20_000)))), "input", "pixels"),
        ]:
            error = refused(api, ask)
            assert error.body["param"] == param and words in error.body["message"], (param, error.body)


def test_a_model_without_a_projector_answers_400(shared_engine):
    with serving(shared_engine) as server:
        assert "without a vision projector" in str(refused(client(server), looking_at(image(data_url(RED)))))
