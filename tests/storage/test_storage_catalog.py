"""Presets, model profiles, comparisons and settings in a real SQLite file."""

from __future__ import annotations

import sqlite3

import pytest

from storage import NotFoundError, StorageError, open_database
from storage.catalog import CatalogRepository


def count(db, table: str) -> int:
    with sqlite3.connect(db.path) as conn:
        return conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]


# ----- presets -----------------------------------------------------------------------------


def test_create_and_list_presets(catalog):
    b = catalog.create_preset("Brief", "Answer briefly.", {"temperature": 0.2})
    a = catalog.create_preset("Archivist", "Quote sources.")
    assert (b.name, b.system_prompt, b.sampling) == ("Brief", "Answer briefly.", {"temperature": 0.2})
    assert a.sampling == {}
    assert [p.name for p in catalog.list_presets()] == ["Archivist", "Brief"]  # by name
    got = catalog.get_preset(b.id)
    expected = (b.id, "Brief", "Answer briefly.", {"temperature": 0.2})
    assert (got.id, got.name, got.system_prompt, got.sampling) == expected


def test_duplicate_or_empty_preset_name_is_refused(catalog, db):
    catalog.create_preset("Brief", "one")
    with pytest.raises(StorageError, match="already exists"):
        catalog.create_preset("Brief", "two")
    with pytest.raises(StorageError, match="name"):
        catalog.create_preset("   ", "nameless")
    assert count(db, "presets") == 1
    assert catalog.list_presets()[0].system_prompt == "one"


def test_update_preset(catalog):
    p = catalog.create_preset("Brief", "Answer briefly.", {"temperature": 0.2})
    updated = catalog.update_preset(p.id, name="Short", sampling={"top_k": 3})
    assert (updated.name, updated.system_prompt, updated.sampling) == ("Short", "Answer briefly.", {"top_k": 3})
    catalog.update_preset(p.id, system_prompt="Be short.")
    got = catalog.get_preset(p.id)
    assert (got.name, got.system_prompt, got.sampling) == ("Short", "Be short.", {"top_k": 3})
    with pytest.raises(StorageError, match="colour"):
        catalog.update_preset(p.id, colour="red")
    with pytest.raises(NotFoundError):
        catalog.update_preset(999, name="x")
    assert catalog.get_preset(p.id).name == "Short"


def test_update_preset_refuses_unknown_field_without_partial_write(catalog):
    p = catalog.create_preset("Brief", "Answer briefly.")
    with pytest.raises(StorageError):
        catalog.update_preset(p.id, name="Renamed", colour="red")
    assert catalog.get_preset(p.id).name == "Brief"  # the transaction rolled back


def test_delete_preset_keeps_conversations(catalog, repo, db):
    p = catalog.create_preset("Brief", "Answer briefly.")
    keep = catalog.create_preset("Other", "x")
    c1 = repo.create_conversation("uses it", preset_id=p.id)
    c2 = repo.create_conversation("uses other", preset_id=keep.id)
    repo.add_message(c1.id, "user", "hello")

    catalog.delete_preset(p.id)
    assert [x.name for x in catalog.list_presets()] == ["Other"]
    with pytest.raises(NotFoundError):
        catalog.get_preset(p.id)
    assert repo.get_conversation(c1.id).preset_id is None
    assert [m.content for m in repo.active_path(c1.id).messages] == ["hello"]
    assert repo.get_conversation(c2.id).preset_id == keep.id
    with pytest.raises(NotFoundError):
        catalog.delete_preset(p.id)


# ----- comparisons -------------------------------------------------------------------------


def test_comparison_with_conversations(catalog, repo):
    a = repo.create_conversation("model A")
    b = repo.create_conversation("model B")
    lone = repo.create_conversation("not compared")
    comp = catalog.create_comparison("A vs B", [a.id, b.id], {"prompt": "hi"})
    assert comp.conversation_ids == (a.id, b.id)
    assert comp.settings == {"prompt": "hi"}
    got = catalog.get_comparison(comp.id)
    expected = (comp.id, "A vs B", {"prompt": "hi"}, (a.id, b.id))
    assert (got.id, got.title, got.settings, got.conversation_ids) == expected
    assert repo.get_conversation(a.id).comparison_id == comp.id
    assert repo.get_conversation(lone.id).comparison_id is None
    with pytest.raises(NotFoundError):
        catalog.get_comparison(comp.id + 100)


