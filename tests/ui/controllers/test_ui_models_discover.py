"""The Models window's Discover tab against the stand-in Hub on loopback (tests/support/hub_standin.py,
HF_ENDPOINT pointing at it, HF_HOME in tmp_path), which serves the real SmolLM2 and Gemma
GGUF files: search, a repository's files with fit badges and the best one selected, a
download with its progress in the window and the status bar (the window closed meanwhile),
cancel, a gated repository, a tampered file, a split model, and Load through the picker's path.
Screenshots of the window in both themes go to CHORUS_SCREENSHOT_DIR (artifacts/screenshots)."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from tests.support.databases import seed_data_dir
from tests.support.gui_app import SCREENSHOTS
from tests.support.hub_repos import (
    GATED_REPO,
    GEMMA_REPO,
    SMOL_FILE,
    SMOL_REPO,
    SPLIT_DIR,
    SPLIT_PREFIX,
    TAMPERED_REPO,
    VISION_FILES,
    VISION_PROJECTORS,
    VISION_REPO,
)
from tests.support.models_ui_app import WAIT_MS, ModelsShell
from ui.theme import apply_theme
from ui.widgets.models.hub_files import VISION_MARK
from ui.widgets.models.model_picker import SEES_IMAGES

pytest_plugins = ["tests.support.hub_fixtures"]

pytestmark = pytest.mark.model  # the stand-in serves the real model files
BADGES = {"fits", "tight", "too large"}
HOLD_BYTES = 8 << 20  # the stand-in pauses each download here until released


@pytest.fixture
def shell(qtbot, tmp_path, qt_asyncio, hub, monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    instance = ModelsShell(qtbot, seed_data_dir(tmp_path / "data"))  # its database a copy: tests/support/databases.py
    yield instance
    hub.release.set()
    instance.close()


def grab_both(qtbot, qapp, widget, name: str) -> None:
    """widget as it looks in the light and the dark theme, into the screenshots folder."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    for theme in ("light", "dark"):
        apply_theme(qapp, theme)
        qtbot.wait(50)  # one paint with the new palette
        assert widget.grab().save(str(SCREENSHOTS / f"modelsui_{name}_{theme}.png"))
    apply_theme(qapp, "system")


def installed_files(shell: ModelsShell) -> list[str]:
    """GGUF files in the models folder, not the resumable parts in .partial/."""
    root = shell.models_dir
    return sorted(str(p.relative_to(root)) for p in root.rglob("*.gguf") if ".partial" not in p.parts)


def open_repo(shell: ModelsShell, repo_id: str):
    """The window, with repo_id's files listed and every fit badge in."""
    win = shell.open()
    shell.qtbot.waitUntil(lambda: repo_id in win.results.repo_ids(), timeout=WAIT_MS)
    win.results.select(repo_id)
    files = win.files
    shell.qtbot.waitUntil(lambda: files.repo_id == repo_id and files.files
                          and all(files.badge(n) in BADGES | {"unknown"} for n in files.files), timeout=WAIT_MS)
    return win


def test_search_lists_gguf_repositories_most_downloaded_first_with_a_gated_badge(shell, qtbot):
    win = shell.open()  # the first showing asks for the most downloaded
    known = {GEMMA_REPO, SMOL_REPO, GATED_REPO, TAMPERED_REPO}
    qtbot.waitUntil(lambda: known <= set(win.results.repo_ids()), timeout=WAIT_MS)
    assert win.results.repo_ids()[:2] == [GEMMA_REPO, SMOL_REPO]  # 9000 and 5000 downloads: the most
    results = win.results.list
    rows = {results.topLevelItem(i).text(0): results.topLevelItem(i) for i in range(results.topLevelItemCount())}
    assert rows[GATED_REPO].text(4) == "gated" and rows[SMOL_REPO].text(4) == ""
    assert rows[SMOL_REPO].text(2) == "5.0k" and rows[SMOL_REPO].text(3) == "40"
    assert rows[SMOL_REPO].text(1) == "llama"  # from the Hub's GGUF summary
    assert not win.discover_message.isVisible()

    qtbot.keyClicks(win.results.search_box, "gemma")
    qtbot.keyClick(win.results.search_box, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: GEMMA_REPO in win.results.repo_ids() and SMOL_REPO not in win.results.repo_ids(),
                    timeout=WAIT_MS)
    assert all("gemma" in r for r in win.results.repo_ids())
    win.results.search_box.clear()
    qtbot.keyClicks(win.results.search_box, "nothing-like-this")  # the debounce sends it
    qtbot.waitUntil(lambda: "No GGUF models found" in win.discover_message.text(), timeout=WAIT_MS)
    assert win.results.repo_ids() == []


