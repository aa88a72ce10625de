"""The JSON chat file: export and import back, round trips and all-or-nothing rejections."""

from __future__ import annotations

import copy
import json
import os
import sqlite3
import threading
from datetime import datetime, timezone
from pathlib import Path

import pytest

from storage import ChatRepository, ImportRejected, MessageStatus, chat_file_format
from storage.catalog import CatalogRepository
from storage.chat_file_format import export_json, import_data, import_file


def counts(db) -> tuple[int, int, int]:
    with sqlite3.connect(db.path) as conn:
        return tuple(
            conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
            for t in ("conversations", "messages", "presets")
        )


def build_tree(db, repo) -> int:
    """A conversation with branches at two levels, every status, stats and a preset;
    the active branch is not the newest one."""
    preset = CatalogRepository(db).create_preset("Terse", "Answer briefly.", {"temperature": 0.2})
    conv = repo.create_conversation(
        "Tree", model_ref="tiny.gguf", preset_id=preset.id, sampling={"top_p": 0.9}
    )
    system = repo.add_message(conv.id, "system", "Answer briefly.")
    user = repo.add_message(conv.id, "user", "Tell me about owls")
    a1 = repo.start_reply(conv.id, model="tiny.gguf")
    repo.finish_reply(a1.id, "Owls are birds.", prompt_tokens=12, completion_tokens=5,
                      ttft_s=0.125, tokens_per_s=88.5)
    a2 = repo.start_reply(conv.id, parent_id=user.id, model="tiny.gguf")
    repo.checkpoint(a2.id, "Owls hoot at ni")
    repo.finish_reply(a2.id, "Owls hoot at ni", status=MessageStatus.INTERRUPTED)
    a3 = repo.start_reply(conv.id, parent_id=user.id, model="other.gguf")
    repo.finish_reply(a3.id, "", status=MessageStatus.ERROR, error_text="context full")
    repo.switch_to(a1.id)
    follow = repo.add_message(conv.id, "user", "And their eyes?")
    a4 = repo.add_message(conv.id, "assistant", "Big, fixed in their sockets.", model="tiny.gguf")
    repo.edit_message(follow.id, "And their ears?")  # a user-level branch
    repo.switch_to(follow.id)  # active: follow -> a4, older than the edited branch
    assert repo.get_conversation(conv.id).active_message_id == a4.id
    repo.update_conversation(conv.id, pinned=True)
    assert system.parent_id is None
    return conv.id


def tree_shape(repo, conv_id: int) -> dict:
    """Everything of a conversation except its ids: parents as positions."""
    conv = repo.get_conversation(conv_id)
    with repo.db.engine.connect() as conn:
        msg_ids = [r[0] for r in conn.exec_driver_sql(
            "SELECT id FROM messages WHERE conversation_id = ? ORDER BY id", (conv_id,))]
    # Positions in tree order (parents first, siblings oldest first): an import renumbers
    # the messages, and a system prompt added later has a larger id than its children.
    messages = chat_file_format.tree_order([repo.get_message(i) for i in msg_ids], key=lambda m: m.id,
                                   parent=lambda m: m.parent_id)
    assert len(messages) == len(msg_ids)
    pos = {m.id: i for i, m in enumerate(messages)}
    path = repo.active_path(conv_id)
    return {
        "title": conv.title,
        "model_ref": conv.model_ref,
        "sampling": conv.sampling,
        "pinned": conv.pinned,
        "archived": conv.archived,
        "created_at": conv.created_at,
        "updated_at": conv.updated_at,
        "active": pos[conv.active_message_id],
        "active_path": [pos[m.id] for m in path.messages],
        "branches": {pos[k]: (v.index, v.count) for k, v in path.branches.items()},
        "messages": [
            (None if m.parent_id is None else pos[m.parent_id], m.role, m.content, m.status,
             m.error_text, m.prompt_tokens, m.completion_tokens, m.ttft_s, m.tokens_per_s,
             m.model, m.created_at)
            for m in messages
        ],
    }


# ----- round trip ----------------------------------------------------------------------


