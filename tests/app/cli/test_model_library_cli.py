"""`chorus models list|rm|defaults|fetch` through the real `chorus` entry point, on a real
data folder (database and files)."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

from app.models.catalog import CATALOG
from app.models.library import ModelDefaults, open_library
from tests.support.cli import chorus, chorus_in_process
from tests.support.model_files import SMOL, TEMPLATE, fake_gguf


@pytest.fixture
def base(tmp_path) -> Path:
    """A data folder with a Hub download (split in two), a local file used, a catalog model."""
    data = tmp_path / "data"
    models = data / "models"
    first = fake_gguf(models / "Big-Q4_K_M-00001-of-00002.gguf", 1_500_000)
    fake_gguf(models / "Big-Q4_K_M-00002-of-00002.gguf", 500_000)
    fake_gguf(models / SMOL.filename, 98_000)
    with open_library(data) as library:
        library.record_download(first, "org/Big-GGUF", None)
        library.mark_used(fake_gguf(tmp_path / "mine.gguf", 2_000))
        library.set_defaults("smollm2-135m", ModelDefaults(n_ctx=2048, n_threads=2))
    return data


def rows(stdout: str) -> dict[str, str]:
    """The table's rows by name (a row's path is on the indented line below it)."""
    return {line.split()[0]: line for line in stdout.splitlines()[1:] if line and not line.startswith(" ")}


def test_list_shows_the_library_and_the_catalogs_other_models(base, tmp_path, capsys):
    out = chorus_in_process(capsys, base, "models", "list")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[:6] == ["NAME", "SIZE", "SOURCE", "LAST", "USED", "STATE"]
    listed = rows(out.stdout)
    assert set(listed) == {"Big-Q4_K_M-00001-of-00002.gguf", "mine.gguf", *CATALOG}
    assert "not installed" in listed["smolvlm-256m"] and "chorus models fetch smolvlm-256m" in listed["smolvlm-256m"]
    big = listed["Big-Q4_K_M-00001-of-00002.gguf"].split()
    assert big[1:6] == ["2.0", "MB", "hub", "org/Big-GGUF", "never"] and "installed" in big
    assert "local" in listed["mine.gguf"] and "never" not in listed["mine.gguf"]  # it was used
    assert listed["smollm2-135m"].endswith("installed      ctx 2048, threads 2")
    assert "not installed" in listed["gemma3-270m"] and "chorus models fetch gemma3-270m" in listed["gemma3-270m"]
    assert f"    {tmp_path / 'mine.gguf'}" in out.stdout.splitlines()
    bare = chorus_in_process(capsys, base, "models")  # a bare `models` lists too
    assert bare.stdout == out.stdout


def test_defaults_show_set_and_clear(base, tmp_path, capsys):
    shown = chorus_in_process(capsys, base, "models", "defaults", "smollm2-135m")
    assert (shown.returncode, shown.stdout) == (0, "smollm2-135m: ctx 2048, threads 2\n")
    template = tmp_path / "t.jinja"
    template.write_text(TEMPLATE, encoding="utf-8")
    changed = chorus_in_process(capsys, base, "models", "defaults", "smollm2-135m", "--gpu-layers", "0",
                                "--chat-template", str(template))
    assert changed.returncode == 0
    assert changed.stdout == f"smollm2-135m: ctx 2048, gpu-layers 0, threads 2, own chat template\n{TEMPLATE}\n"
    with open_library(base) as library:
        assert library.defaults_for(base / "models" / SMOL.filename) == ModelDefaults(
            n_ctx=2048, n_gpu_layers=0, n_threads=2, chat_template=TEMPLATE)
    cleared = chorus_in_process(capsys, base, "models", "defaults", "smollm2-135m", "--clear", "--ctx", "4096")
    assert cleared.stdout == "smollm2-135m: ctx 4096\n"


@pytest.mark.parametrize("args, message", [
    (("--ctx", "10"), "chorus: context must be an integer of at least 64, got 10\n"),
    (("--threads", "0"), "chorus: threads must be an integer of at least 1, got 0\n"),
    (("--chat-template", "/no/such/file.jinja"), "chorus: cannot read the chat template /no/such/file.jinja: "
                                                 "No such file or directory\n"),
])
def test_bad_defaults_are_one_line_and_change_nothing(base, capsys, args, message):
    out = chorus_in_process(capsys, base, "models", "defaults", "smollm2-135m", *args)
    assert (out.returncode, out.stderr) == (2, message)
    with open_library(base) as library:
        assert library.defaults_for(base / "models" / SMOL.filename) == ModelDefaults(n_ctx=2048, n_threads=2)


def test_a_template_that_does_not_compile_is_refused(base, tmp_path, capsys):
    broken = tmp_path / "broken.jinja"
    broken.write_text("{% for m in messages %}", encoding="utf-8")
    out = chorus_in_process(capsys, base, "models", "defaults", "smollm2-135m", "--chat-template", str(broken))
    assert out.returncode == 2 and out.stderr.startswith("chorus: the chat template does not compile")


def test_unknown_names_are_one_line_errors(base, capsys):
    for words, message in ((("defaults", "nothing"), "no model named 'nothing' in the library"),
                           (("rm", "nothing", "--yes"), "nothing is not in the library"),
                           (("rm", "gemma3-270m", "--yes"), "gemma3-270m is not in the library (not installed)")):
        out = chorus_in_process(capsys, base, "models", *words)
        assert out.returncode == 2 and out.stderr.count("\n") == 1 and message in out.stderr, words


def test_rm_off_a_terminal_needs_yes(base, capsys):
    first = base / "models" / "Big-Q4_K_M-00001-of-00002.gguf"
    refused = chorus(base, "models", "rm", "Big-Q4_K_M-00001-of-00002.gguf")  # stdin is a pipe
    assert refused.returncode == 2
    assert "not on a terminal: pass --yes" in refused.stderr and "delete 2 file(s), 2.0 MB" in refused.stderr
    assert first.exists()
    done = chorus_in_process(capsys, base, "models", "rm", "Big-Q4_K_M-00001-of-00002.gguf", "--yes")
    assert (done.returncode, done.stdout) == (0, "removed Big-Q4_K_M-00001-of-00002.gguf\n")
    assert not first.exists() and not first.with_name("Big-Q4_K_M-00002-of-00002.gguf").exists()
    assert "Big-Q4_K_M" not in chorus_in_process(capsys, base, "models", "list").stdout


def rm_on_a_terminal(capsys, monkeypatch, base: Path, name: str, answer: str) -> subprocess.CompletedProcess:
    """`chorus models rm NAME` with a pseudo-terminal as its stdin, answering the question
    (through the entry point in this process: the command asks sys.stdin whether it is a
    terminal, and a pty is one; a process each cost ~1 s of imports)."""
    leader, follower = pty.openpty()
    try:
        os.write(leader, answer.encode() + b"\n")
        with open(follower, encoding="utf-8", closefd=False) as terminal:
            monkeypatch.setattr(sys, "stdin", terminal)
            return chorus_in_process(capsys, base, "models", "rm", name)
    finally:
        os.close(leader)
        os.close(follower)


def test_rm_on_a_terminal_asks_first(base, tmp_path, capsys, monkeypatch):
    path = base / "models" / SMOL.filename
    kept = rm_on_a_terminal(capsys, monkeypatch, base, "smollm2-135m", "n")
    assert kept.returncode == 1 and "nothing removed" in kept.stderr
    assert kept.stdout.startswith(f"Remove smollm2-135m: delete 1 file(s), 98.0 KB: {path}? [y/N]")
    assert path.exists()
    removed = rm_on_a_terminal(capsys, monkeypatch, base, "smollm2-135m", "y")
    assert removed.returncode == 0 and removed.stdout.endswith("removed smollm2-135m\n")
    assert not path.exists()
    # a local file elsewhere is forgotten, not deleted
    forgot = rm_on_a_terminal(capsys, monkeypatch, base, "mine.gguf", "yes")
    assert "forget" in forgot.stdout and forgot.stdout.endswith("was kept\n")
    assert (tmp_path / "mine.gguf").exists()
    assert set(rows(chorus_in_process(capsys, base, "models", "list").stdout)) == {
        "Big-Q4_K_M-00001-of-00002.gguf", *CATALOG}


@pytest.mark.model
def test_fetch_records_the_catalog_model(tmp_path, model_path, capsys):
    """An installed catalog model: fetch checks it (no download) and records it."""
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / model_path.name).symlink_to(model_path)
    out = chorus_in_process(capsys, tmp_path, "models", "fetch", "smollm2-135m")
    assert out.returncode == 0, out.stderr
    with open_library(tmp_path) as library:
        record = library.records.by_path(str(tmp_path / "models" / model_path.name))
        assert (record.name, record.source, record.size_bytes) == ("smollm2-135m", "catalog", model_path.stat().st_size)


def test_a_draft_model_default_is_an_installed_models_file_and_implies_draft(base, capsys):
    out = chorus_in_process(capsys, base, "models", "defaults", "smollm2-135m", "--draft-model", "mine.gguf")
    assert (out.returncode, out.stdout) == (0, "smollm2-135m: ctx 2048, threads 2, speculative draft, "
                                               "draft-model mine.gguf\n")
    with open_library(base) as library:
        stored = library.defaults_for(base / "models" / SMOL.filename)
    assert (stored.speculative, Path(stored.draft_model).name) == ("draft", "mine.gguf")
    off = chorus_in_process(capsys, base, "models", "defaults", "smollm2-135m", "--speculative", "lookup")
    assert "speculative lookup, draft-model mine.gguf" in off.stdout  # kept for when draft is chosen again


def test_draft_without_a_draft_model_or_with_a_missing_file_is_refused(base, capsys):
    out = chorus_in_process(capsys, base, "models", "defaults", "smollm2-135m", "--speculative", "draft")
    assert (out.returncode, out.stderr) == (2, "chorus: speculative decoding with a draft model needs the draft "
                                               "model\n")
    out = chorus_in_process(capsys, base, "models", "defaults", "smollm2-135m", "--draft-model", "/no/such.gguf")
    assert (out.returncode, out.stderr) == (2, "chorus: no installed model or file named /no/such.gguf\n")
    with open_library(base) as library:
        assert library.defaults_for(base / "models" / SMOL.filename) == ModelDefaults(n_ctx=2048, n_threads=2)


def test_a_vision_projector_default_is_a_file_and_can_be_forgotten(base, tmp_path, capsys):
    projector = fake_gguf(tmp_path / "mmproj-smol.gguf", 10)
    out = chorus_in_process(capsys, base, "models", "defaults", "smollm2-135m", "--mmproj", str(projector))
    assert (out.returncode, out.stdout) == (0, "smollm2-135m: ctx 2048, threads 2, mmproj mmproj-smol.gguf\n")
    with open_library(base) as library:
        assert library.defaults_for(base / "models" / SMOL.filename).mmproj == str(projector)
    missing = chorus_in_process(capsys, base, "models", "defaults", "smollm2-135m", "--mmproj", "/no/mmproj.gguf")
    assert (missing.returncode, missing.stderr) == (2, "chorus: no vision projector file at /no/mmproj.gguf\n")
    gone = chorus_in_process(capsys, base, "models", "defaults", "smollm2-135m", "--no-mmproj")
    assert (gone.returncode, gone.stdout) == (0, "smollm2-135m: ctx 2048, threads 2\n")
