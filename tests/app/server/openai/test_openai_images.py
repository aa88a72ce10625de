"""/v1/chat/completions with images (OpenAI's image_url parts, data: URLs), through the
official client, on the real default model with the tests' tiny projector."""

from __future__ import annotations

import openai
import pytest

from tests.inference.core.test_engine_images import BLUE, RED, data_url
from tests.support.served import client, serving
from tests.support.tiny_projector import IMAGE_TOKENS, write_tiny_projector

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def projector(tmp_path_factory):
    return write_tiny_projector(tmp_path_factory.mktemp("mmproj") / "tiny-mmproj.gguf")


def looking_at(url: str | None, text: str = "What is in this picture?") -> dict:
    parts: list[dict] = [{"type": "text", "text": text}]
    if url is not None:
        parts.append({"type": "image_url", "image_url": {"url": url}})
    return dict(model="smollm2", messages=[{"role": "user", "content": parts}], temperature=0, max_tokens=8)


def test_an_image_url_data_part_is_seen_and_bad_ones_are_400s(make_engine, projector):
    engine = make_engine(n_ctx=2048, n_seq_max=4, reproducible=True, mmproj=projector)
    with serving(engine) as server:
        api = client(server)
        seen = api.chat.completions.create(**looking_at(data_url(RED)))
        blind = api.chat.completions.create(**looking_at(None))
        assert seen.usage.prompt_tokens == blind.usage.prompt_tokens + IMAGE_TOKENS
        assert api.chat.completions.create(**looking_at(data_url(BLUE))).choices[0].message.content \
            != seen.choices[0].message.content
        assert engine.metrics(fresh=True).images_encoded == 2
        for url, words in [
            ("https://example.com/cat.png", "fetches no remote images"),
            ("data:image/svg+xml;base64,PHN2Zz4=", r"media type image/svg\+xml"),
            (data_url(RED[: len(RED) // 2]), "damaged or truncated"),
            (data_url(b"hello, I am text named .png"), "not a PNG, JPEG"),
        ]:
            with pytest.raises(openai.BadRequestError, match=words):
                api.chat.completions.create(**looking_at(url))
        assert api.chat.completions.create(**looking_at(data_url(RED))).usage.prompt_tokens \
            == seen.usage.prompt_tokens  # still serving


def test_a_model_without_a_projector_answers_400(shared_engine):
    with serving(shared_engine) as server:
        with pytest.raises(openai.BadRequestError, match="without a vision projector"):
            client(server).chat.completions.create(**looking_at(data_url(RED)))


def test_an_image_url_of_an_allowed_host_is_fetched_and_seen_as_its_bytes(make_engine, projector):
    """`chorus serve --image-host HOST`: the server fetches the image (a real server on
    loopback here); the same bytes sent as data are the same image, encoded once."""
    from http.server import ThreadingHTTPServer

    from tests.app.server.calls.test_remote_images import _Images
    from tests.support.net import serving_on_a_thread

    engine = make_engine(n_ctx=2048, n_seq_max=4, reproducible=True, mmproj=projector)
    with serving_on_a_thread(ThreadingHTTPServer(("127.0.0.1", 0), _Images)) as images:
        host = f"127.0.0.1:{images.server_address[1]}"
        with serving(engine, image_hosts=(host,)) as server:
            api = client(server)
            fetched = api.chat.completions.create(**looking_at(f"http://{host}/red.png"))
            sent = api.chat.completions.create(**looking_at(data_url(RED)))
            assert fetched.usage.prompt_tokens == sent.usage.prompt_tokens
            assert fetched.choices[0].message.content == sent.choices[0].message.content
            assert engine.metrics(fresh=True).images_encoded == 1
            with pytest.raises(openai.BadRequestError, match="--image-host"):
                api.chat.completions.create(**looking_at("http://example.com/red.png"))
            with pytest.raises(openai.BadRequestError, match="did not answer an image"):
                api.chat.completions.create(**looking_at(f"http://{host}/text"))


def test_a_batch_fetches_the_images_its_requests_name_by_url(make_engine, projector, tmp_path):
    """As the live route: the same image, and a fetch that fails is that request's 400."""
    from http.server import ThreadingHTTPServer

    from tests.app.server.batches.test_batch_api import jsonl_of, until_status, upload
    from tests.app.server.calls.test_remote_images import _Images
    from tests.support.net import serving_on_a_thread

    engine = make_engine(n_ctx=2048, n_seq_max=4, reproducible=True, mmproj=projector)
    with serving_on_a_thread(ThreadingHTTPServer(("127.0.0.1", 0), _Images)) as images:
        host = f"127.0.0.1:{images.server_address[1]}"
        with serving(engine, image_hosts=(host,), responses_db=tmp_path / "chorus.db",
                     files_dir=tmp_path / "files") as server:
            api = client(server)
            lines = [{"custom_id": name, "method": "POST", "url": "/v1/chat/completions", "body": looking_at(url)}
                     for name, url in (("red", f"http://{host}/red.png"), ("text", f"http://{host}/text"))]
            batch = api.batches.create(input_file_id=upload(api, lines).id, endpoint="/v1/chat/completions",
                                       completion_window="24h")
            done = until_status(api, batch.id, "completed", "failed")
            (red,) = jsonl_of(api, done.output_file_id)
            live = api.chat.completions.create(**looking_at(data_url(RED)))
            assert red["response"]["body"]["usage"]["prompt_tokens"] == live.usage.prompt_tokens
            (text,) = jsonl_of(api, done.error_file_id)
            error = text["response"]["body"]["error"]
            assert text["response"]["status_code"] == 400 and error["param"] == "messages[0].content[1].image_url.url"
            assert "did not answer an image" in error["message"]