def test_json_round_trip_gives_same_tree(db, repo, other_db):
    conv_id = build_tree(db, repo)
    data = export_json(db)
    assert data["format"] == "chorus-chats" and data["version"] == 2
    text = json.dumps(data, ensure_ascii=False)  # what `chorus export` writes

    result = import_data(other_db, json.loads(text))
    assert result.messages == 8
    (new_id,) = result.conversation_ids
    other_repo = ChatRepository(other_db)
    assert tree_shape(other_repo, new_id) == tree_shape(repo, conv_id)

    new_conv = other_repo.get_conversation(new_id)
    (preset,) = CatalogRepository(other_db).list_presets()
    assert new_conv.preset_id == preset.id
    assert (preset.name, preset.system_prompt, preset.sampling) == ("Terse", "Answer briefly.", {"temperature": 0.2})

    # exporting the imported copy gives the same file apart from ids and export time
    again = export_json(other_db)
    def strip(d):
        return [{**c, "active_message": None, "messages": [
            {**m, "id": None, "parent": None} for m in c["messages"]]} for c in d["conversations"]]

    assert strip(again) == strip(data)


def test_round_trip_into_same_database_reuses_preset_by_name(db, repo):
    conv_id = build_tree(db, repo)
    before = counts(db)
    result = import_data(db, export_json(db, [conv_id]))
    (copy_id,) = result.conversation_ids
    assert copy_id != conv_id
    assert counts(db) == (before[0] + 1, before[1] + 8, before[2])  # no second preset
    assert repo.get_conversation(copy_id).preset_id == repo.get_conversation(conv_id).preset_id
    assert tree_shape(repo, copy_id) == tree_shape(repo, conv_id)


def test_import_file_round_trip(tmp_path, db, repo, other_db):
    conv_id = build_tree(db, repo)
    path = tmp_path / "chats.json"
    path.write_text(json.dumps(export_json(db), indent=1), encoding="utf-8")
    (new_id,) = import_file(other_db, path).conversation_ids
    assert tree_shape(ChatRepository(other_db), new_id) == tree_shape(repo, conv_id)


# ----- every shape of tree (issue 27, defect 1: a backup that did not restore) -------------


def _chat(repo, title="chat"):
    conv = repo.create_conversation(title)
    user = repo.add_message(conv.id, "user", "Tell me about owls")
    reply = repo.add_message(conv.id, "assistant", "Owls are birds.")
    return conv.id, user, reply


def system_prompt_added_later(repo):
    conv_id, _, _ = _chat(repo)
    repo.set_system_prompt(conv_id, "Answer briefly.")  # the root, with a larger id than its children
    repo.add_message(conv_id, "user", "And their eyes?")
    repo.add_message(conv_id, "assistant", "Big.")
    return conv_id


def system_prompt_over_two_roots(repo):
    conv_id, user, _ = _chat(repo)
    repo.edit_message(user.id, "Tell me about cats")  # a second root
    repo.add_message(conv_id, "assistant", "Cats purr.")
    repo.set_system_prompt(conv_id, "Be kind.")  # parent of both roots
    return conv_id


def system_prompt_removed_and_added_again(repo):
    conv_id = system_prompt_added_later(repo)
    repo.set_system_prompt(conv_id, "")
    repo.set_system_prompt(conv_id, "Answer at length.")
    repo.set_system_prompt(conv_id, "Answer in French.")  # changed in place
    return conv_id


def branches_after_a_later_system_prompt(repo):
    conv_id, user, first = _chat(repo)
    repo.set_system_prompt(conv_id, "Answer briefly.")
    for text in ("Owls hoot.", "Owls fly at night."):  # regenerate: siblings of the first reply
        reply = repo.start_reply(conv_id, parent_id=user.id)
        repo.finish_reply(reply.id, text, completion_tokens=3, tokens_per_s=50.0)
    repo.switch_to(first.id)
    return conv_id


def edits_deep_in_the_tree(repo):
    conv_id, _, _ = _chat(repo)
    follow = repo.add_message(conv_id, "user", "And their eyes?")
    repo.add_message(conv_id, "assistant", "Big.")
    repo.set_system_prompt(conv_id, "Answer briefly.")
    edited = repo.edit_message(follow.id, "And their ears?")
    repo.add_message(conv_id, "assistant", "Asymmetric.")
    repo.edit_message(edited.id, "And their feet?")  # a third sibling, left without a reply
    return conv_id