def test_comparison_with_unknown_conversation_writes_nothing(catalog, repo, db):
    a = repo.create_conversation("model A")
    with pytest.raises(NotFoundError):
        catalog.create_comparison("broken", [a.id, 999])
    assert count(db, "comparisons") == 0
    assert repo.get_conversation(a.id).comparison_id is None


def test_comparisons_list_newest_first_and_hide_fully_deleted_ones(catalog, repo):
    a, b, c, d = (repo.create_conversation(t) for t in "abcd")
    first = catalog.create_comparison("first", [a.id, b.id])
    second = catalog.create_comparison("second", [c.id, d.id])
    repo.add_message(a.id, "user", "newer activity in the first comparison")
    listed = catalog.list_comparisons()
    assert [x.id for x in listed] == [first.id, second.id]
    assert listed[0].conversation_ids == (a.id, b.id)
    assert listed[0].updated_at >= listed[1].updated_at
    repo.delete(c.id)
    assert [x.conversation_ids for x in catalog.list_comparisons()] == [(a.id, b.id), (d.id,)]
    repo.delete(d.id)
    assert [x.id for x in catalog.list_comparisons()] == [first.id]
    assert [x.id for x in repo.list_conversations(standalone_only=True)] == []
    lone = repo.create_conversation("lone")
    assert [x.id for x in repo.list_conversations(standalone_only=True)] == [lone.id]


def test_update_comparison_settings_and_title(catalog, repo):
    a = repo.create_conversation("a")
    comp = catalog.create_comparison("A", [a.id], {"blind": False})
    catalog.update_comparison(comp.id, settings={"blind": True, "favourite": a.id})
    catalog.update_comparison(comp.id, title="renamed")
    got = catalog.get_comparison(comp.id)
    assert (got.title, got.settings) == ("renamed", {"blind": True, "favourite": a.id})
    with pytest.raises(NotFoundError):
        catalog.update_comparison(comp.id + 1, title="x")


# ----- settings ------------------------------------------------------------------------------


def test_settings_json_values_and_defaults(catalog, tmp_path, db):
    assert catalog.get_setting("missing") is None
    assert catalog.get_setting("missing", {"x": 1}) == {"x": 1}
    values = {
        "theme": "dark",
        "font_size": 13,
        "ratio": 0.5,
        "enabled": True,
        "layout": {"columns": [1, 2], "nested": {"a": None}},
        "recent": ["a", "ü"],
    }
    for key, value in values.items():
        catalog.set_setting(key, value)
    for key, value in values.items():
        assert catalog.get_setting(key, "default") == value
    assert catalog.get_setting("enabled") is True
    catalog.set_setting("theme", "light")  # overwrite, not a second row
    assert catalog.get_setting("theme") == "light"
    assert count(db, "settings") == len(values)
    catalog.set_setting("nothing", None)
    assert catalog.get_setting("nothing", "default") is None  # stored null is not missing

    # persisted in the file
    db.close()
    reopened = open_database(db.path)
    try:
        assert CatalogRepository(reopened).get_setting("layout") == values["layout"]
    finally:
        reopened.close()


def test_catalog_times_are_utc_aware_when_read_back(catalog):
    """Like every record of the package: the same value whether just made or read back."""
    p = catalog.create_preset("Brief", "x")
    c = catalog.create_comparison("A vs B", [])
    assert catalog.get_preset(p.id).created_at == p.created_at
    assert catalog.get_comparison(c.id).created_at == c.created_at
    for record in (catalog.get_preset(p.id), catalog.get_comparison(c.id)):
        assert record.created_at.utcoffset().total_seconds() == 0
