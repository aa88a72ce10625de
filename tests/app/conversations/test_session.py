"""ConversationSession on a real SQLite file: the rows each use-case writes and the branch
it hands back to stream a reply into."""

from __future__ import annotations

import pytest

from app.chats.titles import stand_in_title
from app.conversations import ConversationSession
from storage import MessageStatus, NewDocument


def session(repo, title: str = "") -> ConversationSession:
    conv = repo.create_conversation(title=title)
    return ConversationSession(repo, conv.id, lambda c: f"model-of-{c.id}")


def answered(repo, s: ConversationSession, text: str, answer: str):
    started = s.send(text)
    repo.finish_reply(started.reply.id, answer)
    return started


def test_send_stores_the_message_a_stand_in_title_and_an_empty_reply(repo):
    s = session(repo)
    started = s.send("What is the capital of France, and why?")

    roles = [(m.role, m.content) for m in started.path.messages]
    assert roles == [("user", "What is the capital of France, and why?"), ("assistant", "")]
    assert started.path.messages[-1].id == started.reply.id
    assert started.reply.status is MessageStatus.STREAMING
    assert started.reply.model == f"model-of-{s.conversation_id}"
    conv = repo.get_conversation(s.conversation_id)
    assert conv.title == stand_in_title("What is the capital of France, and why?")
    assert conv.title_provisional


def test_send_keeps_a_title_the_chat_already_has(repo):
    s = session(repo, title="Geography")
    s.send("Capital of Peru?")
    conv = repo.get_conversation(s.conversation_id)
    assert (conv.title, conv.title_provisional) == ("Geography", False)


def test_send_attaches_its_documents_to_the_user_message(repo):
    s = session(repo)
    doc = NewDocument(sha256="ab" * 32, name="notes.txt", mime="text/plain", size_bytes=5, text="hello",
                      pages=None, chunks=())
    started = s.send("Summarise", [doc])
    user = started.path.messages[0]
    assert [a.name for a in started.path.attachments[user.id]] == ["notes.txt"]


def test_regenerate_answers_the_same_question_on_a_new_branch(repo):
    s = session(repo)
    first = answered(repo, s, "Hi", "Hello!")
    again = s.regenerate()

    assert again is not None
    assert again.reply.id != first.reply.id
    assert again.reply.parent_id == first.path.messages[0].id
    assert [m.content for m in again.path.messages] == ["Hi", ""]
    assert again.path.position(again.reply.id).count == 2  # the first answer stays a branch


def test_regenerate_beside_an_earlier_reply_drops_what_followed_it(repo):
    s = session(repo)
    first = answered(repo, s, "One", "1")
    answered(repo, s, "Two", "2")
    again = s.regenerate(first.reply.id)

    assert again is not None
    assert [m.content for m in again.path.messages] == ["One", ""]


def test_regenerate_has_nothing_to_answer_in_an_empty_chat_or_for_an_unknown_reply(repo):
    s = session(repo)
    assert s.regenerate() is None
    answered(repo, s, "Hi", "Hello")
    assert s.regenerate(message_id=10_000) is None


def test_edit_makes_a_sibling_question_and_a_reply_to_it(repo):
    s = session(repo)
    first = answered(repo, s, "Capital of Spain?", "Madrid")
    edited = s.edit(first.path.messages[0].id, "Capital of Portugal?")

    assert [m.content for m in edited.path.messages] == ["Capital of Portugal?", ""]
    assert edited.path.position(edited.path.messages[0].id).count == 2
    assert edited.reply.model == f"model-of-{s.conversation_id}"


def test_continue_reply_resumes_the_last_complete_reply(repo):
    s = session(repo)
    first = answered(repo, s, "Count to ten", "1 2 3")
    resumed = s.continue_reply()

    assert resumed is not None
    assert resumed.reply.id == first.reply.id  # the same message grows
    assert resumed.reply.status is MessageStatus.STREAMING
    assert resumed.reply.content == "1 2 3"
    assert len(resumed.path.messages) == 2