def a_continued_reply(repo):
    conv_id, _, reply = _chat(repo)
    repo.set_system_prompt(conv_id, "Answer briefly.")
    repo.resume_reply(reply.id)
    repo.checkpoint(reply.id, "Owls are birds. They")
    repo.finish_reply(reply.id, "Owls are birds. They hunt at night.", status=MessageStatus.COMPLETE,
                      completion_tokens=9)
    cut = repo.add_message(conv_id, "assistant", "A reply cut at the limit", parent_id=reply.id,
                           status=MessageStatus.INTERRUPTED)
    repo.switch_to(cut.id)
    return conv_id


SHAPES = [system_prompt_added_later, system_prompt_over_two_roots, system_prompt_removed_and_added_again,
          branches_after_a_later_system_prompt, edits_deep_in_the_tree, a_continued_reply]


def _round_trip(db, repo, other_db, conv_id):
    text = json.dumps(export_json(db, [conv_id]), ensure_ascii=False)  # what File -> Export writes
    (new_id,) = import_data(other_db, json.loads(text)).conversation_ids
    return new_id


@pytest.mark.parametrize("shape", SHAPES, ids=lambda f: f.__name__)
def test_every_shape_of_tree_survives_export_and_import(db, repo, other_db, shape):
    conv_id = shape(repo)
    new_id = _round_trip(db, repo, other_db, conv_id)
    other_repo = ChatRepository(other_db)
    assert tree_shape(other_repo, new_id) == tree_shape(repo, conv_id)
    assert [m.content for m in other_repo.active_path(new_id).messages] == \
        [m.content for m in repo.active_path(conv_id).messages]
    # and the copy's own export imports again into the first database
    (third,) = import_data(db, export_json(other_db, [new_id])).conversation_ids
    assert tree_shape(repo, third) == tree_shape(repo, conv_id)


def test_export_lists_every_parent_before_its_children(db, repo):
    conv_id = system_prompt_removed_and_added_again(repo)
    (conv,) = export_json(db, [conv_id])["conversations"]
    seen: set = set()
    for m in conv["messages"]:
        assert m["parent"] is None or m["parent"] in seen
        seen.add(m["id"])
    assert conv["messages"][0]["role"] == "system"


def test_random_histories_survive_export_and_import(db, repo, other_db):
    """Edits, regenerations, continues, switches and system prompt changes in random order."""
    import random

    for seed in range(8):
        rng = random.Random(seed)
        conv_id = repo.create_conversation(f"random {seed}").id
        for step in range(30):
            leafs = [m for m in repo.active_path(conv_id).messages]
            action = rng.choice(["user", "reply", "edit", "regenerate", "continue", "system", "switch"])
            if action == "user" or not leafs:
                repo.add_message(conv_id, "user", f"question {step}")
            elif action == "reply":
                repo.add_message(conv_id, "assistant", f"answer {step}")
            elif action == "edit":
                repo.edit_message(rng.choice(leafs).id, f"edited {step}")
            elif action == "regenerate":
                target = rng.choice(leafs)
                reply = repo.start_reply(conv_id, parent_id=target.parent_id)
                repo.finish_reply(reply.id, f"regenerated {step}")
            elif action == "continue":
                replies = [m for m in leafs if m.role == "assistant"]
                if replies:
                    reply = rng.choice(replies)
                    repo.resume_reply(reply.id)
                    repo.finish_reply(reply.id, reply.content + f" continued {step}")
            elif action == "system":
                repo.set_system_prompt(conv_id, rng.choice(["", f"system {step}"]))
            else:
                repo.switch_to(rng.choice(leafs).id)
        new_id = _round_trip(db, repo, other_db, conv_id)
        assert tree_shape(ChatRepository(other_db), new_id) == tree_shape(repo, conv_id), seed


