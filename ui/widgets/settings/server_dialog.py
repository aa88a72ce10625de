"""Starting the OpenAI-compatible server from the app: where it listens and its API key."""

from __future__ import annotations

from PySide6.QtWidgets import (
    QCheckBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QLabel,
    QLineEdit,
    QSpinBox,
    QVBoxLayout,
)

LOOPBACK, EVERYWHERE = "127.0.0.1", "0.0.0.0"


class ServerDialog(QDialog):
    def __init__(self, parent=None, port: int = 8080) -> None:
        super().__init__(parent)
        self.setWindowTitle("Serve over HTTP")
        self.port = QSpinBox()
        self.port.setRange(1, 65535)
        self.port.setValue(port)
        self.key = QLineEdit()
        self.key.setEchoMode(QLineEdit.EchoMode.Password)
        self.key.setPlaceholderText("none: anyone who can reach the port may use it")
        self.network = QCheckBox("Allow other computers on the network (listen on all addresses)")
        note = QLabel("Other programs reach the loaded model at http://HOST:PORT/v1 with any OpenAI "
                      "client; their requests share the engine's batch with your tabs.")
        note.setWordWrap(True)
        form = QFormLayout()
        form.addRow("Port:", self.port)
        form.addRow("API key:", self.key)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        buttons.button(QDialogButtonBox.StandardButton.Ok).setText("Start")
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        box = QVBoxLayout(self)
        box.addWidget(note)
        box.addLayout(form)
        box.addWidget(self.network)
        box.addWidget(buttons)

    def values(self) -> tuple[str, int, str]:
        """(host, port, API key or "")."""
        host = EVERYWHERE if self.network.isChecked() else LOOPBACK
        return host, self.port.value(), self.key.text().strip()