@pytest.mark.parametrize("ending", ["nothing", "question", "streaming", "stopped empty", "error"])
def test_continue_reply_needs_a_reply_that_ended_with_text_at_the_end(repo, ending):
    s = session(repo)
    if ending == "question":
        repo.add_message(s.conversation_id, "user", "Hi")
    elif ending == "streaming":
        s.send("Hi")
    elif ending == "stopped empty":
        repo.finish_reply(s.send("Hi").reply.id, "", status=MessageStatus.STOPPED)
    elif ending == "error":
        repo.finish_reply(s.send("Hi").reply.id, "half", status=MessageStatus.ERROR)
    assert s.continue_reply() is None


@pytest.mark.parametrize("status", [MessageStatus.STOPPED, MessageStatus.INTERRUPTED])
def test_a_reply_the_user_stopped_or_a_crash_cut_can_be_continued(repo, status):
    """Issue 39's look: a stopped reply offers Continue, as one cut at the token limit does."""
    s = session(repo)
    reply = s.send("Count to ten").reply
    repo.finish_reply(reply.id, "1 2 3", status=status)
    resumed = s.continue_reply()
    assert resumed is not None and resumed.reply.id == reply.id
    assert (resumed.reply.status, resumed.reply.content) == (MessageStatus.STREAMING, "1 2 3")


def test_branch_copies_the_chat_down_to_a_message(repo):
    s = session(repo, title="Trip")
    first = answered(repo, s, "Where?", "Lisbon")
    answered(repo, s, "When?", "May")
    copy = s.branch(first.reply.id)

    assert copy.id != s.conversation_id
    assert copy.title == "Trip (branch)"
    assert [m.content for m in repo.active_path(copy.id).messages] == ["Where?", "Lisbon"]


def test_a_panes_first_send_writes_its_system_prompt_first_and_only_then(repo):
    s = session(repo)
    first = s.send("Hi", system="Be brief.")
    assert [(m.role, m.content) for m in first.path.messages] == [("system", "Be brief."), ("user", "Hi"),
                                                                  ("assistant", "")]
    repo.finish_reply(first.reply.id, "Hello")
    second = s.send("Again", system="Be brief.")
    assert [m.role for m in second.path.messages] == ["system", "user", "assistant", "user", "assistant"]


def test_ask_stores_the_message_alone_and_reply_after_starts_the_turn_under_any_message(repo):
    s = session(repo)
    user = s.ask("What time is it?")
    assert [m.id for m in repo.active_path(s.conversation_id).messages] == [user.id]
    started = s.reply_after(user.id)
    assert started.reply.parent_id == user.id and started.path.messages[-1].id == started.reply.id
    assert started.reply.model == f"model-of-{s.conversation_id}"


def test_open_records_the_chats_model_and_its_replies_label_apart(repo):
    s, user = ConversationSession.open(repo, "Hello there", system="Be kind.", model="remote:http://x|m", label="m")
    assert repo.get_conversation(s.conversation_id).model_ref == "remote:http://x|m"
    assert [m.role for m in repo.active_path(s.conversation_id).messages] == ["system", "user"]
    assert s.reply_after(user.id).reply.model == "m"


def test_create_makes_an_empty_chat_like_another_opening_with_its_system_prompt(repo):
    source = repo.create_conversation(title="src", model_ref="a.gguf", sampling={"temperature": 0.1})
    made = ConversationSession.create(repo, lambda c: "a", "One question", like=source, system="Terse.")
    conv = repo.get_conversation(made.conversation_id)
    assert (conv.title, conv.model_ref, conv.sampling) == ("One question", "a.gguf", {"temperature": 0.1})
    assert [(m.role, m.content) for m in repo.active_path(conv.id).messages] == [("system", "Terse.")]


def test_open_conversations_keep_one_session_a_chat_with_its_state(repo):
    from app.conversations import OpenConversations

    chats = OpenConversations(repo, lambda c: "m")
    conv = repo.create_conversation(title="t")
    s = chats.session(conv.id)
    assert chats.session(conv.id) is s and chats.get(conv.id + 1) is None
    s.waiting_on = "running add"
    assert chats.waiting() == {conv.id: "running add"}
    s.waiting_on = None
    assert chats.waiting() == {}