def test_import_accepts_any_order_whose_parents_are_in_the_file(db, repo, other_db):
    """Files written by older versions list messages in creation order: a system prompt
    added later comes after its children. Any such order gives the same tree."""
    import random

    conv_id = edits_deep_in_the_tree(repo)
    data = export_json(db, [conv_id])
    expected = tree_shape(repo, conv_id)
    messages = data["conversations"][0]["messages"]
    orders = [sorted(messages, key=lambda m: m["id"])]  # creation order, as the old export wrote
    for seed in range(4):  # random orders; siblings keep theirs (it is their branch number)
        shuffled = random.Random(seed).sample(messages, len(messages))
        siblings = {p: iter([m for m in messages if m["parent"] == p]) for p in {m["parent"] for m in messages}}
        orders.append([next(siblings[m["parent"]]) for m in shuffled])
    assert orders[0] != messages  # the system prompt, created last, is no longer first
    for order in orders:
        file = copy.deepcopy(data)
        file["conversations"][0]["messages"] = copy.deepcopy(order)
        (new_id,) = import_data(other_db, file).conversation_ids
        assert tree_shape(ChatRepository(other_db), new_id) == expected


def test_without_an_active_message_the_files_last_message_is_active(db, repo):
    data = minimal()
    data["conversations"][0]["messages"].reverse()  # the reply first, its parent after it
    (conv_id,) = import_data(db, data).conversation_ids
    path = repo.active_path(conv_id)
    assert [m.content for m in path.messages] == ["hello"]  # "hello" is last in the file


def test_export_selects_conversations_and_skips_deleted(db, repo):
    a = repo.create_conversation("a")
    b = repo.create_conversation("b")
    c = repo.create_conversation("c")
    repo.delete(c.id)
    assert [x["title"] for x in export_json(db)["conversations"]] == ["a", "b"]
    assert [x["title"] for x in export_json(db, [b.id])["conversations"]] == ["b"]
    assert export_json(db, [c.id])["conversations"] == []
    assert a.id


def test_streaming_message_imports_as_interrupted(db, repo, other_db):
    conv = repo.create_conversation("live")
    repo.add_message(conv.id, "user", "q")
    reply = repo.start_reply(conv.id)
    repo.checkpoint(reply.id, "half an ans")
    data = export_json(db)
    assert data["conversations"][0]["messages"][1]["status"] == "streaming"
    (new_id,) = import_data(other_db, data).conversation_ids
    msgs = ChatRepository(other_db).active_path(new_id).messages
    assert [m.status for m in msgs] == [MessageStatus.COMPLETE, MessageStatus.INTERRUPTED]
    assert msgs[1].content == "half an ans"
    with sqlite3.connect(other_db.path) as conn:
        assert conn.execute("SELECT count(*) FROM messages WHERE owner_pid IS NOT NULL").fetchone()[0] == 0


def minimal(**conv) -> dict:
    body = {"title": "t", "messages": [
        {"id": "a", "parent": None, "role": "user", "content": "hello"},
        {"id": "b", "parent": "a", "role": "assistant", "content": "hi"},
    ]}
    body.update(conv)
    return {"format": "chorus-chats", "version": 1, "conversations": [body]}


def test_minimal_file_with_defaults(db, repo):
    (conv_id,) = import_data(db, minimal()).conversation_ids
    conv = repo.get_conversation(conv_id)
    path = repo.active_path(conv_id)
    # without active_message the newest message is active
    assert [m.content for m in path.messages] == ["hello", "hi"]
    assert conv.active_message_id == path.messages[-1].id
    assert conv.preset_id is None and conv.sampling == {} and not conv.pinned
    assert all(m.status is MessageStatus.COMPLETE for m in path.messages)


def test_imported_times_are_kept_in_utc(db, repo):
    data = minimal(created_at="2024-05-01T12:00:00+02:00", updated_at="2024-05-01T10:30:00")
    data["conversations"][0]["messages"][0]["created_at"] = "2024-05-01T09:00:00-03:00"
    (conv_id,) = import_data(db, data).conversation_ids
    conv = repo.get_conversation(conv_id)
    assert conv.created_at == datetime(2024, 5, 1, 10, 0, tzinfo=timezone.utc)
    assert conv.updated_at == datetime(2024, 5, 1, 10, 30, tzinfo=timezone.utc)  # naive: UTC
    first = repo.active_path(conv_id).messages[0]
    assert first.created_at == datetime(2024, 5, 1, 12, 0, tzinfo=timezone.utc)


