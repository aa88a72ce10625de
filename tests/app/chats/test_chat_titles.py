"""Generated chat titles: the request, cleaning the model's output, the fallback (no model),
and the stored flag that tells a stand-in title from one to keep."""

from __future__ import annotations

import pytest

from app.chats.titles import (
    EXAMPLES,
    MAX_TOKENS,
    TITLE_CHARS,
    clean_title,
    fallback_title,
    make_title,
    stand_in_title,
    title_messages,
    title_request,
)
from inference.params import SPARE_PRIORITY, is_spare

# What SmolLM2-135M-Instruct and Gemma 3 270M (a base model) wrote for these first messages,
# and what the app makes of it.
MODEL_OUTPUTS = [
    ("What is the capital of France?", "Capital of France", "Capital of France"),
    ("What is the capital of France?", "Capital of Franceとは", "Capital of France"),
    ("What are the health benefits of green tea?", "Health Benefits of Green Tea SUBSCRIBE",
     "Health Benefits of Green Tea"),
    ("What are the health benefits of green tea?", "Health Benefits of Green Tea devenue",
     "Health Benefits of Green Tea"),
    ("Explain quantum entanglement simply", "Explain Quantum Entanglement simply",
     "Explain Quantum Entanglement simply"),
    ("my sourdough bread is too dense, why?", "Why My Sourdough Bread is Too Dense",
     "Why My Sourdough Bread is Too Dense"),
    ("How do I reverse a list in Python?",
     "Here's a short title for the conversation:\n\nPython: Reverse a List", "Python: Reverse a List"),
    ("Explain quantum entanglement simply", "Quantum Entanglement: The Unseen Link to Quantum Computing",
     "Quantum Entanglement"),
    ("Can you help me plan a trip to Japan in spring? I like food and temples.",
     "Can you help me plan a trip to Japan in spring? I like food and", "Plan a trip to Japan in spring"),
    ("Explain quantum entanglement simply", '"Quantum Entanglement Explained."', "Quantum Entanglement Explained"),
    ("Explain quantum entanglement simply", "Title: **Quantum Entanglement Basics**", "Quantum Entanglement Basics"),
    ("hi", "Hi", "Hi"),
    ("hi", "Hello! How can I assist you today?", "Hi"),  # "Hello" is not the chat's word (no reply here)
    # the model's inventions give way to the user's words
    ("Tell me a joke", "Dragon Story", "Tell me a joke"),
    ("Tell me a joke", "A: A: A: A: A: A: A: A:", "Tell me a joke"),
    ("my sourdough bread is too dense, why?", "購入したお米のパンを", "My sourdough bread is too dense, why"),
    ("Write a haiku about autumn leaves", "", "Write a haiku about autumn leaves"),
    ("How do I reverse a list in Python?", "!!! ...", "How do I reverse a list in Python"),
    ("How do I reverse a list in Python?",
     "You can reverse a list in Python using the built in reversed function or slicing it backwards",
     "How do I reverse a list in Python"),
]


@pytest.mark.parametrize(("message", "output", "expected"), MODEL_OUTPUTS)
def test_model_output_becomes_a_title(message: str, output: str, expected: str) -> None:
    title = make_title(output, message, reply="")
    assert title == expected
    assert 0 < len(title) <= TITLE_CHARS


def test_the_reply_counts_as_the_chats_words() -> None:
    """A title from the reply's words is about the chat, not invented."""
    assert make_title("Paris Facts", "What is the capital of France?") == "What is the capital of France"
    assert make_title("Paris Facts", "What is the capital of France?", reply="The capital is Paris.") == "Paris Facts"


def test_the_chats_own_script_is_kept() -> None:
    assert make_title("Столица Франции", "Какая столица Франции?") == "Столица Франции"
    assert clean_title("Capital of Franceとは", source="フランスの首都 capital") == "Capital of Franceとは"


