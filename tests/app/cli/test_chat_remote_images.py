"""`chorus chat --server URL --attach IMAGE`: the image goes to the remote server as an
OpenAI image_url part (a data: URL), here a real Chorus server on loopback whose model has
the tests' tiny projector; a server whose model sees no images says so in one line, and
the question stays saved."""

from __future__ import annotations

import pytest

from storage import MessageStatus
from tests.inference.core.test_engine_images import RED
from tests.support.served import KEY, serving
from tests.support.terminal_chat import TerminalChat, saved_paths
from tests.support.tiny_projector import IMAGE_TOKENS, write_tiny_projector

pytestmark = pytest.mark.model


def _saved(data_dir):
    """The one conversation's messages as stored, and the names attached to each."""
    (path,) = saved_paths(data_dir)
    return path.messages, {m: [a.name for a in docs] for m, docs in path.attachments.items()}


def _chat(tmp_path, server, *files: str):
    chat = TerminalChat(tmp_path, "--server", f"{server.url}/v1", "--api-key", KEY, "--temperature", "0",
                        "--max-tokens", "8", *(arg for f in files for arg in ("--attach", f)))
    chat.type("What is in this picture?")
    chat.wait_for("you> ", after=len("you> "))  # asked for the next message: the turn is over
    assert chat.finish() == 0, chat.err
    return (chat, *_saved(tmp_path))


def test_an_attached_image_reaches_the_remote_model_and_is_saved_with_the_question(tmp_path, make_engine):
    projector = write_tiny_projector(tmp_path / "tiny-mmproj.gguf")
    engine = make_engine(n_ctx=2048, n_seq_max=4, reproducible=True, mmproj=projector)
    picture = tmp_path / "red.png"
    picture.write_bytes(RED)
    with serving(engine) as server:
        chat, messages, attached = _chat(tmp_path / "with", server, str(picture))
        assert engine.metrics(fresh=True).images_encoded == 1, chat.err  # it reached the server's model
        _blind_chat, blind, _ = _chat(tmp_path / "without", server)
    question, answer = messages[-2], messages[-1]
    assert attached[question.id] == ["red.png"]  # kept with its message
    assert answer.status is MessageStatus.COMPLETE and answer.content
    assert answer.prompt_tokens == blind[-1].prompt_tokens + IMAGE_TOKENS  # the image's rows, counted by the server


def test_a_server_whose_model_sees_no_images_says_so_and_keeps_the_question(tmp_path, shared_engine):
    picture = tmp_path / "red.png"
    picture.write_bytes(RED)
    with serving(shared_engine) as server:
        chat, messages, attached = _chat(tmp_path / "data", server, str(picture))
    assert "without a vision projector" in chat.out + chat.err
    assert "Traceback" not in chat.err
    assert messages[0].role == "user" and attached[messages[0].id] == ["red.png"]
