"""Chats as Markdown (app/chats/markdown_export.py): the active branch in order, with its
marks, and several chats in one document."""

from __future__ import annotations

from app.chats.markdown_export import export_markdown
from storage import MessageStatus, ToolCallRecord, ToolResultRecord


def test_markdown_has_active_branch_in_order_with_marks(db, repo):
    conv = repo.create_conversation("Owl chat", model_ref="tiny.gguf")
    user = repo.add_message(conv.id, "user", "Tell me about owls")
    good = repo.add_message(conv.id, "assistant", "OLD ANSWER owls are birds", model="tiny.gguf")
    cut = repo.start_reply(conv.id, parent_id=user.id, model="tiny.gguf")
    repo.finish_reply(cut.id, "They hoot at ni", status=MessageStatus.INTERRUPTED, tokens_per_s=50.0)
    md = export_markdown(repo, [conv.id])
    assert md.startswith("# Owl chat\n")
    assert "model: tiny.gguf" in md
    assert "OLD ANSWER" not in md  # not on the active branch
    q = md.index("Tell me about owls")
    a = md.index("They hoot at ni")
    assert q < a
    assert md.index("### You") < q < md.index("### Assistant") < a
    assert "### Assistant · tiny.gguf · 50.0 tok/s" in md
    assert "_(interrupted)_" in md[a:]
    assert "_(branch 2 of 2)_" in md[a:]

    repo.switch_to(good.id)
    err = repo.add_message(conv.id, "user", "and?")
    failed = repo.start_reply(conv.id)
    repo.finish_reply(failed.id, "", status=MessageStatus.ERROR, error_text="model crashed")
    md = export_markdown(repo, [conv.id])
    assert "OLD ANSWER" in md and "They hoot" not in md
    assert "_(branch 1 of 2)_" in md
    assert md.index("OLD ANSWER") < md.index("and?") < md.index("_(error: model crashed)_")
    assert "_(interrupted)_" not in md
    assert err.id


def test_markdown_of_several_conversations(db, repo):
    a = repo.create_conversation("")
    repo.add_message(a.id, "user", "first chat")
    b = repo.create_conversation("Second")
    repo.add_message(b.id, "user", "second chat")
    md = export_markdown(repo, [a.id, b.id])
    assert md.count("\n---\n") == 1
    assert md.index("# Untitled chat") < md.index("first chat") < md.index("# Second") < md.index("second chat")
    assert md.endswith("\n")


def test_markdown_shows_tool_calls_and_their_results(db, repo):
    conv = repo.create_conversation("Time chat")
    repo.add_message(conv.id, "user", "What time is it?")
    repo.add_message(conv.id, "assistant", "", tool_calls=[ToolCallRecord("c1", "get_time", '{"tz": "UTC"}')])
    repo.add_message(conv.id, "tool", "12:00", tool_result=ToolResultRecord("c1", "get_time", duration_s=0.25))
    repo.add_message(conv.id, "assistant", "It is noon.")
    md = export_markdown(repo, [conv.id])
    assert 'Called `get_time({"tz": "UTC"})`' in md
    assert "### Tool · get_time · 0.25 s\n\n```\n12:00\n```" in md
    assert md.index("Called") < md.index("12:00") < md.index("It is noon.")
