"""The model library on a real SQLite file and real files: entries, recording, per-model
defaults (validated, applied under explicit settings), removing."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from app.cli.engine_args import settings_from_args
from app.cli.main import parse
from app.models import catalog as model_catalog
from app.models.gguf_files import is_later_part, parts_of, size_on_disk
from app.models.library import (
    LibraryError,
    ModelDefaults,
    ModelInUse,
    ModelLibrary,
    apply_defaults,
    open_library,
)
from inference.params import LoadSettings
from storage import open_database
from tests.support.databases import seed_database
from tests.support.model_files import SMOL, TEMPLATE, fake_gguf


@pytest.fixture
def models(tmp_path) -> Path:
    path = tmp_path / "data" / "models"
    path.mkdir(parents=True)
    return path


@pytest.fixture
def library(tmp_path, models):
    db = open_database(seed_database(tmp_path / "data" / "chorus.db"))
    yield ModelLibrary(db, models)
    db.close()


def by_name(library: ModelLibrary) -> dict:
    return {e.name: e for e in library.entries()}


# ----- split files ---------------------------------------------------------------------------


def test_parts_of_a_split_model_and_of_a_single_file(tmp_path):
    first = tmp_path / "Big-Q4_K_M-00001-of-00003.gguf"
    assert [p.name for p in parts_of(first)] == [
        "Big-Q4_K_M-00001-of-00003.gguf", "Big-Q4_K_M-00002-of-00003.gguf", "Big-Q4_K_M-00003-of-00003.gguf"]
    assert parts_of(tmp_path / "one.gguf") == [tmp_path / "one.gguf"]
    assert is_later_part(tmp_path / "Big-Q4_K_M-00002-of-00003.gguf") and not is_later_part(first)
    fake_gguf(first, 100)
    fake_gguf(tmp_path / "Big-Q4_K_M-00003-of-00003.gguf", 50)
    assert size_on_disk(first) == 150  # the missing second part counts as nothing


# ----- entries ---------------------------------------------------------------------------------


def test_entries_list_every_kind_of_model_with_its_size(library, models, tmp_path):
    fake_gguf(models / SMOL.filename, 1000)  # an installed catalog model
    first = fake_gguf(models / "Big-00001-of-00002.gguf", 300)
    fake_gguf(models / "Big-00002-of-00002.gguf", 200)
    library.record_download(first, "org/Big-GGUF", "ab" * 32)
    own = fake_gguf(tmp_path / "elsewhere" / "mine.gguf", 70)
    library.record_local(own)
    fake_gguf(models / "dropped-in.gguf", 40)  # put there by hand: listed, never recorded

    entries = by_name(library)
    assert sorted(entries) == ["Big-00001-of-00002.gguf", "dropped-in.gguf", "mine.gguf", "smollm2-135m"]
    smol, big, mine, dropped = (entries[n] for n in ("smollm2-135m", "Big-00001-of-00002.gguf", "mine.gguf",
                                                      "dropped-in.gguf"))
    assert (smol.source, smol.size_bytes, smol.installed, smol.path) == ("catalog", 1000, True, models / SMOL.filename)
    assert (big.source, big.hub_repo, big.size_bytes, big.installed) == ("hub", "org/Big-GGUF", 500, True)
    assert (mine.source, mine.size_bytes, mine.path) == ("local", 70, own)
    assert (dropped.source, dropped.size_bytes, dropped.installed) == ("local", 40, True)
    assert all(e.last_used is None and e.defaults == ModelDefaults() for e in entries.values())


def test_a_catalog_model_not_installed_is_not_an_entry(library):
    assert library.entries() == []
    with pytest.raises(LibraryError, match="not in the library"):
        library.remove("gemma3-270m", set())


def test_vanished_files_are_entries_not_installed(library, models, tmp_path):
    first = fake_gguf(models / "Big-00001-of-00002.gguf", 300)
    fake_gguf(models / "Big-00002-of-00002.gguf", 200)
    library.record_download(first, "org/Big-GGUF", None)
    own = library.record_local(fake_gguf(tmp_path / "mine.gguf", 70)).path
    fake_gguf(models / SMOL.filename, 10)
    library.mark_used(models / SMOL.filename)  # recorded, so it stays listed when its file goes

    (models / "Big-00002-of-00002.gguf").unlink()  # one part gone: the model cannot load
    own.unlink()
    (models / SMOL.filename).unlink()
    entries = by_name(library)
    assert (entries["Big-00001-of-00002.gguf"].installed, entries["Big-00001-of-00002.gguf"].size_bytes) == (False, 300)
    assert (entries["mine.gguf"].installed, entries["mine.gguf"].size_bytes) == (False, 0)
    assert (entries["smollm2-135m"].installed, entries["smollm2-135m"].source) == (False, "catalog")


def test_the_library_is_kept_in_the_database(tmp_path, models):
    own = fake_gguf(tmp_path / "mine.gguf", 70)
    with open_library(tmp_path / "data") as library:
        library.record_local(own)
        library.set_defaults("mine.gguf", ModelDefaults(n_ctx=2048))
    with open_library(tmp_path / "data") as again:
        assert again.defaults_for(own) == ModelDefaults(n_ctx=2048)
        assert again.listed("mine.gguf").path == own


# ----- recording -------------------------------------------------------------------------------


def test_mark_used_records_an_unknown_file_and_stamps_the_time(library, tmp_path, models):
    own = fake_gguf(tmp_path / "mine.gguf", 70)
    library.mark_used(own)
    first = library.listed("mine.gguf").last_used
    assert first is not None and first.tzinfo is not None
    library.mark_used(tmp_path / "sub" / ".." / "mine.gguf")  # another spelling of the same file
    assert library.listed("mine.gguf").last_used > first
    assert len(library.entries()) == 1
    library.mark_used(tmp_path / "gone.gguf")  # not there: nothing loaded from it, nothing recorded
    assert [e.name for e in library.entries()] == ["mine.gguf"]
    fake_gguf(models / SMOL.filename, 10)
    library.mark_used(models / SMOL.filename)
    assert by_name(library)["smollm2-135m"].source == "catalog"  # the catalog's file is the catalog's


def test_record_local_keeps_a_hub_download_as_it_is(library, models):
    path = fake_gguf(models / "q.gguf", 10)
    library.record_download(path, "org/q-GGUF", None)
    entry = library.record_local(path)
    assert (entry.source, entry.hub_repo) == ("hub", "org/q-GGUF")
    with pytest.raises(LibraryError, match="no model file"):
        library.record_local(models / "missing.gguf")


def test_two_files_with_one_name_get_different_entry_names(library, models, tmp_path):
    library.record_local(fake_gguf(tmp_path / "q.gguf", 10))
    hub = library.record_download(fake_gguf(models / "q.gguf", 20), "org/q-GGUF", None)
    other = library.record_local(fake_gguf(tmp_path / "b" / "q.gguf", 30))
    assert hub.name == "org/q-GGUF/q.gguf"
    assert other.name == str(tmp_path / "b" / "q.gguf")
    assert len({e.name for e in library.entries()}) == 3


# ----- defaults --------------------------------------------------------------------------------


def test_defaults_are_stored_per_model(library, models, tmp_path):
    fake_gguf(models / SMOL.filename, 10)
    own = fake_gguf(tmp_path / "mine.gguf", 70)
    library.record_local(own)
    entry = library.set_defaults("smollm2-135m", ModelDefaults(n_ctx=2048, n_gpu_layers=0, chat_template=TEMPLATE))
    assert entry.defaults == ModelDefaults(n_ctx=2048, n_gpu_layers=0, chat_template=TEMPLATE)
    assert library.defaults_for(models / SMOL.filename) == entry.defaults
    assert library.defaults_for(own) == ModelDefaults()
    assert library.defaults_for(tmp_path / "unknown.gguf") == ModelDefaults()
    library.set_defaults("smollm2-135m", ModelDefaults())
    assert library.defaults_for(models / SMOL.filename) == ModelDefaults()


def test_defaults_of_a_catalog_model_can_be_set_before_it_is_fetched(library, models):
    library.set_defaults("gemma3-270m", ModelDefaults(n_threads=2))
    gemma = by_name(library)["gemma3-270m"]
    assert (gemma.installed, gemma.source, gemma.defaults.n_threads) == (False, "catalog", 2)
    path = model_catalog.model_path(model_catalog.CATALOG["gemma3-270m"], models)
    assert library.defaults_for(path) == ModelDefaults(n_threads=2)


@pytest.mark.parametrize("bad, message", [
    (ModelDefaults(n_ctx=10), "context must be an integer of at least 64, got 10"),
    (ModelDefaults(n_ctx=True), "context must be an integer"),
    (ModelDefaults(n_threads=0), "threads must be an integer of at least 1"),
    (ModelDefaults(n_gpu_layers=-1), "GPU layers must be an integer of at least 0"),
    (ModelDefaults(chat_template="  "), "the chat template is empty"),
    (ModelDefaults(chat_template="{% for m in messages %}"), "the chat template does not compile"),
])
def test_bad_defaults_are_refused_and_nothing_changes(library, tmp_path, bad, message):
    own = fake_gguf(tmp_path / "mine.gguf", 70)
    library.record_local(own)
    library.set_defaults("mine.gguf", ModelDefaults(n_ctx=4096))
    with pytest.raises(LibraryError, match=message):
        library.set_defaults("mine.gguf", bad)
    assert library.defaults_for(own) == ModelDefaults(n_ctx=4096)


def test_defaults_of_an_unknown_model_are_refused(library):
    with pytest.raises(LibraryError, match="no model named 'nothing'"):
        library.set_defaults("nothing", ModelDefaults(n_ctx=2048))


def test_bad_stored_defaults_are_ignored_one_by_one(library, tmp_path):
    own = fake_gguf(tmp_path / "mine.gguf", 70)
    library.record_local(own)
    with sqlite3.connect(library.records.db.path) as conn:  # as if edited by hand
        conn.execute("""UPDATE model_profiles SET load_settings_json = '{"n_ctx": -5, "n_threads": 3, "x": 1}'""")
    assert library.defaults_for(own) == ModelDefaults(n_threads=3)


def test_apply_defaults_puts_them_under_explicit_settings():
    settings = LoadSettings(model_path=Path("m.gguf"), n_ctx=8192, n_threads=8, n_threads_batch=8)
    defaults = ModelDefaults(n_ctx=2048, n_gpu_layers=0, n_threads=2, chat_template=TEMPLATE)
    applied = apply_defaults(settings, defaults)
    assert (applied.n_ctx, applied.n_gpu_layers, applied.n_threads, applied.chat_template) == (2048, 0, 2, TEMPLATE)
    assert applied.threads_batch() == 2  # batch threads follow the model's threads
    kept = apply_defaults(settings, defaults, explicit={"n_ctx", "n_threads"})
    assert (kept.n_ctx, kept.n_threads, kept.n_threads_batch, kept.n_gpu_layers) == (8192, 8, 8, 0)
    assert apply_defaults(settings, ModelDefaults()) == settings


def test_command_line_flags_win_over_the_library(tmp_path):
    defaults = ModelDefaults(n_ctx=2048, n_gpu_layers=0, n_threads=2)
    plain = settings_from_args(parse(["chat"]), tmp_path / "m.gguf", defaults)
    assert (plain.n_ctx, plain.n_gpu_layers, plain.n_threads) == (2048, 0, 2)
    flags = settings_from_args(parse(["chat", "--ctx", "1024", "--gpu-layers", "5"]), tmp_path / "m.gguf", defaults)
    assert (flags.n_ctx, flags.n_gpu_layers, flags.n_threads) == (1024, 5, 2)
    bench = settings_from_args(parse(["chat"]), tmp_path / "m.gguf", defaults, n_ctx=512)  # a caller's override
    assert bench.n_ctx == 512
    assert settings_from_args(parse(["chat"]), tmp_path / "m.gguf").n_ctx == LoadSettings(Path()).n_ctx


def test_a_models_vision_projector_is_a_default_it_loads_with(library, tmp_path):
    own = fake_gguf(tmp_path / "mine.gguf", 70)
    projector = fake_gguf(tmp_path / "mmproj-mine.gguf", 10)
    library.record_local(own)
    entry = library.set_defaults("mine.gguf", ModelDefaults(mmproj=str(projector)))
    assert library.defaults_for(own) == entry.defaults == ModelDefaults(mmproj=str(projector))
    applied = apply_defaults(LoadSettings(model_path=own), entry.defaults)
    assert applied.mmproj == projector
    assert apply_defaults(LoadSettings(model_path=own, mmproj=tmp_path / "cli.gguf"), entry.defaults,
                          explicit={"mmproj"}).mmproj == tmp_path / "cli.gguf"  # --mmproj wins
    applied.validate()
    with pytest.raises(LibraryError, match="no vision projector file at"):
        library.set_defaults("mine.gguf", ModelDefaults(mmproj=str(tmp_path / "gone.gguf")))
    with pytest.raises(LibraryError, match="does not go with a draft model"):
        library.set_defaults("mine.gguf", ModelDefaults(mmproj=str(projector), speculative="draft",
                                                        draft_model=str(own)))
    assert library.defaults_for(own) == ModelDefaults(mmproj=str(projector))  # nothing changed


@pytest.mark.parametrize("command", ["chat", "ask", "serve", "app"])
def test_mmproj_names_the_models_vision_projector(tmp_path, command):
    rest = ["doc.md", "-q", "hi"] if command == "ask" else []
    args = parse([command, "--mmproj", str(tmp_path / "mmproj.gguf"), *rest])
    assert settings_from_args(args, tmp_path / "m.gguf").mmproj == tmp_path / "mmproj.gguf"
    assert settings_from_args(parse(["chat"]), tmp_path / "m.gguf").mmproj is None


# ----- removing ---------------------------------------------------------------------------------


def test_a_loaded_model_is_not_removed(library, models):
    first = fake_gguf(models / "Big-00001-of-00002.gguf", 300)
    second = fake_gguf(models / "Big-00002-of-00002.gguf", 200)
    library.record_download(first, "org/Big-GGUF", None)
    with pytest.raises(ModelInUse, match="is loaded"):
        library.remove("Big-00001-of-00002.gguf", {models / "sub" / ".." / first.name})  # any spelling
    assert first.exists() and second.exists()
    assert "Big-00001-of-00002.gguf" in by_name(library)


def test_remove_deletes_every_part_and_the_record(library, models):
    first = fake_gguf(models / "Big-00001-of-00002.gguf", 300)
    second = fake_gguf(models / "Big-00002-of-00002.gguf", 200)
    other = fake_gguf(models / "other.gguf", 10)
    library.record_download(first, "org/Big-GGUF", None)
    library.set_defaults("Big-00001-of-00002.gguf", ModelDefaults(n_ctx=1024))
    assert library.files_to_delete("Big-00001-of-00002.gguf") == [first, second]
    library.remove("Big-00001-of-00002.gguf", {other})
    assert not first.exists() and not second.exists() and other.exists()
    assert list(by_name(library)) == ["other.gguf"]
    assert library.defaults_for(first) == ModelDefaults()


def test_a_catalog_model_can_be_removed_and_fetched_again(library, models):
    fake_gguf(models / SMOL.filename, 10)
    library.set_defaults("smollm2-135m", ModelDefaults(n_ctx=1024))
    library.remove("smollm2-135m", set())
    assert not (models / SMOL.filename).exists()
    assert library.entries() == []
    assert not model_catalog.is_installed(SMOL, models)  # `chorus models fetch` installs it again


def test_a_local_file_elsewhere_is_forgotten_but_kept(library, tmp_path):
    own = fake_gguf(tmp_path / "mine.gguf", 70)
    library.record_local(own)
    assert library.files_to_delete("mine.gguf") == []
    library.remove("mine.gguf", set())
    assert own.exists()
    assert library.entries() == []


def test_a_link_in_the_models_folder_is_removed_not_its_target(library, models, tmp_path):
    target = fake_gguf(tmp_path / "real.gguf", 70)
    (models / "linked.gguf").symlink_to(target)
    library.remove("linked.gguf", set())
    assert not (models / "linked.gguf").exists() and target.exists()


def test_a_vanished_model_can_be_removed(library, models):
    path = fake_gguf(models / "q.gguf", 10)
    library.record_download(path, "org/q-GGUF", None)
    path.unlink()
    library.remove("q.gguf", set())
    assert library.entries() == []
