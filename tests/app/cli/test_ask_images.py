"""`chorus ask IMAGE.png -q ...` and `chorus chat --attach IMAGE.png`: images shown to the real
default model with the tests' tiny projector, kept in the history attached to their message
(stored once by sha256, bytes and all) and shown again when the chat is continued; refused in
one line, before anything is stored, without a projector or for a bad file."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from storage import DEFAULT_FILENAME, ChatRepository, DocumentRepository, open_database
from tests.inference.core.test_engine_images import BLUE, RED
from tests.support.cli import chorus, chorus_in_process
from tests.support.tiny_projector import IMAGE_TOKENS, write_tiny_projector


@pytest.fixture(scope="module")
def projector(tmp_path_factory) -> Path:
    return write_tiny_projector(tmp_path_factory.mktemp("mmproj") / "tiny-mmproj.gguf")


@pytest.fixture
def data_dir(tmp_path, model_path) -> Path:
    models = tmp_path / "models"
    models.mkdir()
    (models / model_path.name).symlink_to(model_path)
    return tmp_path


def picture(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def first_user_messages(data_dir: Path) -> list[tuple[str, list[str]]]:
    """Each chat's first user message: its text and what it attaches (an image as NAME=bytes)."""
    if not (data_dir / DEFAULT_FILENAME).exists():
        return []
    db = open_database(data_dir / DEFAULT_FILENAME)
    try:
        repo, docs = ChatRepository(db), DocumentRepository(db)
        out = []
        for c in sorted(repo.list_conversations(), key=lambda c: c.id):
            path = repo.active_path(c.id)
            m = next(m for m in path.messages if m.role == "user")
            out.append((m.content, [f"{a.name}={_what(docs.document(a.sha256).data)}" if a.is_image else a.name
                                    for a in path.attachments.get(m.id, ())]))
        return out
    finally:
        db.close()


def _what(data: bytes | None) -> str:
    return {RED: "RED", BLUE: "BLUE"}.get(data or b"", "?")


