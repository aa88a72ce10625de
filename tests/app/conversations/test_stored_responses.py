"""A stored Response's images (app/conversations/stored_responses.py, storage/responses.py):
kept once as a chat's attached image is, so the window shows them on the turn and sends
them again when the user goes on there, and the API reads its parts back as they were sent.
Real SQLite file, real PNG bytes."""

from __future__ import annotations

import base64

import pytest

from app.conversations.prompt import PromptBuilder
from app.conversations.stored_responses import save_response, with_stored_images
from inference import SamplingParams
from storage import ChatRepository, DocumentRepository, ResponseRecord, ResponsesRepository, StorageError
from tests.app.conversations.test_prompt import WordTokens
from tests.inference.core.test_engine_images import BLUE, RED, data_url

USAGE = {"input_tokens": 3, "output_tokens": 2}


def asking(rid: str, image: bytes, previous: str | None = None) -> ResponseRecord:
    turn = {"role": "user", "content": [{"type": "text", "text": "What colour is this?"},
                                        {"type": "image_url", "image_url": {"url": data_url(image)}}]}
    return ResponseRecord(id=rid, model="m", input=[turn], output_text="Red.", status="completed", usage=USAGE,
                          previous_response_id=previous)


def documents(db) -> int:
    with db.engine.connect() as conn:
        return conn.exec_driver_sql("SELECT count(*) FROM documents").scalar_one()


def test_an_image_a_client_sent_is_the_turn_s_attachment_and_reads_back_as_sent(db):
    responses, chats = ResponsesRepository(db), ChatRepository(db)
    record = asking("resp_a", RED)
    save_response(responses, record)
    stored = responses.get("resp_a")
    assert stored is not None and stored.input == record.input  # the API's parts, byte for byte
    conversation_id = chats.list_conversations(origin=None)[0].id
    path = chats.active_path(conversation_id)
    question = path.messages[0]
    (attached,) = path.attachments[question.id]
    assert attached.is_image and attached.name == "image 1.png"
    # Going on in the window: the prompt shows the image on the turn it came with.
    builder = PromptBuilder(DocumentRepository(db), lambda: (WordTokens(), 8192), show_images=True)
    prompt = builder.prompt_after(path, SamplingParams(max_tokens=64))
    parts = prompt.messages[0]["content"]
    assert {"type": "image_url", "image_url": {"url": data_url(RED)}} in parts
    with db.engine.connect() as conn:  # the bytes kept once, not again inside the turn's parts
        api_json = conn.exec_driver_sql("SELECT api_json FROM messages WHERE id = ?", (question.id,)).scalar_one()
    assert base64.b64encode(RED).decode()[:40] not in api_json


def test_an_image_sent_twice_is_kept_once_and_goes_with_the_last_response_showing_it(db):
    responses = ResponsesRepository(db)
    save_response(responses, asking("resp_a", RED))
    save_response(responses, asking("resp_b", RED))
    save_response(responses, asking("resp_c", BLUE, previous="resp_b"))
    assert documents(db) == 2
    assert responses.delete("resp_a") and documents(db) == 2  # resp_b still shows it
    assert responses.delete("resp_c") and documents(db) == 1  # its blue one went
    assert responses.delete("resp_b") and documents(db) == 0


def test_a_turn_naming_an_image_not_given_stores_nothing(db):
    stored, images = with_stored_images(asking("resp_a", RED))
    with pytest.raises(StorageError, match="not given"):
        ResponsesRepository(db).save(stored, title="t")  # its image left out
    assert images and ChatRepository(db).list_conversations(origin=None) == []


def test_an_image_that_does_not_decode_stays_as_it_was_sent(db):
    broken = asking("resp_a", RED[: len(RED) // 2])
    stored, images = with_stored_images(broken)
    assert images == [] and stored.input == broken.input
