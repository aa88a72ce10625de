"""The blind leaderboard on the desk (scripted engine): a pick in blind mode is a vote kept
in the comparison, shown by Chat → Blind leaderboard… and kept when blind mode is left."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtTest import QTest

from tests.support.window import menu_action


def test_a_blind_pick_counts_on_the_leaderboard_for_its_model_and_preset(desk, engine):
    desk.controllers.compare.new_comparison(panes=2)
    desk.qtbot.waitUntil(lambda: len(desk.window.open_comparisons()) == 1
                         and len(desk.window.open_comparisons()[0].panes()) == 2)
    view = desk.window.open_comparisons()[0]
    first, second = view.panes()
    second.set_presets([(7, "Poet")], 7)  # the same model with another preset: another contender
    model = first.source_label
    QTest.mouseClick(view.blind_box, Qt.MouseButton.LeftButton)
    desk.qtbot.waitUntil(lambda: all(p.pick_button.isVisible() for p in view.panes()))
    view.composer.setPlainText("Name a colour.")
    QTest.mouseClick(view.send_button, Qt.MouseButton.LeftButton)
    desk.qtbot.waitUntil(lambda: len(engine.requests) == 2)
    for request_id in list(engine.requests):
        engine.write(request_id, "Blue.", tokens=2)
        engine.end(request_id)
    desk.qtbot.waitUntil(lambda: not view.busy())
    poet = view.pane_for(second.conversation_id)
    QTest.mouseClick(poet.pick_button, Qt.MouseButton.LeftButton)
    QTest.mouseClick(view.blind_box, Qt.MouseButton.LeftButton)  # blind off: the pick goes, the vote stays
    desk.settled()
    menu_action(desk.window, "Blind leaderboard…").trigger()
    dialog = desk.controllers.compare.review.leaderboard
    desk.qtbot.waitUntil(lambda: dialog is not None and dialog.rows() != [])
    assert dialog.rows() == [("1", f"{model} · Poet", "1", "1", "100%"), ("2", model, "0", "1", "0%")]
    assert dialog.summary.text() == "1 blind pick. A tie shares its rank."
