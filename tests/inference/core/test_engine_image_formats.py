"""The vision formats beyond LLaVA's, on real models with the tests' tiny projectors
(tests/support/tiny_projector.py): SmolVLM's tiles (an overview and a tile grid between
marker tokens, read with SmolLM2 given SmolVLM's added tokens: tests/support/standin_models.py)
and Gemma 3's bidirectional image (its rows attend to each other both ways, decoded whole with
causal attention off), on Gemma 3 270M.

Each prompt's log-probabilities at its last token are compared with llama.cpp's own reading of
the same prompt (libmtmd's helper, tests/support/mtmd_reference.py): the engine's pieces,
markers, positions and attention must give what llama.cpp's server would."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from inference import ChatRequest, FinishReason, SamplingParams
from inference.core.engine import Engine
from inference.errors import RequestError
from inference.params import LoadSettings
from tests.inference.core.test_engine_images import RED, ask, data_url, png
from tests.support.mtmd_reference import reference_logprobs
from tests.support.standin_models import write_qwen2vl_standin, write_smolvlm_standin
from tests.support.tiny_projector import GEMMA_TEXT_EMBD, PIECE_TOKENS, tiles, write_tiny_projector

pytestmark = pytest.mark.model

WIDE = png((30, 160, 60), (80, 40))  # 2 tiles across, 1 down


@pytest.fixture(scope="module")
def smolvlm(model_path, tmp_path_factory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("smolvlm")
    return (write_smolvlm_standin(model_path, folder / "smolvlm-standin.gguf"),
            write_tiny_projector(folder / "mmproj-idefics3.gguf", kind="idefics3"))


@pytest.fixture(scope="module")
def gemma_projector(tmp_path_factory) -> Path:
    return write_tiny_projector(tmp_path_factory.mktemp("gemma") / "mmproj-gemma3.gguf",
                                text_embd=GEMMA_TEXT_EMBD, kind="gemma3")


@pytest.fixture
def start():
    engines: list[Engine] = []

    def started(**settings) -> tuple[Engine, LoadSettings]:
        load = LoadSettings(n_ctx=2048, n_seq_max=4, reproducible=True, **settings)
        engines.append(Engine.start(load))
        return engines[-1], load

    yield started
    for engine in engines:
        engine.shutdown()


def image_then(question: str, image: bytes, n: int = 4) -> ChatRequest:
    """A question after the image: two such share the image's cells."""
    parts = [{"type": "image_url", "image_url": {"url": data_url(image)}}, {"type": "text", "text": question}]
    return ChatRequest(messages=({"role": "user", "content": parts},), sampling=SamplingParams.greedy(n))


def with_logprobs(chat: ChatRequest) -> ChatRequest:
    return replace(chat, sampling=SamplingParams.greedy(1, logprobs=5))


def first_logprobs(engine: Engine, chat: ChatRequest) -> tuple[str, list[float]]:
    """The first sampled token's text and its top-5 log-probabilities."""
    [lp, *_] = [lp for delta in engine.submit(chat) for lp in delta.logprobs]
    return lp.token, [t.logprob for t in lp.top]


def assert_reads_as_llama_cpp(engine: Engine, settings: LoadSettings, image: bytes) -> None:
    chat = with_logprobs(ask(image))
    prepared = engine.prepare(chat)
    assert prepared.prompt_tokens is not None
    [embedding] = prepared.images
    _, top = first_logprobs(engine, chat)
    reference = reference_logprobs(settings, list(prepared.prompt_tokens), embedding.token_ids, image)
    assert top == pytest.approx(sorted(reference)[-5:][::-1], abs=2e-3)


def markers(engine: Engine, *texts: str) -> list[int]:
    return [engine.inputs.vocab.tokenize(t, add_special=False, parse_special=True)[0] for t in texts]


