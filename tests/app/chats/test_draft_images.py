"""Pasted images kept with a draft (app/chats/draft_images.py): written private, once, and
removed when no draft refers to them; on a real folder."""

from __future__ import annotations

from app.chats.draft_images import keep_pasted

PNG = b"\x89PNG\r\n\x1a\n" + b"pixels"


def test_each_chats_images_are_written_private_and_returned_by_chat(tmp_path):
    kept = keep_pasted(tmp_path / "drafts", {7: [("pasted image 1.png", PNG), ("pasted image 2.png", PNG + b"2")],
                                             8: []})
    assert [p.name for p in kept[7]] == ["pasted image 1.png", "pasted image 2.png"] and kept[8] == []
    assert kept[7][1].read_bytes() == PNG + b"2"
    assert kept[7][0].stat().st_mode & 0o777 == 0o600 and kept[7][0].parent.stat().st_mode & 0o777 == 0o700
    assert not (tmp_path / "drafts" / "8").exists()


def test_what_no_draft_refers_to_is_removed_and_a_referenced_file_stays(tmp_path):
    folder = tmp_path / "drafts"
    first = keep_pasted(folder, {7: [("a.png", PNG)], 9: [("b.png", PNG)]})
    keep_pasted(folder, {7: []}, referenced=[first[7][0]])  # 7's image restored as a file chip; 9 sent
    assert first[7][0].is_file() and not (folder / "9").exists()
    keep_pasted(folder, {})
    assert list(folder.iterdir()) == []


def test_a_chip_name_cannot_leave_the_chats_folder(tmp_path):
    kept = keep_pasted(tmp_path / "drafts", {1: [("../../escape.png", PNG), (".hidden.png", PNG)]})
    assert [p.relative_to(tmp_path / "drafts" / "1").as_posix() for p in kept[1]] == ["escape.png", "hidden.png"]