def test_comparisons_travel_as_groups_and_their_settings_follow_new_ids(db, repo, other_db):
    catalog = CatalogRepository(db)
    a, b, lone = (repo.create_conversation(t) for t in ("pane a", "pane b", "lone"))
    for conv in (a, b):
        repo.add_message(conv.id, "user", "same question")
    settings = {"order": [b.id, a.id], "favourite": a.id}
    catalog.create_comparison("A vs B", [a.id, b.id], settings)
    data = json.loads(json.dumps(export_json(db)))
    assert [c["title"] for c in data["comparisons"]] == ["A vs B"]
    by_title = {c["title"]: c for c in data["conversations"]}
    assert by_title["pane a"]["comparison"] == data["comparisons"][0]["id"] and by_title["lone"]["comparison"] is None
    seen = []

    def remap(old_settings, ids):
        seen.append(ids)
        return {"order": [ids[i] for i in old_settings["order"]], "favourite": ids[old_settings["favourite"]]}

    result = import_data(other_db, data, remap=remap)
    other_repo, other_catalog = ChatRepository(other_db), CatalogRepository(other_db)
    [comp] = other_catalog.list_comparisons()
    new_a, new_b = (next(i for i in result.conversation_ids if other_repo.get_conversation(i).title == t)
                    for t in ("pane a", "pane b"))
    assert comp.title == "A vs B" and set(comp.conversation_ids) == {new_a, new_b}
    assert comp.settings == {"order": [new_b, new_a], "favourite": new_a}
    assert seen == [{a.id: new_a, b.id: new_b}]
    assert [c.title for c in other_repo.list_conversations(standalone_only=True)] == ["lone"]
    plain = import_data(other_db, data)  # without a remap the settings come as they were
    assert len(plain.conversation_ids) == 3 and len(other_catalog.list_comparisons()) == 2


# ----- rejections ------------------------------------------------------------------------------


def good_then(bad_conversation: dict) -> dict:
    """A valid conversation followed by a bad one: all or nothing."""
    data = minimal()
    data["conversations"].append(bad_conversation)
    return data


def msg(id, parent=None, role="user", content="x", **extra) -> dict:
    return {"id": id, "parent": parent, "role": role, "content": content, **extra}