def test_a_repository_s_files_get_fit_badges_and_the_best_is_selected(shell, qtbot, qapp):
    from app.models import fit

    win = open_repo(shell, SMOL_REPO)
    files = win.files
    split_name = f"{SPLIT_DIR}/{SPLIT_PREFIX}-00001-of-00002.gguf"
    assert set(files.files) == {SMOL_FILE, split_name}  # the split model is one entry
    assert files.files[split_name].quant == "Q4_1" and len(files.files[split_name].parts) == 2
    assert all(files.badge(n) in BADGES for n in files.files), "a 100 MB model has a verdict here"
    qtbot.waitUntil(lambda: files.selected_file() is not None, timeout=WAIT_MS)
    verdicts = shell.models.discover.verdicts
    assert files.selected_file() == fit.best_file(list(files.files.values()), verdicts)
    assert files.fit_reason.text().endswith(verdicts[files.selected_file().name].reason)
    assert files.download_button.isEnabled()
    grab_both(qtbot, qapp, win, "discover")

    files.context.setValue(1_048_576)  # a million tokens of KV cache: new verdicts, none better
    qtbot.waitUntil(lambda: all(files.badge(n) in BADGES for n in files.files)
                    and not shell.models.discover.pending, timeout=WAIT_MS)
    assert files.selected_file() is not None  # the user's row stays chosen


def test_a_download_runs_on_with_the_window_closed_then_the_library_and_picker_list_it(shell, qtbot, hub, qapp):
    win = open_repo(shell, SMOL_REPO)
    files, status = win.files, shell.window.status.download_status
    files.select(SMOL_FILE)
    hub.hold_at = HOLD_BYTES
    files.download_button.click()
    qtbot.waitUntil(lambda: " of " in files.progress_label.text() and files.progress.value() > 0, timeout=WAIT_MS)
    assert files.cancel_button.isVisible() and not files.download_button.isEnabled()
    qtbot.waitUntil(status.isVisible, timeout=WAIT_MS)
    assert SMOL_FILE in status.label.text() and "%" in status.label.text()
    grab_both(qtbot, qapp, win, "download")
    win.close()  # the download goes on; the status bar says so
    assert not win.isVisible() and status.isVisible()
    grab_both(qtbot, qapp, shell.window.statusBar(), "statusbar")
    files.context.setValue(4096)  # new verdicts arrive while it is hidden: Download stays off
    qtbot.waitUntil(lambda: not shell.models.discover.pending, timeout=WAIT_MS)
    qtbot.mouseClick(status, Qt.MouseButton.LeftButton)  # brings the window back
    qtbot.waitUntil(win.isVisible, timeout=WAIT_MS)
    assert not files.download_button.isEnabled() and files.cancel_button.isVisible()

    hub.release.set()
    qtbot.waitUntil(files.load_button.isVisible, timeout=WAIT_MS)
    path = shell.models_dir / "chorus-test" / "SmolLM2-135M-Instruct-GGUF" / SMOL_FILE
    assert files.installed_path == str(path) and path.is_file()
    assert not status.isVisible() and not files.cancel_button.isVisible()
    assert installed_files(shell) == [str(path.relative_to(shell.models_dir))]
    win.show_library()
    qtbot.waitUntil(lambda: SMOL_FILE in shell.library_names(), timeout=WAIT_MS)
    entry = win.library.entries[SMOL_FILE]
    assert entry.source == "hub" and entry.hub_repo == SMOL_REPO
    win.library.select(SMOL_FILE)
    grab_both(qtbot, qapp, win, "library")
    qtbot.waitUntil(lambda: str(path) in {c.path for c in shell.window.model_picker.installed}, timeout=WAIT_MS)


def test_a_vision_model_downloads_with_its_projector_and_the_picker_marks_it(shell, qtbot):
    win = shell.open()
    qtbot.waitUntil(lambda: VISION_REPO in win.results.repo_ids(), timeout=WAIT_MS)
    row = win.results.list.topLevelItem(win.results.repo_ids().index(VISION_REPO))
    assert row.text(1).endswith("sees images")
    win = open_repo(shell, VISION_REPO)
    files = win.files
    assert files.title.text().endswith(VISION_MARK)
    files.select(VISION_FILES[1])  # Q8_0: the projector of its own quant
    assert f"with vision projector {VISION_PROJECTORS[0]}" in files.fit_reason.text()
    files.download_button.click()
    qtbot.waitUntil(files.load_button.isVisible, timeout=WAIT_MS)
    folder = shell.models_dir / VISION_REPO
    assert files.progress_label.text() == f"Installed {VISION_FILES[1]} with vision projector {VISION_PROJECTORS[0]}"
    assert installed_files(shell) == [f"{VISION_REPO}/{VISION_FILES[1]}", f"{VISION_REPO}/{VISION_PROJECTORS[0]}"]
    win.show_library()
    qtbot.waitUntil(lambda: VISION_FILES[1] in shell.library_names(), timeout=WAIT_MS)
    assert win.library.entries[VISION_FILES[1]].defaults.mmproj == str(folder / VISION_PROJECTORS[0])
    picker = shell.window.model_picker
    path = str(folder / VISION_FILES[1])
    qtbot.waitUntil(lambda: any(a.data() == path and a.text().endswith(SEES_IMAGES) for a in picker.entries()),
                    timeout=WAIT_MS)
    assert not any(VISION_PROJECTORS[0] in a.text() for a in picker.entries())  # no projector as a model


