"""Images on the one engine, on the real default model with the tests' tiny projector
(tests/support/tiny_projector.py: random weights, 64 tokens per image): an image becomes
embedding rows in the batch, encoded once per image, its cells a prefix like any other; a
bad file ends its request alone."""

from __future__ import annotations

import base64
import io

import pytest
from PIL import Image

from inference import ChatRequest, FinishReason, SamplingParams
from tests.support.tiny_projector import IMAGE_TOKENS, write_tiny_projector

pytestmark = pytest.mark.model  # every test here runs the real model


@pytest.fixture(scope="module")
def projector(tmp_path_factory):
    return write_tiny_projector(tmp_path_factory.mktemp("mmproj") / "tiny-mmproj.gguf")


@pytest.fixture
def vision_engine(make_engine, projector):
    return make_engine(n_ctx=2048, n_seq_max=4, reproducible=True, mmproj=projector)


def png(color: tuple[int, int, int], size: tuple[int, int] = (40, 30)) -> bytes:
    out = io.BytesIO()
    image = Image.new("RGB", size, color)
    for x in range(size[0]):  # not flat: a gradient, so the patches differ
        image.putpixel((x, x * size[1] // size[0]), (255 - color[0], x * 6 % 256, 0))
    image.save(out, "PNG")
    return out.getvalue()


def data_url(data: bytes, media: str = "image/png") -> str:
    return f"data:{media};base64,{base64.b64encode(data).decode()}"


def ask(image: bytes | None, text: str = "What is in this picture?", n: int = 16) -> ChatRequest:
    parts: list[dict] = [{"type": "text", "text": text}]
    if image is not None:
        parts.append({"type": "image_url", "image_url": {"url": data_url(image)}})
    return ChatRequest(messages=({"role": "user", "content": parts},), sampling=SamplingParams.greedy(n))


RED, BLUE = png((200, 30, 30)), png((20, 40, 220))


def test_an_image_reaches_the_batch_as_its_rows(vision_engine):
    with_image = vision_engine.prepare(ask(RED))
    text_only = vision_engine.prepare(ask(None))
    assert with_image.prompt_tokens is not None and text_only.prompt_tokens is not None
    assert len(with_image.prompt_tokens) == len(text_only.prompt_tokens) + IMAGE_TOKENS
    assert sum(1 for t in with_image.prompt_tokens if t < 0) == IMAGE_TOKENS
    seen = vision_engine.submit(ask(RED)).result(120)
    blind = vision_engine.submit(ask(None)).result(120)
    assert seen.error is None and blind.error is None
    assert seen.stats.prompt_tokens == len(with_image.prompt_tokens)
    assert seen.token_ids != blind.token_ids  # the rows changed what the model read
    other = vision_engine.submit(ask(BLUE)).result(120)
    assert other.token_ids != seen.token_ids  # and they are the image's own


def test_the_same_image_is_encoded_once_and_its_cells_are_shared(vision_engine):
    first = vision_engine.submit(ask(RED, n=8)).result(120)
    assert vision_engine.metrics(fresh=True).images_encoded == 1
    handles = [vision_engine.submit(ask(RED, n=8)) for _ in range(3)]
    again = [h.result(120) for h in handles]
    m = vision_engine.metrics(fresh=True)
    assert m.images_encoded == 1
    assert all(r.token_ids == first.token_ids for r in again)
    # the image and the text before it came from the cache: only the tail is computed
    assert all(r.stats.cached_tokens >= IMAGE_TOKENS for r in again)
    # each reply's stats say so (the window's side panel shows them)
    assert (first.stats.image_tokens, first.stats.image_tokens_cached) == (IMAGE_TOKENS, 0)
    assert all((r.stats.image_tokens, r.stats.image_tokens_cached) == (IMAGE_TOKENS, IMAGE_TOKENS) for r in again)
    vision_engine.submit(ask(BLUE, n=4)).result(120)
    assert vision_engine.metrics(fresh=True).images_encoded == 2


def test_greedy_output_from_a_cached_encode_equals_a_fresh_one(make_engine, projector):
    engine = make_engine(n_ctx=2048, n_seq_max=4, reproducible=True, mmproj=projector)
    engine.submit(ask(RED, text="Describe the colours.", n=4)).result(120)  # encodes RED
    engine.call(lambda core: core.kv.clear())  # no KV reused: only the encode is cached
    cached = engine.submit(ask(RED, n=24)).result(120)
    assert engine.metrics(fresh=True).images_encoded == 1
    fresh_engine = make_engine(n_ctx=2048, n_seq_max=4, reproducible=True, mmproj=projector)
    fresh = fresh_engine.submit(ask(RED, n=24)).result(120)
    assert fresh_engine.metrics(fresh=True).images_encoded == 1
    assert cached.token_ids == fresh.token_ids and cached.error is None


@pytest.mark.parametrize(("data", "words"), [
    (RED[: len(RED) // 2], "damaged or truncated"),
    (b"just some text, named picture.png\n", "not a PNG, JPEG"),
    (b"", "empty"),
])
def test_a_bad_image_ends_its_request_alone(vision_engine, data, words):
    running = vision_engine.submit(ask(None, n=24))
    bad = vision_engine.submit(ask(data)).result(60)
    assert bad.finish_reason is FinishReason.ERROR and words in (bad.error or "")
    assert running.result(120).error is None
    assert vision_engine.submit(ask(BLUE, n=4)).result(120).error is None


def test_the_model_info_names_the_projector(vision_engine, projector, shared_engine):
    assert vision_engine.info.mmproj == projector and vision_engine.info.sees_images
    assert shared_engine.info.mmproj is None and not shared_engine.info.sees_images


def test_a_model_without_a_projector_refuses_images(shared_engine):
    done = shared_engine.submit(ask(RED)).result(60)
    assert done.finish_reason is FinishReason.ERROR
    assert "without a vision projector" in (done.error or "")


STORY = "Tell me about the lighthouse keeper who collected the names of passing ships. " * 12


def test_after_a_restart_the_image_and_its_prompt_come_from_disk(model_path, projector, tmp_path):
    """The projector's folder keeps the image's slot and rows, the disk prompt cache the
    prompt's KV: the same question after a restart encodes nothing and computes only its
    last token, and replies as the first engine did."""
    from inference.core.engine import Engine
    from inference.params import LoadSettings

    settings = LoadSettings(model_path=model_path, n_ctx=2048, n_seq_max=4, reproducible=True,
                            kv_cache_dir=tmp_path, mmproj=projector)
    chat = ask(RED, text=STORY, n=16)
    with Engine.start(settings) as engine:
        first = engine.submit(chat).result(120)
        assert first.error is None and engine.metrics(fresh=True).images_encoded == 1
    assert list(tmp_path.rglob("*.kvs")) and list(tmp_path.rglob("*.npz"))
    with Engine.start(settings) as engine:
        again = engine.submit(chat).result(120)
        m = engine.metrics(fresh=True)
    assert (m.images_encoded, m.images_loaded) == (0, 1)
    assert m.kv_restores == 1 and m.prompt_tokens_restored >= first.stats.prompt_tokens - 1
    assert again.token_ids == first.token_ids


def test_a_short_chat_about_an_image_is_saved_for_the_next_question_after_a_restart(model_path, projector,
                                                                                     tmp_path):
    """A chat about an image is saved however short (a text chat this short is not): a new
    question about the image after a restart starts from the saved cells of the template's
    head and the image, and computes only its own words."""
    from inference.core.engine import Engine
    from inference.kv.disk_cache import MIN_SAVE_TOKENS
    from inference.params import LoadSettings

    settings = LoadSettings(model_path=model_path, n_ctx=2048, n_seq_max=4, kv_cache_dir=tmp_path, mmproj=projector)

    def image_first(text: str) -> ChatRequest:
        parts = [{"type": "image_url", "image_url": {"url": data_url(RED)}}, {"type": "text", "text": text}]
        return ChatRequest(messages=({"role": "user", "content": parts},), sampling=SamplingParams.greedy(8))

    with Engine.start(settings) as engine:
        first = engine.submit(image_first("What is in this picture?")).result(120)
    assert first.error is None and first.stats.prompt_tokens + 8 < MIN_SAVE_TOKENS
    assert list(tmp_path.rglob("*.kvs"))
    with Engine.start(settings) as engine:
        other = engine.submit(image_first("Which colours does it use?")).result(120)
        m = engine.metrics(fresh=True)
    assert other.error is None and (m.images_encoded, m.kv_restores) == (0, 1)
    assert other.stats.cached_tokens >= IMAGE_TOKENS


def test_a_cache_folder_keeps_each_image_on_one_slot(model_path, projector, tmp_path):
    """Two engines on one folder (the window's and chorus serve's) number images from the
    same registry: an image keeps its slot, a new one gets the next."""
    from inference.core.engine import Engine
    from inference.params import LoadSettings

    settings = LoadSettings(model_path=model_path, n_ctx=1024, n_seq_max=2, kv_cache_dir=tmp_path, mmproj=projector)
    with Engine.start(settings) as one, Engine.start(settings) as two:
        red = one.prepare(ask(RED)).images[0].slot
        blue = two.prepare(ask(BLUE)).images[0].slot
        assert red != blue
        assert two.prepare(ask(RED)).images[0].slot == red
        assert one.prepare(ask(BLUE)).images[0].slot == blue


def test_submit_encodes_the_image_on_the_callers_thread(vision_engine):
    """Not on the engine thread, where the encode would hold every decoding request: the
    image is encoded by the time submit returns (were it the engine thread's job, the count
    would still be 0 here, before the engine took the command)."""
    images = vision_engine.inputs.images
    before = images.images_encoded
    handle = vision_engine.submit(ask(png((90, 90, 10)), n=4))
    assert images.images_encoded == before + 1
    assert handle.result(120).error is None
