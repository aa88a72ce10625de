"""app/cli/images.py without a model: an image's marker in a prompt's turn becomes the image
part where it stands, or the line "[image: NAME]" for a model without a projector."""

from __future__ import annotations

import base64
import hashlib

from app.conversations.images import marked, with_images
from storage import NewDocument
from tests.support.documents import new_document


def image(data: bytes, name: str) -> NewDocument:
    return NewDocument(hashlib.sha256(data).hexdigest(), name, "image/png", len(data), "", None, (), data)


def test_each_image_takes_its_markers_place_and_text_stays_text():
    cat, dog, note = image(b"cat", "cat.png"), image(b"dog", "dog.png"), new_document("A note.")
    turns = ({"role": "system", "content": "Be brief."},
             {"role": "user", "content": "Note first.\n\n" + marked("Which is which?", [cat, note, dog])},
             {"role": "assistant", "content": "A cat and a dog."})
    system, user, reply = with_images(turns, [dog, cat], show=True)
    assert (system, reply) == (turns[0], turns[2])
    assert [p.get("text") or base64.b64decode(p["image_url"]["url"].split(",")[1]) for p in user["content"]] \
        == ["Note first.\n\n", b"cat", b"dog", "Which is which?"]
    _, blind, _ = with_images(turns, [cat, dog], show=False)
    assert blind["content"] == "Note first.\n\n[image: cat.png]\n[image: dog.png]\nWhich is which?"
    assert with_images(turns[:1], [cat], show=True) == turns[:1]