def test_a_download_that_ends_with_the_window_closed_says_so_in_the_status_bar(shell, qtbot, hub):
    win = open_repo(shell, SMOL_REPO)
    files = win.files
    files.select(SMOL_FILE)
    hub.hold_at = HOLD_BYTES
    files.download_button.click()
    qtbot.waitUntil(lambda: files.progress.value() > 0, timeout=WAIT_MS)
    win.close()
    hub.release.set()
    bar = shell.window.statusBar()
    qtbot.waitUntil(lambda: bar.currentMessage().startswith(f"Downloaded {SMOL_FILE}"), timeout=WAIT_MS)
    assert not shell.window.status.download_status.isVisible() and not win.isVisible()


def test_cancel_leaves_nothing_installed(shell, qtbot, hub):
    win = open_repo(shell, SMOL_REPO)
    files = win.files
    files.select(SMOL_FILE)
    hub.hold_at = HOLD_BYTES
    files.download_button.click()
    qtbot.waitUntil(lambda: files.progress.value() > 0, timeout=WAIT_MS)
    files.cancel_button.click()
    hub.release.set()  # the stream goes on; the client stops at its next chunk
    qtbot.waitUntil(lambda: files.progress_label.text().startswith("Cancelled"), timeout=WAIT_MS)
    assert not files.cancel_button.isVisible() and not files.load_button.isVisible()
    assert not shell.window.status.download_status.isVisible()
    assert installed_files(shell) == []
    win.show_library()
    shell.models.library_tab.refresh()
    shell.settled()
    qtbot.waitUntil(lambda: SMOL_FILE not in shell.library_names(), timeout=WAIT_MS)


def test_a_gated_repository_says_how_to_log_in(shell, qtbot, qapp):
    win = open_repo(shell, GATED_REPO)
    files = win.files
    files.select(next(iter(files.files)))
    files.download_button.click()
    qtbot.waitUntil(lambda: "HF_TOKEN" in win.discover_message.text(), timeout=WAIT_MS)
    assert "\n" not in win.discover_message.text() and "Traceback" not in files.progress_label.text()
    assert installed_files(shell) == []
    assert win.results.width() >= 280  # a long message wraps; it never squeezes the results away
    grab_both(qtbot, qapp, win, "gated")


def test_a_file_that_does_not_match_its_sha256_is_not_installed(shell, qtbot):
    win = open_repo(shell, TAMPERED_REPO)
    files = win.files
    files.select(SMOL_FILE)
    files.download_button.click()
    qtbot.waitUntil(lambda: "sha256" in win.discover_message.text(), timeout=WAIT_MS)
    assert "\n" not in win.discover_message.text()
    assert installed_files(shell) == [] and not files.load_button.isVisible()


def test_a_split_model_downloads_whole_and_is_listed_once(shell, qtbot):
    win = open_repo(shell, SMOL_REPO)
    files = win.files
    first = f"{SPLIT_DIR}/{SPLIT_PREFIX}-00001-of-00002.gguf"
    files.select(first)
    files.download_button.click()
    qtbot.waitUntil(files.load_button.isVisible, timeout=WAIT_MS)
    repo_dir = "chorus-test/SmolLM2-135M-Instruct-GGUF"
    assert installed_files(shell) == [f"{repo_dir}/{SPLIT_DIR}/{SPLIT_PREFIX}-0000{i}-of-00002.gguf" for i in (1, 2)]
    assert files.installed_path.endswith(f"{SPLIT_PREFIX}-00001-of-00002.gguf")
    qtbot.waitUntil(lambda: any(c.path == files.installed_path for c in shell.window.model_picker.installed),
                    timeout=WAIT_MS)
    assert not any("00002-of" in c.path for c in shell.window.model_picker.installed)


def test_load_runs_the_download_with_its_library_defaults_and_marks_it_used(shell, qtbot):
    win = open_repo(shell, SMOL_REPO)
    files, engines = win.files, shell.ctx.engines
    files.select(SMOL_FILE)
    files.download_button.click()
    qtbot.waitUntil(files.load_button.isVisible, timeout=WAIT_MS)
    view = win.library
    win.show_library()
    qtbot.waitUntil(lambda: SMOL_FILE in view.names(), timeout=WAIT_MS)
    view.select(SMOL_FILE)
    view.n_ctx.setValue(1024)
    view.save_button.click()
    qtbot.waitUntil(lambda: view.message.text().startswith("Saved"), timeout=WAIT_MS)
    assert view.entries[SMOL_FILE].last_used is None

    win.show_discover()
    with qtbot.waitSignal(shell.window.model_requested) as asked:  # the model picker's path
        files.load_button.click()
    assert asked.args == [files.installed_path]
    qtbot.waitUntil(lambda: engines.model_name == SMOL_FILE and engines.engine.state.status == "ready",
                    timeout=120_000)
    assert engines.local_settings.n_ctx == 1024  # its library default, over the app's 2048
    # the engine's READY comes before the hub takes the new model as its own (and refreshes
    # again): the list may show the last use a moment before it marks the model loaded
    qtbot.waitUntil(lambda: view.list.topLevelItem(0).text(0) == f"{SMOL_FILE}  (loaded)", timeout=WAIT_MS)
    assert view.entries[SMOL_FILE].last_used is not None
