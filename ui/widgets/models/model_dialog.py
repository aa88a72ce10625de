"""File → Open model…: pick a GGUF file, choose GPU layers, see the memory it will take.

The estimate comes from the app's ModelProbe (it reads the file's header); it runs on a
worker thread, so a large file never stalls the window.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from ui.widgets.common.file_dialogs import open_file_dialog

if TYPE_CHECKING:  # the window gets one from the controller; importing it would load llama.cpp
    from app.models.probe import ModelProbe

ALL_LAYERS = -1  # the spin box's lowest value: llama.cpp's default, everything it can
NO_GPU_NOTE = "This llama.cpp build has no GPU support (CPU only)"


def format_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB"):
        if n < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


class ModelDialog(QDialog):
    model_chosen = Signal(str, int)  # path, GPU layers (ALL_LAYERS: the default)
    _estimated = Signal(str, int, object)  # path, layers asked, MemoryEstimate or error text

    def __init__(self, probe: ModelProbe | None, parent: QWidget | None = None, path: str = "") -> None:
        super().__init__(parent)
        self.setWindowTitle("Open a model")
        self.probe = probe
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="model-estimate")
        self.path_edit = QLineEdit(path)
        self.path_edit.setPlaceholderText("a .gguf file")
        self.browse_button = QPushButton("Browse…")
        self.gpu_layers = QSpinBox()
        self.gpu_layers.setRange(ALL_LAYERS, 999)
        self.gpu_layers.setSpecialValueText("All (default)")
        self.gpu_note = QLabel()
        self.gpu_note.setWordWrap(True)
        self.estimate_label = QLabel("Choose a GGUF file to see how much memory it needs.")
        self.estimate_label.setWordWrap(True)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Open | QDialogButtonBox.StandardButton.Cancel)
        self._layout()
        self._set_gpu_support(probe is not None and probe.gpu_offload_supported())
        self.browse_button.clicked.connect(self._browse)
        self.path_edit.textChanged.connect(self._changed)
        self.gpu_layers.valueChanged.connect(self._changed)
        self._estimated.connect(self._show_estimate)
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        self.finished.connect(lambda _result: self._worker.shutdown(wait=False, cancel_futures=True))
        self._changed()

    def _layout(self) -> None:
        row = QHBoxLayout()
        row.addWidget(self.path_edit, 1)
        row.addWidget(self.browse_button)
        form = QFormLayout()
        form.addRow("Model file:", row)
        form.addRow("GPU layers:", self.gpu_layers)
        form.addRow("", self.gpu_note)
        box = QVBoxLayout(self)
        box.addLayout(form)
        box.addWidget(self.estimate_label)
        box.addWidget(self.buttons)
        self.setMinimumWidth(560)

    def _set_gpu_support(self, supported: bool) -> None:
        self.gpu_layers.setEnabled(supported)
        if supported:
            self.gpu_layers.setValue(ALL_LAYERS)
            self.gpu_note.setText("Layers to offload to the GPU; the rest run on the CPU.")
        else:
            self.gpu_layers.setValue(0)
            self.gpu_note.setText(NO_GPU_NOTE)

    def chosen_layers(self) -> int | None:
        """None: the default (all layers when the build can offload, else none)."""
        if not self.gpu_layers.isEnabled():
            return None
        value = self.gpu_layers.value()
        return None if value == ALL_LAYERS else value

    def _browse(self) -> None:
        start = str(Path(self.path_edit.text()).parent) if self.path_edit.text() else ""
        self.browser = open_file_dialog(self, "Open a GGUF model", "GGUF models (*.gguf);;All files (*)",
                                        lambda path, _filter: self.path_edit.setText(path), directory=start)

    def _changed(self) -> None:
        path = self.path_edit.text().strip()
        self.buttons.button(QDialogButtonBox.StandardButton.Open).setEnabled(bool(path) and Path(path).is_file())
        if not path or self.probe is None:
            return
        self.estimate_label.setText("Estimating memory…")
        layers = self.chosen_layers()
        self._worker.submit(self._estimate, path, layers)

    def _estimate(self, path: str, layers: int | None) -> None:  # on the worker thread
        try:
            result: object = self.probe.estimate(path, layers)
        except ValueError as exc:  # GgufError: not a GGUF file, damaged, unreadable
            result = str(exc)
        self._estimated.emit(path, ALL_LAYERS if layers is None else layers, result)

    def _show_estimate(self, path: str, layers: int, result: object) -> None:
        asked = self.chosen_layers()
        if path != self.path_edit.text().strip() or layers != (ALL_LAYERS if asked is None else asked):
            return  # an answer to an earlier question
        if isinstance(result, str):
            self.estimate_label.setText(f"Cannot estimate the memory: {result}")
            return
        if self.gpu_layers.isEnabled():
            self.gpu_layers.setMaximum(result.n_layer + 1)  # + the output layer
        text = (
            f"<b>Estimated memory: {format_bytes(result.total_bytes)}</b><br>"
            f"Weights: {format_bytes(result.weights_bytes)} ({result.n_layer} layers)<br>"
            f"KV cache: {format_bytes(result.kv_bytes)} ({result.n_ctx} tokens, {result.kv_type})"
        )
        if result.gpu_layers:
            text += (f"<br>On the GPU ({result.gpu_layers} layers): {format_bytes(result.gpu_bytes)}; "
                     f"in system memory: {format_bytes(result.total_bytes - result.gpu_bytes)}")
        text += "<br><small>Plus llama.cpp's compute buffers (tens of MB).</small>"
        self.estimate_label.setText(text)

    def accept(self) -> None:
        layers = self.chosen_layers()
        self.model_chosen.emit(self.path_edit.text().strip(), ALL_LAYERS if layers is None else layers)
        super().accept()