@pytest.mark.parametrize(("message", "expected"), [
    ("Can you help me plan a trip to Japan in spring? I like food and temples.", "Plan a trip to Japan in spring"),
    ("please explain how the TCP three-way handshake works between a client and a server in detail",
     "Explain how the TCP three-way handshake works…"),
    ("```python\nprint(1)\n```\nwhy does this print 1", "Why does this print 1"),
    ("```\nx = 1\n```", "X = 1"),
    ("   \n\n  what   is   RAM  ", "What is RAM"),
    ("supercalifragilisticexpialidocious" * 3, ("supercalifragilisticexpialidocious" * 3)[:47].capitalize() + "…"),
    ("", ""),
])
def test_fallback_is_the_start_of_the_first_message(message: str, expected: str) -> None:
    assert fallback_title(message) == expected
    assert len(fallback_title(message)) <= TITLE_CHARS


def test_the_request_is_short_greedy_and_spare() -> None:
    chat = title_request("What is RAM?" + " and more" * 200, "title-1")
    assert chat.request_id == "title-1" and chat.priority == SPARE_PRIORITY and is_spare(chat.priority)
    assert chat.sampling.temperature == 0.0 and chat.sampling.max_tokens == MAX_TOKENS
    assert not chat.sampling.ignore_eos and chat.sampling.stop == ("\n",)
    roles = [m["role"] for m in chat.messages]
    assert roles == ["system"] + ["user", "assistant"] * len(EXAMPLES) + ["user"]
    asked = chat.messages[-1]["content"]
    assert asked.startswith("Title for: What is RAM?") and len(asked) < 450  # a long message is cut


def test_the_prompt_is_the_same_for_every_chat_up_to_the_message() -> None:
    """So the engine computes the instructions and examples once and reuses them."""
    a, b = title_messages("first chat"), title_messages("second chat")
    assert a[:-1] == b[:-1] and a[-1] != b[-1]


# ----- storage: a provisional title, a generated one, the user's ---------------------------------


def test_a_provisional_title_is_replaced_once_by_the_generated_one(repo) -> None:
    conv = repo.create_conversation()
    assert not conv.title_provisional
    conv = repo.rename(conv.id, "What is RAM", provisional=True)
    assert conv.title_provisional
    titled = repo.set_generated_title(conv.id, "Computer Memory Basics")
    assert titled is not None and (titled.title, titled.title_provisional) == ("Computer Memory Basics", False)
    assert titled.updated_at == conv.updated_at  # not activity: the sidebar's order stays
    assert repo.set_generated_title(conv.id, "Another Title") is None  # never titled twice
    assert repo.get_conversation(conv.id).title == "Computer Memory Basics"


def test_a_title_the_user_set_is_never_replaced(repo) -> None:
    conv = repo.create_conversation()
    repo.rename(conv.id, "What is RAM", provisional=True)
    repo.rename(conv.id, "My RAM notes")  # the user renamed it while the title was being written
    assert repo.set_generated_title(conv.id, "Computer Memory Basics") is None
    assert repo.get_conversation(conv.id).title == "My RAM notes"
    repo.rename(conv.id, "Stand-in", provisional=True)
    repo.update_conversation(conv.id, title="Set in settings")
    assert not repo.get_conversation(conv.id).title_provisional


@pytest.mark.parametrize("message, expected", [
    ("Explain how a **hash map** works, with a short Python example.",
     "Explain how a hash map works, with a short Python example."),
    ("What are the health benefits of green tea?", "What are the health benefits of green tea?"),
    ("# Release notes\n\nSummarize them.", "Release notes"),
    ("Why does `len(x)` fail here?", "Why does len(x) fail here?"),
    ("```python\nprint(1)\n```\nFix   this\tplease", "Fix this please"),
    ("word " * 40, ("word " * 12).strip()),
])
def test_the_stand_in_title_is_the_first_line_without_markdown(message, expected):
    assert stand_in_title(message) == expected
