"""A chat's settings as spin boxes built from the engine's table (CHAT_FIELDS): the same
fields, ranges and tooltips in a chat's side panel, Settings and a compare pane's dialog,
and what is typed goes out under the field's name."""

from __future__ import annotations

from app.chats.defaults import BUILT_IN
from inference import CHAT_FIELDS
from ui.widgets.chat.chat_side_panel import ChatSidePanel
from ui.widgets.settings.chat_settings import ChatSettingsDialog
from ui.widgets.settings.settings_window import SettingsWindow


def test_every_chat_field_has_its_spin_box_in_each_of_the_three_places(qtbot) -> None:
    assert {"temperature", "top_k", "max_tokens"} <= {f.name for f in CHAT_FIELDS}
    places = [ChatSidePanel(), SettingsWindow(), ChatSettingsDialog("a chat", {}, BUILT_IN, None)]
    for widget in places:
        qtbot.addWidget(widget)
    for place in places:
        assert list(place.spins) == [f.name for f in CHAT_FIELDS]
        for field in CHAT_FIELDS:
            spin = place.spins[field.name]
            if field.name != "max_tokens":  # the reply's length: "until the model stops" at 0
                assert (spin.minimum(), spin.maximum(), spin.toolTip()) == (field.chat.lo, field.chat.hi, field.tip)


def test_a_compare_pane_s_dialog_shows_the_chat_s_own_values_and_sends_what_is_typed(qtbot) -> None:
    """It offers top-k too now (it lacked it where the side panel and Settings had it)."""
    dialog = ChatSettingsDialog("a chat", {"top_k": 5, "temperature": 0.3}, BUILT_IN, "Pirate")
    qtbot.addWidget(dialog)
    assert dialog.values() == {**BUILT_IN, "top_k": 5, "temperature": 0.3}
    for name, typed in (("top_k", "12"), ("min_p", "0.25")):
        spin = dialog.spins[name]
        spin.selectAll()
        qtbot.keyClicks(spin, typed)
    values = dialog.values()
    assert (values["top_k"], values["min_p"]) == (12, 0.25) and isinstance(values["top_k"], int)


def test_temperature_and_top_p_have_sliders_that_follow_the_spin_boxes_and_lead_them(qtbot) -> None:
    """Issue 39's look: sliders for the fractional settings, moved with the keys."""
    from PySide6.QtCore import Qt

    dialog = ChatSettingsDialog("a chat", {"temperature": 0.7, "top_p": 0.9}, BUILT_IN, None)
    qtbot.addWidget(dialog)
    assert set(dialog.settings.sliders) == {"temperature", "top_p", "min_p", "repeat_penalty"}
    temperature = dialog.settings.sliders["temperature"]
    assert temperature.accessibleName() == "Temperature slider"
    assert temperature.value() == 14  # 0.7 in steps of 0.05 from 0
    temperature.setFocus()
    qtbot.keyClick(temperature, Qt.Key.Key_Right)
    qtbot.keyClick(temperature, Qt.Key.Key_Right)
    assert dialog.values()["temperature"] == 0.8
    top_p = dialog.spins["top_p"]
    top_p.selectAll()
    qtbot.keyClicks(top_p, "0.5")
    qtbot.keyClick(top_p, Qt.Key.Key_Tab)
    assert dialog.settings.sliders["top_p"].value() == 9  # (0.5 - 0.05) / 0.05
    assert dialog.values()["top_p"] == 0.5
    qtbot.keyClick(temperature, Qt.Key.Key_End)
    assert dialog.values()["temperature"] == 2.0