BAD = {
    "not an object": ([1, 2], "JSON object"),
    "wrong format": ({"format": "other-app", "version": 1, "conversations": []}, '"format"'),
    "no format": ({"version": 1, "conversations": []}, '"format"'),
    "wrong version": ({"format": "chorus-chats", "version": 3, "conversations": []}, "version 3"),
    "no conversations": ({"format": "chorus-chats", "version": 1}, '"conversations"'),
    "conversation not object": (good_then("oops"), "conversation 2 must be an object"),
    "missing messages": (good_then({"title": "t"}), "conversation 2: messages"),
    "title not text": (good_then({"title": 5, "messages": []}), "title"),
    "sampling not object": (good_then({"messages": [], "sampling": [1]}), "sampling"),
    "preset without name": (good_then({"messages": [], "preset": {"system_prompt": "x"}}), "preset"),
    "bad conversation time": (good_then({"messages": [], "created_at": "yesterday"}), "created_at"),
    "message not object": (good_then({"messages": ["hi"]}), "message 1 must be an object"),
    "missing id": (good_then({"messages": [{"role": "user", "content": "x"}]}), "id"),
    "bool id": (good_then({"messages": [msg(True)]}), "id"),
    "missing role": (good_then({"messages": [{"id": 1, "content": "x"}]}), "role"),
    "bad role": (good_then({"messages": [msg(1, role="wizard")]}), "role must be one of"),
    "missing content": (good_then({"messages": [{"id": 1, "role": "user"}]}), "content"),
    "content not text": (good_then({"messages": [msg(1, content=["x"])]}), "content"),
    "bad status": (good_then({"messages": [msg(1, status="done")]}), "unknown status"),
    "stat not number": (good_then({"messages": [msg(1, prompt_tokens="12")]}), "prompt_tokens"),
    "bad message time": (good_then({"messages": [msg(1, created_at=12)]}), "created_at"),
    "duplicate id": (good_then({"messages": [msg(1), msg(1)]}), "duplicate id 1"),
    "parents in a loop": (good_then({"messages": [msg(1, parent=2), msg(2, parent=1)]}), "parent 2 leads in a loop"),
    "a loop below a root": (good_then({"messages": [msg(1), msg(2, parent=3), msg(3, parent=2)]}),
                            "message 2: parent 3 leads in a loop"),
    "parent missing": (good_then({"messages": [msg(1), msg(2, parent=7)]}), "parent 7"),
    "parent in other conversation": (good_then({"messages": [msg(2, parent="a")]}), "parent 'a'"),
    "self parent": (good_then({"messages": [msg(1, parent=1)]}), "parent 1"),
    "active not a message": (good_then({"messages": [msg(1)], "active_message": 9}), "active_message 9"),
    # malformed values of the right names: refused, not a crash further down
    "parent is a list": (good_then({"messages": [msg(1), msg(2, parent=[1])]}), "parent"),
    "parent is true": (good_then({"messages": [msg(1), msg(2, parent=True)]}), "parent"),
    "status is a list": (good_then({"messages": [msg(1, status=["complete"])]}), "status"),
    "active is a list": (good_then({"messages": [msg(1)], "active_message": [1]}), "active_message"),
    "message model not text": (good_then({"messages": [msg(1, model={"name": "x"})]}), "model"),
    "error not text": (good_then({"messages": [msg(1, error={"code": 1})]}), "error"),
    "conversation model not text": (good_then({"messages": [], "model": ["x"]}), "model"),
    "stat too large": (good_then({"messages": [msg(1, prompt_tokens=10**30)]}), "prompt_tokens"),
    "stat far too large": (good_then({"messages": [msg(1, completion_tokens=10**400)]}), "completion_tokens"),
    "stat infinite": (good_then({"messages": [msg(1, tokens_per_s=float("inf"))]}), "tokens_per_s"),
    "stat not finite": (good_then({"messages": [msg(1, ttft_s=float("nan"))]}), "ttft_s"),
    # issue 25: negative counts and times were accepted
    "negative completion_tokens": (good_then({"messages": [msg(1, completion_tokens=-5)]}),
                                   "completion_tokens must be a number of 0 or more"),
    "negative prompt_tokens": (good_then({"messages": [msg(1, prompt_tokens=-1)]}), "prompt_tokens"),
    "negative ttft_s": (good_then({"messages": [msg(1, ttft_s=-0.5)]}), "ttft_s"),
    "negative tokens_per_s": (good_then({"messages": [msg(1, tokens_per_s=-88.5)]}), "tokens_per_s"),
    "preset sampling not object": (
        good_then({"messages": [], "preset": {"name": "p", "sampling": [1]}}), "preset"),
    "comparison not in the file": (good_then({"messages": [], "comparison": 3}), "comparison 3 is not in the file"),
    "comparisons not a list": ({**minimal(), "comparisons": {"id": 1}}, '"comparisons" must be a list'),
    "comparison without id": ({**minimal(), "comparisons": [{"title": "t"}]}, "comparison 1: id"),
    "duplicate comparison": ({**minimal(), "comparisons": [{"id": 1}, {"id": 1}]}, "comparison 2: id"),
    "comparison settings not object": ({**minimal(), "comparisons": [{"id": 1, "settings": []}]}, "settings"),
    "duplicate conversation id": (
        {**minimal(), "conversations": [{"id": 4, "messages": []}, {"id": 4, "messages": []}]}, "conversation 2: id"),
    # issue 13: these ended in tracebacks (OverflowError; UnicodeEncodeError after 13 s)
    "year 1 east of UTC": (good_then({"messages": [], "created_at": "0001-01-01T00:30:00+01:00"}),
                           "created_at '0001-01-01T00:30:00+01:00' is out of range in UTC"),
    "year 9999 west of UTC": (good_then({"messages": [msg(1, created_at="9999-12-31T23:30:00-01:00")]}),
                              "message 1: created_at '9999-12-31T23:30:00-01:00' is out of range"),
    "comparison time out of range": (
        {**minimal(), "comparisons": [{"id": 1, "created_at": "0001-01-01T00:00:00+00:01"}]}, "out of range in UTC"),
    "lone surrogate in content": (good_then({"messages": [msg(1), msg(2, parent=1, content="owl \ud800 tail")]}),
                                  "conversation 2, message 2 has text that is not valid Unicode"),
    "lone surrogate in a title": (good_then({"title": "\udfff", "messages": []}),
                                  "conversation 2 has text that is not valid Unicode (a lone surrogate, '\\udfff')"),
    "lone surrogate in a settings key": (
        {**minimal(), "comparisons": [{"id": 1, "settings": {"\ud83d": 1}}]}, "comparison 1 has text"),
}


