"""Starting the OpenAI-compatible server from the app: where it listens, its API key, and
the hosts whose images a request may name by URL."""

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

from app.server.config import image_hosts
from ui.widgets.tools.mcp_server_dialog import error_label

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
        # As `chorus serve --image-host`: none by default, so a client cannot make the app
        # reach into the network it sits in.
        self.image_hosts = QLineEdit()
        self.image_hosts.setPlaceholderText("none: requests send images as data: URLs")
        self.image_hosts.setToolTip("Host names or addresses (with :PORT or not), separated by commas: "
                                    "a request may name http(s) images on them, which the app then fetches")
        self.network = QCheckBox("Allow other computers on the network (listen on all addresses)")
        note = QLabel("Other programs reach the loaded model at http://HOST:PORT/v1 with any OpenAI "
                      "client; their requests share the engine's batch with your tabs.")
        note.setWordWrap(True)
        self.problem = error_label("serverDialogError")
        form = QFormLayout()
        form.addRow("Port:", self.port)
        form.addRow("API key:", self.key)
        form.addRow("Images by URL from:", self.image_hosts)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        buttons.button(QDialogButtonBox.StandardButton.Ok).setText("Start")
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        box = QVBoxLayout(self)
        box.addWidget(note)
        box.addLayout(form)
        box.addWidget(self.network)
        box.addWidget(self.problem)
        box.addWidget(buttons)

    def accept(self) -> None:
        """Start, unless a host is written wrong: then the dialog stays open and says which."""
        try:
            image_hosts(self.image_hosts.text())
        except ValueError as exc:
            self.problem.setText(f"Images by URL from: {exc}")
            self.problem.show()
            self.image_hosts.setFocus()
            return
        super().accept()

    def values(self) -> tuple[str, int, str, tuple[str, ...]]:
        """(host, port, API key or "", image hosts)."""
        host = EVERYWHERE if self.network.isChecked() else LOOPBACK
        return host, self.port.value(), self.key.text().strip(), image_hosts(self.image_hosts.text())
