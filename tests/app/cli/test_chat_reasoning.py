"""`chorus chat` continues a saved chat without its replies' reasoning in the prompt (issue
27): the stored message keeps it, the history sent to the model carries the answer alone."""

from app.cli.chat import Conversation
from app.documents import GuessedTokens
from inference import SamplingParams
from tests.app.chats.test_reasoning import QWEN3


def test_a_saved_chat_comes_back_with_its_replies_answers_only(repo):
    conv = repo.create_conversation(title="sums")
    repo.add_message(conv.id, "user", "What is 2+2?")
    reply = repo.start_reply(conv.id, model="Qwen3-0.6B")
    repo.finish_reply(reply.id, "".join(QWEN3), completion_tokens=27)
    chat = Conversation(repo, "Qwen3-0.6B")
    chat.load(conv.id)
    assert chat.message_count() == 2
    asked = chat.saved.send("And 3+3?")
    prompt = chat.prompts(lambda: (GuessedTokens(), None)).prompt(asked.path, asked.reply, SamplingParams())
    assert prompt.messages == ({"role": "user", "content": "What is 2+2?"},
                               {"role": "assistant", "content": "2 + 2 = **4**."},
                               {"role": "user", "content": "And 3+3?"})
    assert repo.active_path(conv.id).messages[1].content == "".join(QWEN3)  # stored whole
    assert asked.reply.model == "Qwen3-0.6B"