@pytest.mark.parametrize("name", list(BAD))
def test_rejected_data_writes_nothing(db, repo, name):
    build_tree(db, repo)
    before = counts(db)
    data, reason = BAD[name]
    with pytest.raises(ImportRejected) as info:
        import_data(db, copy.deepcopy(data))
    message = str(info.value)
    assert message.startswith("import rejected, nothing was written: ")
    assert reason in message
    assert "\n" not in message
    assert counts(db) == before


def test_the_good_conversation_alone_would_import(db):
    """Guards the rejection tests: their first conversation is valid on its own."""
    before = counts(db)
    import_data(db, minimal())
    assert counts(db) == (before[0] + 1, before[1] + 2, before[2])


@pytest.mark.parametrize(
    "content, reason",
    [
        (b"this is not json", "not valid JSON"),
        (b"", "not valid JSON"),
        (b"\xff\xfe\x00garbage", "not UTF-8"),
        (b"[1, 2, 3]", "JSON object"),
    ],
)
def test_rejected_files(tmp_path, db, repo, content, reason):
    build_tree(db, repo)
    before = counts(db)
    path = tmp_path / "in.json"
    path.write_bytes(content)
    with pytest.raises(ImportRejected, match=reason):
        import_file(db, path)
    assert counts(db) == before


def test_a_file_nested_100000_deep_is_refused_in_one_line(tmp_path, db, repo):
    build_tree(db, repo)
    before = counts(db)
    path = tmp_path / "deep.json"
    path.write_text('{"format": "chorus-chats", "version": 1, "conversations": ['
                    + "[" * 100_000 + "]" * 100_000 + "]}", encoding="utf-8")
    with pytest.raises(ImportRejected) as info:
        import_file(db, path)
    assert str(info.value) == "deep.json is nested too deeply to be a Chorus export"
    assert counts(db) == before


def test_a_lone_surrogate_escaped_in_a_file_is_refused_before_writing(tmp_path, db, repo, monkeypatch):
    """The check is up front: the writer is never reached (it once failed after 13 s)."""
    data = minimal()
    data["conversations"][0]["messages"][1]["content"] = "owl \ud800"
    path = tmp_path / "surrogate.json"
    path.write_text(json.dumps(data), encoding="utf-8")  # ASCII file: the escape \\ud800
    assert "\\ud800" in path.read_text()
    monkeypatch.setattr(chat_file_format, "write_import", lambda *a: pytest.fail("the writer was reached"))
    with pytest.raises(ImportRejected, match="conversation 1, message 2 has text that is not valid Unicode"):
        import_file(db, path)


