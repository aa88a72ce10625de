"""An attached image shown large, in a window of its own: not modal (the chat goes on beside
it), opened at once saying "Loading…"; the image comes decoded from a worker thread (a 20 MB
photo is not decoded on the GUI thread) and is scaled to the window, never up."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QImage, QPixmap
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QLabel, QSizePolicy, QVBoxLayout, QWidget


class ImageDialog(QDialog):
    def __init__(self, title: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("imageDialog")
        self.setWindowTitle(title)
        self.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        self.setModal(False)
        self.resize(720, 560)
        self.details = QLabel("Loading…")
        self.details.setObjectName("documentDetails")
        self.picture = QLabel()
        self.picture.setObjectName("imagePicture")
        self.picture.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.picture.setMinimumSize(1, 1)  # the label shrinks with the window: the pixmap is scaled to it
        self.picture.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Ignored)
        self.image: QImage | None = None
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.close)
        layout = QVBoxLayout(self)
        layout.addWidget(self.details)
        layout.addWidget(self.picture, 1)
        layout.addWidget(buttons)

    def show_image(self, details: str, image: QImage) -> None:
        self.details.setText(f"{details} · {image.width()}×{image.height()}")
        self.image = image
        self._scale()

    def show_error(self, message: str) -> None:
        self.details.setText(message)
        self.details.setProperty("failed", True)
        self.details.style().polish(self.details)

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self._scale()

    def _scale(self) -> None:
        if self.image is None or self.image.isNull():
            return
        room = self.picture.size()
        image = self.image
        if image.width() > room.width() or image.height() > room.height():
            image = image.scaled(room, Qt.AspectRatioMode.KeepAspectRatio, Qt.TransformationMode.SmoothTransformation)
        self.picture.setPixmap(QPixmap.fromImage(image))


def open_image_dialog(parent: QWidget, title: str) -> ImageDialog:
    """Shown (show(), never exec()): the caller gives it the image once decoded."""
    dialog = ImageDialog(title, parent)
    dialog.show()
    return dialog
