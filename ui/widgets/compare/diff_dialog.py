"""Word-level differences between two panes' answers: words only in the left answer struck
through in red, words only in the right one in green."""

from __future__ import annotations

import html
from collections.abc import Callable

from PySide6.QtWidgets import QComboBox, QDialog, QDialogButtonBox, QHBoxLayout, QLabel, QTextBrowser, QVBoxLayout

# (old, new) -> ([(op, text)], similarity 0..1); op is "equal", "delete" or "insert"
DiffFunction = Callable[[str, str], tuple[list[tuple[str, str]], float]]

STYLE = {
    "delete": "background:#fddede;color:#8a1c1c;text-decoration:line-through",
    "insert": "background:#d9f5dd;color:#0f5323",
}


def diff_html(runs: list[tuple[str, str]]) -> str:
    parts = []
    for op, text in runs:
        escaped = html.escape(text).replace("\n", "<br>")
        style = STYLE.get(op)
        parts.append(f'<span style="{style}">{escaped}</span>' if style else escaped)
    return "".join(parts)


class DiffDialog(QDialog):
    def __init__(self, answers: list[tuple[str, str]], diff: DiffFunction, parent=None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Differences between answers")
        self.resize(760, 520)
        self._answers = answers
        self._diff = diff
        self.left = QComboBox()
        self.right = QComboBox()
        for label, _text in answers:
            self.left.addItem(label)
            self.right.addItem(label)
        self.right.setCurrentIndex(min(1, len(answers) - 1))
        self.similarity = QLabel()
        self.browser = QTextBrowser()
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        pick = QHBoxLayout()
        pick.addWidget(QLabel("Compare"))
        pick.addWidget(self.left)
        pick.addWidget(QLabel("with"))
        pick.addWidget(self.right)
        pick.addStretch(1)
        box = QVBoxLayout(self)
        box.addLayout(pick)
        box.addWidget(self.similarity)
        box.addWidget(self.browser, 1)
        box.addWidget(buttons)
        self.left.currentIndexChanged.connect(self.refresh)
        self.right.currentIndexChanged.connect(self.refresh)
        self.refresh()

    def refresh(self, *_args) -> None:
        left_label, old = self._answers[self.left.currentIndex()]
        right_label, new = self._answers[self.right.currentIndex()]
        runs, similarity = self._diff(old, new)
        self.similarity.setText(
            f"{100 * similarity:.0f}% of the words agree · "
            f"struck through: only in {left_label} · green: only in {right_label}"
        )
        self.browser.setHtml(diff_html(runs))