@pytest.mark.model
def test_ask_about_an_image_shows_it_encoded_once_and_keeps_its_line(data_dir, tmp_path, projector):
    red = picture(tmp_path, "red.png", RED)
    out = chorus(data_dir, "ask", str(red), "-q", "What colour is it?", "-q", "Is it large?",
                 "--mmproj", str(projector), "--max-tokens", "4", "--json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["image_tokens"] == IMAGE_TOKENS and (report["images_encoded"], report["images_loaded"]) == (1, 0)
    assert report["prompt_tokens_computed"] >= IMAGE_TOKENS
    assert first_user_messages(data_dir) == [("What colour is it?", ["red.png=RED"]), ("Is it large?", ["red.png=RED"])]
    note = picture(tmp_path, "note.txt", b"The red square was painted in 1921 by a pump engineer.\n")
    two = chorus(data_dir, "ask", str(red), str(note), str(picture(tmp_path, "blue.png", BLUE)),
                 "-q", "Which differs?", "--mmproj", str(projector), "--max-tokens", "4", "--json")
    assert two.returncode == 0, two.stderr
    both = json.loads(two.stdout)
    # red's rows come from the disk prompt cache the first run left (the data directory's)
    assert both["image_tokens"] == 2 * IMAGE_TOKENS and (both["images_encoded"], both["images_loaded"]) == (1, 1)
    assert both["document_tokens"] > 10  # the document beside the images
    assert first_user_messages(data_dir)[-1] == ("Which differs?", ["note.txt", "red.png=RED", "blue.png=BLUE"])


def prompts(stderr: str) -> list[tuple[int, int]]:
    """(cached, prompt tokens) of each reply of a terminal chat."""
    return [(int(cached), int(total)) for cached, total in re.findall(r"(\d+)/(\d+) prompt tokens cached", stderr)]


@pytest.mark.model
def test_chat_attach_shows_the_image_in_every_turn_and_when_continued(data_dir, tmp_path, projector):
    red = picture(tmp_path, "red.png", RED)
    chat = ["chat", "--max-tokens", "4", "--temperature", "0"]
    out = chorus(data_dir, *chat, "--attach", str(red), "--mmproj", str(projector),
                 stdin="What is this?\nAnd again?\n/quit\n")
    assert out.returncode == 0, out.stderr
    (_, prompt1), (cached2, prompt2) = prompts(out.stderr)
    assert prompt1 > IMAGE_TOKENS  # the question alone is a dozen tokens: the image went with it
    assert prompt2 > prompt1 and cached2 >= IMAGE_TOKENS  # still shown, its cells reused
    assert first_user_messages(data_dir) == [("What is this?", ["red.png=RED"])]
    (conversation,) = re.findall(r"--conversation (\d+)", out.stderr)
    again = chorus(data_dir, *chat, "--conversation", conversation, "--mmproj", str(projector), stdin="Once more?\n")
    assert again.returncode == 0, again.stderr
    ((_, prompt3),) = prompts(again.stderr)
    assert prompt3 > prompt2  # the image read back from the history, shown again
    blind = chorus(data_dir, *chat, "--conversation", conversation, stdin="Once more?\n")
    assert blind.returncode == 0, blind.stderr  # without a projector: the line "[image: red.png]" instead
    ((_, prompt4),) = prompts(blind.stderr)
    assert prompt4 < prompt3  # a turn longer, yet 64 image tokens fewer


def test_an_image_without_a_projector_is_one_line_and_stores_nothing(tmp_path, capsys):
    red = picture(tmp_path, "red.png", RED)
    for command in (["ask", str(red), "-q", "What is it?"], ["chat", "--attach", str(red)]):
        out = chorus_in_process(capsys, tmp_path, *command)
        assert out.returncode == 2
        assert out.stderr.strip() == f"chorus: {red} is an image, and the model sees none without its vision " \
                                     "projector: give one with --mmproj FILE"
    assert first_user_messages(tmp_path) == []


@pytest.mark.parametrize(("data", "words"), [(RED[: len(RED) // 2], "damaged or truncated"),
                                             (b"hello, I am text named .png", "not a PNG, JPEG")])
def test_a_bad_image_is_one_line_and_stores_nothing(tmp_path, capsys, data, words):
    bad = picture(tmp_path, "bad.png", data)
    out = chorus_in_process(capsys, tmp_path, "ask", str(bad), "-q", "What is it?", "--mmproj", "unused.gguf")
    assert out.returncode == 2
    assert out.stderr.startswith(f"chorus: {bad}: ") and words in out.stderr and out.stderr.count("\n") == 1
    assert first_user_messages(tmp_path) == []


@pytest.mark.model
def test_image_max_tokens_reads_a_large_image_smaller(data_dir, tmp_path, model_path):
    """`--image-max-tokens` reaches the projector: a Qwen-VL-style one (the tests' stand-in,
    tests/support/standin_models.py) reads a 640x480 image in some 4,000 tokens, more than
    the 2,048 of --ctx; capped at 100, the question is answered."""
    import io

    from PIL import Image

    from tests.support.standin_models import write_qwen2vl_standin

    model = write_qwen2vl_standin(model_path, tmp_path / "qwen2vl-standin.gguf")
    projector = write_tiny_projector(tmp_path / "mmproj-qwen2vl.gguf", kind="qwen2vl")
    out_png = io.BytesIO()
    Image.new("RGB", (640, 480), (30, 160, 60)).save(out_png, "PNG")
    big = picture(tmp_path, "big.png", out_png.getvalue())
    ask = ["ask", str(big), "-q", "What is it?", "--model", str(model), "--mmproj", str(projector),
           "--ctx", "2048", "--max-tokens", "2", "--json"]
    refused = chorus(data_dir, *ask)
    assert refused.returncode == 1  # said, not an empty answer and 0 as before
    assert "context holds 2048" in json.loads(refused.stdout)["answers"][0]["error"]
    out = chorus(data_dir, *ask, "--image-max-tokens", "100")
    assert out.returncode == 0, out.stderr
    assert 0 < json.loads(out.stdout)["image_tokens"] <= 100