def test_a_smolvlm_image_is_its_overview_and_tiles_between_their_markers(start, smolvlm):
    model, projector = smolvlm
    engine, settings = start(model_path=model, mmproj=projector)
    [embedding] = engine.prepare(ask(WIDE)).images
    assert tiles(80, 40) == 2 and embedding.n_tokens == PIECE_TOKENS * 3 and not embedding.bidirectional
    around, overview, tile_1, tile_2 = markers(engine, "<fake_token_around_image>", "<global-img>",
                                               "<row_1_col_1>", "<row_1_col_2>")
    text = [t for t in embedding.token_ids if t >= 0]
    # tiles first, each after its row and column, the overview last (SmolVLM's order)
    assert text.index(tile_1) < text.index(tile_2) < text.index(overview)
    assert text.count(around) == 4 and text[-1] == around
    rows = [i for i, t in enumerate(embedding.token_ids) if t < 0]
    assert len(rows) == PIECE_TOKENS * 3 and rows != list(range(rows[0], rows[0] + len(rows)))  # pieces apart
    assert_reads_as_llama_cpp(engine, settings, WIDE)
    assert engine.metrics(fresh=True).images_encoded == 1


def test_a_second_question_about_a_tiled_image_computes_only_its_own_text(start, smolvlm):
    model, projector = smolvlm
    engine, _ = start(model_path=model, mmproj=projector)
    first = engine.submit(image_then("What is in this picture?", RED)).result(120)
    again = engine.submit(image_then("And the colours?", RED)).result(120)
    assert first.error is None and again.error is None and first.stats and again.stats
    n_rows = PIECE_TOKENS * (tiles(40, 30) + 1)
    assert first.stats.image_tokens == n_rows and again.stats.image_tokens_cached == n_rows
    assert engine.metrics(fresh=True).images_encoded == 1


def test_a_gemma_3_image_is_decoded_whole_both_ways(start, gemma_path, gemma_projector):
    engine, settings = start(model_path=gemma_path, mmproj=gemma_projector)
    [embedding] = engine.prepare(ask(RED)).images
    assert embedding.bidirectional and embedding.n_tokens == PIECE_TOKENS
    begin, end = markers(engine, "<start_of_image>", "<end_of_image>")
    ids = embedding.token_ids
    assert ids[0] == begin and ids[-1] == end and all(t < 0 for t in ids[1:-1])
    # fails with the rows decoded causally (their log-probabilities move by about 0.2)
    assert_reads_as_llama_cpp(engine, settings, RED)


def test_a_gemma_3_image_wider_than_the_batch_is_refused_with_the_setting_to_change(start, gemma_path,
                                                                                    gemma_projector):
    engine, _ = start(model_path=gemma_path, mmproj=gemma_projector, n_batch=64, n_ubatch=8)
    done = engine.submit(ask(RED)).result(120)
    assert done.finish_reason is FinishReason.ERROR
    assert f"{PIECE_TOKENS} tokens decoded at once" in (done.error or "") and "n_ubatch" in (done.error or "")
    assert engine.submit(ask(None, n=2)).result(120).error is None  # the engine goes on


def test_a_projector_whose_markers_the_model_lacks_is_refused(start, model_path, smolvlm):
    _, projector = smolvlm  # SmolVLM's projector on plain SmolLM2, without the added tokens
    engine, _ = start(model_path=model_path, mmproj=projector)
    done = engine.submit(ask(RED)).result(120)
    assert done.finish_reason is FinishReason.ERROR
    assert "vocabulary lacks" in (done.error or "") and "another model" in (done.error or "")


