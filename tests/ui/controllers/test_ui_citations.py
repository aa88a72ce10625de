"""A reply's citations in the window: a document too long for the context is read in
excerpts; once the reply ends each is a chip under it saying where in the document it is
("Warranty"), and those the reply quotes or names stand out, as stored.
A scripted engine answers (no model); the extraction, retrieval and storage are real."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from PySide6.QtCore import Qt

from tests.support.desk import ScriptedEngine

SECTIONS = {  # two short sections the question asks about, among long ones it does not
    "Installing": "Unpack the archive and run the installer before anything else. " * 30,
    "Cooling": "The pump keeps the coolant moving while the radiator fan turns at 1200 rpm. " * 8,
    "Cleaning": "Wipe the case with a dry cloth once a month and keep the vents clear. " * 30,
    "Warranty": "The warranty lasts two years from the date of purchase, parts and labour. " * 8,
    "Storage": "Keep the unit in its box in a dry room when it is not in use for long. " * 30,
}


@pytest.fixture
def engine(engine: ScriptedEngine) -> ScriptedEngine:
    """The scripted engine with a model of 1,500 tokens: the manual (some 1,800) goes in excerpts."""
    engine.info = SimpleNamespace(n_ctx=1500, sees_images=False, mmproj=None)
    return engine


def test_quoted_and_named_excerpts_stand_out_once_the_reply_ends(desk, engine, qtbot, tmp_path):
    manual = tmp_path / "manual.md"
    manual.write_text("\n\n".join(f"# {head}\n\n{body}" for head, body in SECTIONS.items()), encoding="utf-8")
    conv = desk.repo.create_conversation(title="manual")
    desk.controllers.conversations.open_conversation(conv.id)
    qtbot.waitUntil(lambda: desk.window.tab_for(conv.id) is not None)
    tab = desk.window.tab_for(conv.id)
    desk.window.activateWindow()
    qtbot.waitUntil(desk.window.isActiveWindow)
    qtbot.mouseClick(tab.composer_box.attach_button, Qt.MouseButton.LeftButton)
    tab.composer_box.file_dialog.selectFile(str(manual))
    tab.composer_box.file_dialog.accept()
    tray = tab.composer_box.tray
    qtbot.waitUntil(lambda: len(tray.chips()) == 1 and not tray.extracting(), timeout=30_000)
    qtbot.keyClicks(tab.composer, "How long is the warranty and how fast is the fan?")
    qtbot.keyClick(tab.composer, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: bool(engine.replies()))
    request = engine.replies()[-1]
    shown = desk.repo.active_path(conv.id).messages[-1].sources  # stored with the prompt: none cited yet
    assert shown and not any(s.cited for s in shown), shown
    assert {s.where for s in shown} >= {"Warranty", "Cooling"}, shown
    cooling = next(s for s in shown if s.where == "Cooling")
    engine.write(request, "It lasts two years from the date of purchase. ", tokens=9)
    engine.write(request, f"The fan: see [{cooling.label}].", tokens=5)
    engine.end(request)
    # the reply's chips once it ends, each saying where its excerpt is; the quoted and the
    # named ones stand out (before, none did until the chat was opened again, and none then)
    qtbot.waitUntil(lambda: tab.model.rowCount() == 2 and len(tab.view.chip_boxes(1)) == len(shown))
    chips = {c.text: c.emphasized for c, _box in tab.view.chip_boxes(1)}
    assert {text.rsplit(" · ", 1)[-1] for text, cited in chips.items() if cited} == {"Warranty", "Cooling"}
    assert f"[{cooling.label}] manual.md · Cooling" in chips
    stored = desk.repo.active_path(conv.id).messages[-1].sources  # and so stored
    assert {s.where for s in stored if s.cited} == {"Warranty", "Cooling"}
