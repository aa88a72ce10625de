"""Chats nothing was sent in (issue 39, defect 4): which count as unused, left out of the
lists that show or export chats, and deleted for good with their system prompts, but those
kept (an open draft's) and every chat used or named."""

from __future__ import annotations

from storage import discard_unused, search


def test_only_untitled_chats_without_a_sent_message_are_unused(db, repo, catalog):
    empty = repo.create_conversation()
    preset = repo.create_conversation()
    repo.add_message(preset.id, "system", "Answer in one line.")
    named = repo.create_conversation(title="Named, nothing sent")
    asked = repo.create_conversation()
    repo.add_message(asked.id, "user", "Why is the sea salty?")
    pane = repo.create_conversation()
    catalog.create_comparison("A or B", [pane.id])
    deleted = repo.create_conversation()
    repo.delete(deleted.id)
    drafted = repo.create_conversation()

    listed = {c.id for c in repo.list_conversations(include_unused=False)}
    assert listed == {named.id, asked.id, pane.id}
    assert {c.id for c in repo.list_conversations()} >= {empty.id, preset.id, drafted.id}, "an open tab finds its own"

    assert sorted(discard_unused(db, keep=[drafted.id])) == [empty.id, preset.id]
    left = {c.id for c in repo.list_conversations(include_deleted=True)}
    assert left == {named.id, asked.id, pane.id, deleted.id, drafted.id}
    assert search(db, "line") == [], "the system prompt went with its chat"
    assert discard_unused(db, only=[asked.id, drafted.id]) == [drafted.id]