@pytest.mark.parametrize("kind", ["smolvlm", "qwen2vl"])
def test_an_image_and_its_prompt_come_back_from_disk_after_a_restart(kind, request, tmp_path):
    """Tiles and M-RoPE positions kept with the rows: after a restart the image is read
    from the projector's folder as it was, and the same question continues from the disk
    prompt cache's cells (at their positions) to the same reply."""
    model, projector = request.getfixturevalue(kind)
    settings = LoadSettings(model_path=model, n_ctx=2048, n_seq_max=2, reproducible=True,
                            kv_cache_dir=tmp_path, mmproj=projector)
    chat = image_then("Tell me about the lighthouse keeper who collected the names of ships. " * 4, WIDE, n=8)
    with Engine.start(settings) as engine:
        [before] = engine.prepare(chat).images
        first = engine.submit(chat).result(120)
    with Engine.start(settings) as engine:
        [after] = engine.prepare(chat).images
        again = engine.submit(chat).result(120)
        m = engine.metrics(fresh=True)
    assert (m.images_encoded, m.images_loaded) == (0, 1)
    assert after.token_ids == before.token_ids and np.array_equal(after.embd, before.embd)
    assert after.spans == before.spans and (after.mrope is None) == (before.mrope is None)
    assert again.stats and again.stats.cached_tokens > after.n_tokens and again.token_ids == first.token_ids


@pytest.fixture(scope="module")
def qwen2vl(model_path, tmp_path_factory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("qwen2vl")
    return (write_qwen2vl_standin(model_path, folder / "qwen2vl-standin.gguf"),
            write_tiny_projector(folder / "mmproj-qwen2vl.gguf", kind="qwen2vl"))


def test_a_qwen_vl_image_takes_m_rope_positions(start, qwen2vl):
    """Qwen-VL's M-RoPE (the text model a stand-in: SmolLM2 as llama.cpp's "qwen2vl"): a
    40x30 image is 5x4 tokens at 2-D positions spanning 5, the text after it 15 positions
    before its index. The engine's prompt reads as llama.cpp's (each row's t, y, x, the
    text after it at its position); every image was refused at encode before."""
    model, projector = qwen2vl
    engine, settings = start(model_path=model, mmproj=projector)
    [embedding] = engine.prepare(ask(RED)).images
    assert embedding.n_tokens == 20 and embedding.spans == ((0, 5),) and embedding.whole
    assert embedding.mrope is not None and embedding.mrope[6].tolist() == [0, 1, 1]  # row 1, column 1
    assert_reads_as_llama_cpp(engine, settings, RED)


def test_a_second_question_about_a_qwen_vl_image_continues_from_its_cells(start, qwen2vl):
    """The image's cells are a prefix like any other under M-RoPE: a second question
    computes only its own text, at the positions after the image, and replies as a fresh
    engine reading the whole prompt does."""
    model, projector = qwen2vl
    engine, _ = start(model_path=model, mmproj=projector)
    engine.submit(image_then("What is in this picture?", WIDE)).result(120)
    again = engine.submit(image_then("And the colours?", WIDE, n=12)).result(120)
    assert again.error is None and again.stats and again.stats.image_tokens_cached == again.stats.image_tokens > 0
    fresh_engine, _ = start(model_path=model, mmproj=projector)
    fresh = fresh_engine.submit(image_then("And the colours?", WIDE, n=12)).result(120)
    assert fresh.stats and fresh.stats.cached_tokens == 0 and fresh.token_ids == again.token_ids


def test_an_image_max_tokens_reads_a_large_image_smaller(start, qwen2vl):
    """Qwen-VL reads an image at about its own size, up to the projector's limit: a 640x480
    one is some 4,000 tokens with the tiny projector, more than a 2,048-token context holds
    (a screenshot with a real one fills a chat's context so). With image_max_tokens
    (`--image-max-tokens`, llama-server's option) it is read smaller and fits."""
    model, projector = qwen2vl
    big = png((30, 160, 60), (640, 480))
    engine, _ = start(model_path=model, mmproj=projector)
    with pytest.raises(RequestError, match="context holds 2048"):
        engine.prepare(ask(big))
    capped_engine, settings = start(model_path=model, mmproj=projector, image_max_tokens=100)
    [capped] = capped_engine.prepare(ask(big)).images
    assert 0 < capped.n_tokens <= 100
    assert_reads_as_llama_cpp(capped_engine, settings, big)  # still read as llama.cpp reads it
