"""The data folder (app/paths.py): made the user's alone, what older versions left readable
tightened on start (issue 39), and a folder that cannot be made said in one line."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from app.paths import DataFolderError, data_dir, models_dir
from tests.support.filesystems import read_only_folder

pytestmark = pytest.mark.usefixtures("usual_umask")  # 0022: what Chorus makes without asking is 0755/0644


def mode(path: Path) -> str:
    return oct(stat.S_IMODE(path.lstat().st_mode))


def test_a_new_data_folder_its_missing_parents_and_its_models_folder_are_private(tmp_path):
    base = data_dir(tmp_path / "share" / "chorus")
    assert [mode(p) for p in (tmp_path / "share", base, models_dir(base))] == ["0o700"] * 3


def test_what_an_older_version_left_readable_is_tightened_on_start(tmp_path):
    base = tmp_path / "chorus"
    chorus_files = ["chorus.db", "chorus.db-wal", "chorus.db-shm", "chorus.db.bak-0006-20250101T000000",
                    "models/SmolLM2.gguf", "models/owner/repo/model.gguf", "models/.partial/owner/repo/m.incomplete",
                    "kv-cache/0123abcd/a.kvs"]
    for name in chorus_files:
        (base / name).parent.mkdir(parents=True, exist_ok=True)  # 0755
        (base / name).write_bytes(b"x")  # 0644
    elsewhere = tmp_path / "elsewhere.gguf"
    elsewhere.write_bytes(b"a model kept outside")
    (base / "models" / "linked.gguf").symlink_to(elsewhere)
    notes = base / "notes.txt"  # not Chorus's: left as it is
    notes.write_text("mine")
    assert mode(base / "chorus.db") == "0o644" and mode(base / "models" / "owner") == "0o755"

    data_dir(base)

    assert {name: mode(base / name) for name in chorus_files} == {name: "0o600" for name in chorus_files}
    folders = [base, *{(base / name).parent for name in chorus_files}, base / "models" / "owner",
               base / "models" / ".partial", base / "models" / ".partial" / "owner"]
    assert {str(f): mode(f) for f in folders} == {str(f): "0o700" for f in folders}
    assert mode(elsewhere) == mode(notes) == "0o644"  # a link is not followed


def test_a_data_folder_that_cannot_be_made_is_one_line_saying_where_and_what_to_do(tmp_path):
    with read_only_folder(tmp_path / "ro") as ro:
        with pytest.raises(DataFolderError) as info:
            data_dir(ro / "chorus")
    message = str(info.value)
    assert message.startswith(f"the data folder {ro / 'chorus'} cannot be created: ")
    assert "--data-dir" in message and "CHORUS_DATA_DIR" in message and "\n" not in message
