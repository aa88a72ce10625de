"""Every screen at 900x600, 1440x900 and 1920x1080, in both themes (issue 39): the main
window with a chat, its details and the performance panel, Settings, Models, Jobs, a comparison and the keyboard
shortcuts; no label or button there shows its text cut (a label cut on purpose sets the cut
text itself, with "…", so it fits), and each screen is saved for a person to look at
(artifacts/screenshots/sizes/)."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QAbstractButton, QApplication, QHeaderView, QLabel, QWidget

from tests.support.gui_app import SCREENSHOTS
from ui.widgets.window.main_window import PANEL_MIN_H

SIZES = ((900, 600), (1440, 900), (1920, 1080))
CTRL = Qt.KeyboardModifier.ControlModifier
SHIFT = Qt.KeyboardModifier.ShiftModifier


def cut_texts(root: QWidget) -> list[str]:
    """The visible labels and buttons under root whose text is wider than they are."""
    cut = []
    for label in root.findChildren(QLabel):
        text = label.text()
        if (not label.isVisible() or not text or label.wordWrap() or "<" in text or label.pixmap() is not None
                and not label.pixmap().isNull()):
            continue
        room = label.contentsRect().width() - 2 * label.margin() - 2 * max(0, label.indent())  # -1: no indent
        widest = max(label.fontMetrics().horizontalAdvance(line) for line in text.splitlines())
        if widest > room + 1:
            cut.append(f"label {text!r}: {widest} px in {room}")
    for header in root.findChildren(QHeaderView):
        if not header.isVisible() or header.orientation() is not Qt.Orientation.Horizontal:
            continue
        model = header.model()
        for section in range(header.count()):
            text = str(model.headerData(section, Qt.Orientation.Horizontal) or "")
            needs = header.fontMetrics().horizontalAdvance(text) + 4  # a margin, at least
            if text and not header.isSectionHidden(section) and header.sectionSize(section) < needs:
                cut.append(f"column {text!r}: {header.sectionSize(section)} px, needs {needs}")
    for button in root.findChildren(QAbstractButton):
        if button.isVisible() and button.text() and button.width() < button.minimumSizeHint().width() - 1:
            cut.append(f"button {button.text()!r}: {button.width()} px, needs {button.minimumSizeHint().width()}")
    return cut


def settled_cut_texts(qtbot, root: QWidget) -> list[str]:
    """cut_texts once the layout has had its turn (a text just changed lays out later)."""
    try:
        qtbot.waitUntil(lambda: not cut_texts(root), timeout=1000)
    except qtbot.TimeoutError:
        pass  # cut for good: said below
    return cut_texts(root)


def _press(desk, key: Qt.Key, modifiers=CTRL) -> None:
    desk.window.activateWindow()
    desk.qtbot.waitUntil(desk.window.isActiveWindow)
    desk.qtbot.keyClick(QApplication.focusWidget() or desk.window, key, modifiers)


def _new_top_level(desk, before: set[QWidget]) -> QWidget:
    found: list[QWidget] = []

    def shown() -> bool:
        found[:] = [w for w in QApplication.topLevelWidgets()
                    if w.isVisible() and w not in before and w is not desk.window and w.windowTitle()]
        return bool(found)

    desk.qtbot.waitUntil(shown)
    return found[0]


def _save(widget: QWidget, name: str) -> None:
    folder = SCREENSHOTS / "sizes"
    folder.mkdir(parents=True, exist_ok=True)
    assert widget.grab().save(str(folder / f"{name}.png"))


def _a_chat_with_a_reply(desk) -> None:
    conv = desk.repo.create_conversation(title="Explain how a hash map works, with a short example")
    user = desk.repo.add_message(conv.id, "user", "Explain how a **hash map** works, with a short example.")
    desk.repo.add_message(conv.id, "assistant", "A hash map stores values under keys: a hash of the key "
                          "picks a bucket, so a lookup reads one bucket instead of the whole list.\n\n"
                          "```python\nages = {'ada': 36}\nprint(ages['ada'])\n```", parent_id=user.id)
    desk.controllers.conversations.refresh()
    desk.controllers.conversations.open_conversation(conv.id)
    desk.qtbot.waitUntil(lambda: desk.window.tab_for(conv.id) is not None)


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def test_every_screen_shows_its_labels_whole(desk, engine, theme, size):
    width, height = size
    tag = f"{width}x{height}-{theme}"
    desk.window.resize(width, height)
    _a_chat_with_a_reply(desk)
    desk.qtbot.waitUntil(lambda: desk.window.width() == width)
    problems: dict[str, list[str]] = {}

    problems["window"] = settled_cut_texts(desk.qtbot, desk.window)
    _save(desk.window, f"window-{tag}")
    _press(desk, Qt.Key.Key_D, CTRL | SHIFT)  # Details: the side panel
    tab = desk.window.current_tab()
    desk.qtbot.waitUntil(lambda: tab.panel.isVisible())
    problems["window with details"] = settled_cut_texts(desk.qtbot, desk.window)
    _save(desk.window, f"window-details-{tag}")

    _press(desk, Qt.Key.Key_D, CTRL | SHIFT)  # details closed again
    desk.qtbot.waitUntil(lambda: not tab.panel.isVisible())
    _press(desk, Qt.Key.Key_P, CTRL | SHIFT)  # the performance panel
    desk.qtbot.waitUntil(lambda: desk.window.perf_panel.isVisible()
                         and desk.window.perf_panel.height() >= min(PANEL_MIN_H, height // 4))
    problems["performance panel"] = settled_cut_texts(desk.qtbot, desk.window)
    _save(desk.window, f"window-performance-{tag}")
    # The chat keeps several messages' room beside it (it once kept one message, shorter than
    # the composer, at 900x600).
    assert tab.view.height() >= 2 * tab.composer_box.height(), (tab.view.height(), tab.composer_box.height())
    _press(desk, Qt.Key.Key_P, CTRL | SHIFT)
    desk.qtbot.waitUntil(lambda: not desk.window.perf_panel.isVisible())

    for name, key, modifiers in (("settings", Qt.Key.Key_Comma, CTRL), ("models", Qt.Key.Key_M, CTRL | SHIFT),
                                 ("shortcuts", Qt.Key.Key_Slash, CTRL)):
        before = set(QApplication.topLevelWidgets())
        _press(desk, key, modifiers)
        shown = _new_top_level(desk, before)
        desk.qtbot.waitExposed(shown)
        problems[name] = settled_cut_texts(desk.qtbot, shown)
        _save(shown, f"{name}-{tag}")
        shown.close()
        desk.qtbot.waitUntil(lambda s=shown: not s.isVisible())

    before = set(QApplication.topLevelWidgets())
    desk.window.menus.jobs_action.trigger()  # Chat → Jobs… has no key of its own
    jobs = _new_top_level(desk, before)
    desk.qtbot.waitExposed(jobs)
    problems["jobs"] = settled_cut_texts(desk.qtbot, jobs)
    _save(jobs, f"jobs-{tag}")
    jobs.close()

    _press(desk, Qt.Key.Key_N, CTRL | SHIFT)  # a new comparison
    desk.qtbot.waitUntil(lambda: type(desk.window.current_tab()).__name__ == "CompareView")
    problems["comparison"] = settled_cut_texts(desk.qtbot, desk.window)
    _save(desk.window, f"compare-{tag}")

    assert not {k: v for k, v in problems.items() if v}, problems


def test_the_composer_sits_under_the_reading_column_and_fills_a_narrow_pane(desk, engine):
    from ui.widgets.chat.message_delegate import READING_WIDTH

    _a_chat_with_a_reply(desk)
    tab = desk.window.current_tab()

    def box_and_view():
        box, view = tab.composer_box, tab.view
        left = box.mapTo(desk.window, box.rect().topLeft()).x()
        view_left = view.mapTo(desk.window, view.rect().topLeft()).x()
        return box.width(), left + box.width() / 2, view.width(), view_left + view.width() / 2

    desk.window.resize(1920, 1080)
    desk.qtbot.waitUntil(lambda: box_and_view()[0] == READING_WIDTH)
    _, box_centre, _, view_centre = box_and_view()
    assert abs(box_centre - view_centre) < 12  # under the column (the view's scroll bar aside)
    desk.window.resize(900, 600)
    desk.qtbot.waitUntil(lambda: box_and_view()[0] < READING_WIDTH)
    width, _, view_width, _ = box_and_view()
    assert abs(width - view_width) <= 4, (width, view_width)  # as wide as the pane