def test_truncated_file_is_rejected(tmp_path, db, repo, other_db):
    build_tree(db, repo)
    text = json.dumps(export_json(db), indent=1)
    before = counts(other_db)
    path = tmp_path / "cut.json"
    for cut in (len(text) // 3, len(text) // 2, len(text) - 2):
        path.write_text(text[:cut], encoding="utf-8")
        with pytest.raises(ImportRejected, match="not valid JSON .*truncated"):
            import_file(other_db, path)
    assert counts(other_db) == before


def test_missing_file_is_rejected(tmp_path, db):
    with pytest.raises(ImportRejected, match="cannot read"):
        import_file(db, tmp_path / "nope.json")


def test_oversized_file_is_rejected(tmp_path, db, repo, monkeypatch):
    build_tree(db, repo)
    text = json.dumps(export_json(db))
    path = tmp_path / "big.json"
    path.write_text(text, encoding="utf-8")
    before = counts(db)
    monkeypatch.setattr(chat_file_format, "MAX_IMPORT_BYTES", len(text.encode()) - 1)
    with pytest.raises(ImportRejected, match="the limit is"):
        import_file(db, path)
    assert counts(db) == before
    monkeypatch.setattr(chat_file_format, "MAX_IMPORT_BYTES", len(text.encode()))
    import_file(db, path)  # exactly at the limit is fine
    assert counts(db)[1] == before[1] + 8


def test_a_pipe_is_counted_while_read_not_trusted_for_its_size(tmp_path, db, repo, monkeypatch):
    """Issue 25: the limit came from stat(), which says 0 bytes for a pipe or a device
    (/dev/zero grew without bound). A pipe that goes on past the limit is refused, having
    read only up to the limit."""
    build_tree(db, repo)
    before = counts(db)
    monkeypatch.setattr(chat_file_format, "MAX_IMPORT_BYTES", 100_000)
    read_end, write_end = os.pipe()
    writer = threading.Thread(target=_write_then_close, args=(write_end, b" " * 300_000))
    writer.start()
    try:
        with pytest.raises(ImportRejected, match="more than 100,000 bytes"):
            import_file(db, Path(f"/dev/fd/{read_end}"))
    finally:
        os.close(read_end)  # the writer, if still writing, gets a broken pipe and ends
        writer.join()
    assert counts(db) == before


def _write_then_close(fd: int, data: bytes) -> None:
    view = memoryview(data)
    try:
        while view:
            view = view[os.write(fd, view):]
    except BrokenPipeError:  # the reader stopped at the limit: what the test wants
        pass
    finally:
        os.close(fd)


@pytest.mark.parametrize("what", ["a folder", "an I/O error"])
def test_a_file_that_cannot_be_read_is_refused_in_one_line(tmp_path, db, what):
    """Issue 25: IsADirectoryError (or any OSError from reading) escaped as a traceback.
    /proc/self/mem opens but fails to read at offset 0 (EIO), as a failing disk would."""
    path = tmp_path if what == "a folder" else Path("/proc/self/mem")
    with pytest.raises(ImportRejected) as info:
        import_file(db, path)
    message = str(info.value)
    assert str(path) in message and "\n" not in message
    assert ("folder" in message) if what == "a folder" else ("Input/output error" in message)


def test_too_many_messages_is_rejected(db, repo, monkeypatch):
    build_tree(db, repo)
    before = counts(db)
    data = minimal()  # 2 messages
    data["conversations"].append({"title": "second", "messages": [msg(1), msg(2, parent=1)]})
    monkeypatch.setattr(chat_file_format, "MAX_MESSAGES", 3)
    with pytest.raises(ImportRejected, match="more than 3 messages"):
        import_data(db, data)
    assert counts(db) == before
    monkeypatch.setattr(chat_file_format, "MAX_MESSAGES", 4)
    assert import_data(db, data).messages == 4


def test_flags_must_be_booleans_and_a_byte_order_mark_is_accepted(tmp_path):
    from storage import open_database
    from storage.chat_file_format import import_data, import_file
    from storage.errors import ImportRejected

    db = open_database(tmp_path / "flags.db")
    bad = {"format": "chorus-chats", "version": 1,
           "conversations": [{"title": "x", "pinned": "false", "messages": []}]}
    with pytest.raises(ImportRejected, match="pinned must be true or false"):
        import_data(db, bad)
    good = dict(bad, conversations=[{"title": "x", "pinned": True, "messages": []}])
    path = tmp_path / "bom.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(good).encode())
    assert len(import_file(db, path).conversation_ids) == 1
    db.close()
