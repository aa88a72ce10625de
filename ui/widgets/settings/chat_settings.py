"""Per-chat sampling settings: they override the preset's and the app's defaults.

A spin box for each field a chat may set (the engine's CHAT_FIELDS: label, range, step and
tooltip from its row), in this dialog (a compare pane's), a chat's side panel and Settings;
the fractional ones (temperature, top-p, min-p, repeat penalty) with a slider beside it."""

from __future__ import annotations

from collections.abc import Mapping

from PySide6.QtCore import QSignalBlocker, Qt
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QDoubleSpinBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QSlider,
    QSpinBox,
    QWidget,
)

from inference import CHAT_FIELDS, SamplingField
from ui.widgets.settings.reply_length import ReplyLengthSpin

CHAT_NAMES = tuple(f.name for f in CHAT_FIELDS)


def chat_field(name: str) -> SamplingField:
    return next(f for f in CHAT_FIELDS if f.name == name)


def setting_spin(field: SamplingField) -> QDoubleSpinBox | QSpinBox:
    """A spin box for one of CHAT_FIELDS: the reply's length, an integer or a number."""
    chat = field.chat
    assert chat is not None, f"{field.name} is no chat setting"
    if field.name == "max_tokens":
        return ReplyLengthSpin()  # its lowest value is "until the model stops"
    spin: QDoubleSpinBox | QSpinBox
    if field.kind is int:
        spin = QSpinBox()
        spin.setRange(int(chat.lo), int(chat.hi))
        spin.setSingleStep(int(chat.step))
    else:
        spin = QDoubleSpinBox()
        spin.setRange(chat.lo, chat.hi)
        spin.setSingleStep(chat.step)
        spin.setDecimals(chat.decimals)
    spin.setToolTip(field.tip)
    return spin


class SliderSpin(QWidget):
    """A fractional setting as a slider beside its spin box: drag for a rough value, type an
    exact one; each follows the other (a typed value between the slider's steps stays as typed)."""

    def __init__(self, spin: QDoubleSpinBox, label: str) -> None:
        super().__init__()
        self.spin = spin
        self.slider = QSlider(Qt.Orientation.Horizontal)
        self.slider.setRange(0, self._tick(spin.maximum()))
        self.slider.setAccessibleName(f"{label} slider")
        self.slider.setToolTip(spin.toolTip())
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.slider, 1)
        layout.addWidget(spin)
        self.setFocusProxy(spin)  # the form's label names the spin box; Tab reaches both
        self.slider.valueChanged.connect(self._slid)
        spin.valueChanged.connect(self._typed)
        self._typed(spin.value())

    def _tick(self, value: float) -> int:
        return round((value - self.spin.minimum()) / self.spin.singleStep())

    def _slid(self, tick: int) -> None:
        if tick != self._tick(self.spin.value()):
            self.spin.setValue(self.spin.minimum() + tick * self.spin.singleStep())

    def _typed(self, value: float) -> None:
        with QSignalBlocker(self.slider):
            self.slider.setValue(self._tick(value))


class SettingSpins:
    """A spin box for each chat field, added to a form, and their values by field name."""

    def __init__(self, form: QFormLayout) -> None:
        self.spins: dict[str, QDoubleSpinBox | QSpinBox] = {}
        self.sliders: dict[str, QSlider] = {}
        for field in CHAT_FIELDS:
            assert field.chat is not None
            self.spins[field.name] = spin = setting_spin(field)
            spin.setAccessibleName(field.chat.label)
            if isinstance(spin, QDoubleSpinBox):
                row = SliderSpin(spin, field.chat.label)
                self.sliders[field.name] = row.slider
                form.addRow(field.chat.label, row)
            else:
                form.addRow(field.chat.label, spin)

    @property
    def reply_length(self) -> ReplyLengthSpin:
        spin = self.spins["max_tokens"]
        assert isinstance(spin, ReplyLengthSpin)
        return spin

    def set_values(self, values: Mapping[str, float | int]) -> None:
        for name, spin in self.spins.items():
            if isinstance(spin, ReplyLengthSpin):
                spin.set_tokens(int(values[name]))
            elif isinstance(spin, QSpinBox):
                spin.setValue(int(values[name]))
            else:
                spin.setValue(float(values[name]))

    def values(self) -> dict[str, float | int]:
        return {name: spin.tokens() if isinstance(spin, ReplyLengthSpin) else
                spin.value() if isinstance(spin, QSpinBox) else round(spin.value(), 3)
                for name, spin in self.spins.items()}


class ChatSettingsDialog(QDialog):
    def __init__(self, title: str, sampling: dict, defaults: dict, preset_name: str | None, parent=None) -> None:
        super().__init__(parent)
        self.setWindowTitle(f"Settings: {title or 'New chat'}")
        form = QFormLayout(self)
        form.addRow("Preset", QLabel(preset_name or "none"))
        self.settings = SettingSpins(form)
        self.spins = self.settings.spins
        self.reply_length = self.settings.reply_length
        self.settings.set_values({name: sampling.get(name, defaults[name]) for name in CHAT_NAMES})
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        form.addRow(buttons)

    def values(self) -> dict:
        return self.settings.values()
