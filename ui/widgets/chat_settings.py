"""Per-chat sampling settings: they override the preset's and the app's defaults."""

from __future__ import annotations

from PySide6.QtWidgets import QDialog, QDialogButtonBox, QDoubleSpinBox, QFormLayout, QLabel

from ui.widgets.reply_length import ReplyLengthSpin

FIELDS = {  # name: (label, minimum, maximum, step, decimals)
    "temperature": ("Temperature", 0.0, 2.0, 0.05, 2),
    "top_p": ("Top-p", 0.05, 1.0, 0.05, 2),
    "min_p": ("Min-p", 0.0, 1.0, 0.01, 2),
    "repeat_penalty": ("Repeat penalty", 0.5, 2.0, 0.05, 2),
}


def sampling_spin(name: str) -> QDoubleSpinBox:
    """A spin box for one of FIELDS, with its range, step and decimals."""
    _label, lo, hi, step, decimals = FIELDS[name]
    spin = QDoubleSpinBox()
    spin.setRange(lo, hi)
    spin.setSingleStep(step)
    spin.setDecimals(decimals)
    return spin


class ChatSettingsDialog(QDialog):
    def __init__(self, title: str, sampling: dict, defaults: dict, preset_name: str | None, parent=None) -> None:
        super().__init__(parent)
        self.setWindowTitle(f"Settings: {title or 'New chat'}")
        form = QFormLayout(self)
        form.addRow("Preset", QLabel(preset_name or "none"))
        self.spins: dict[str, QDoubleSpinBox] = {}
        for name, (label, *_limits) in FIELDS.items():
            spin = sampling_spin(name)
            spin.setValue(float(sampling.get(name, defaults[name])))
            self.spins[name] = spin
            form.addRow(label, spin)
        self.reply_length = ReplyLengthSpin()
        self.reply_length.set_tokens(int(sampling.get("max_tokens", defaults["max_tokens"])))
        form.addRow("Max tokens", self.reply_length)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        form.addRow(buttons)

    def values(self) -> dict:
        out = {name: round(spin.value(), 3) for name, spin in self.spins.items()}
        out["max_tokens"] = self.reply_length.tokens()
        return out
