"""The composer: one rounded box holding the files to send (chips), the paperclip, the text
and one button that is Send while the chat is idle and Stop while a reply is written. While
a file is read, or one could not be read, nothing is sent: Enter and Send keep the text and
the chips, and one line in the box says why. Its colours and hover states are the app's
stylesheet's (ui/theme.py)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from PySide6.QtCore import QEvent, QMimeData, QPoint, Qt, QTimer, Signal
from PySide6.QtGui import QImage, QKeyEvent, QPalette
from PySide6.QtWidgets import (
    QFileDialog,
    QFrame,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QMenu,
    QPlainTextEdit,
    QSizePolicy,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.chats.prompt_library import SavedPrompt, first_variable, matching
from app.conversations.image_files import MEDIA_TYPES
from app.documents import SUPPORTED_SUFFIXES
from storage import NewDocument
from ui.widgets.chat.attachment_chips import AttachmentTray, file_paths_of
from ui.widgets.chat.file_drops import accept_file_drops
from ui.widgets.common.banner import Banner
from ui.widgets.common.file_dialogs import open_files_dialog
from ui.widgets.common.glyphs import glyph_icon, icon_size

# Every format the documents are read from (app/documents/formats.py) and the images shown
# to a model with a vision projector, then anything: a file of another kind gets its chip and
# says why it cannot be read.
_SUFFIXES = sorted(set(SUPPORTED_SUFFIXES) | set(MEDIA_TYPES))
ATTACH_FILTERS = (f"Documents and images ({' '.join('*' + s for s in _SUFFIXES)});;"
                  f"Images ({' '.join('*' + s for s in MEDIA_TYPES)});;All files (*)")


PROMPT_ROWS = 6  # saved prompts listed at once under "/"


COMPOSER_MIN_H = 46  # two lines of the usual font: room to start typing
COMPOSER_MAX_LINES = 10  # past this the text scrolls, and the chat keeps its room


class Composer(QPlainTextEdit):
    """Enter sends, Shift+Enter starts a new line. While a reply is being written Enter
    keeps the text (the next message can be typed, and is sent once the reply ends). A
    file pasted or dropped here is attached, not typed in as its path; so is an image
    pasted from the clipboard (a screenshot)."""

    submitted = Signal(str)
    refused = Signal()  # Enter or Send while sending waits: the text stays, the box says why
    files_given = Signal(list)  # the paths of files pasted or dropped into the text
    image_given = Signal(QImage)  # an image pasted (the clipboard's pixels, no file)
    focus_changed = Signal(bool)  # the box's edge shows where the typing goes
    can_submit = True
    key_filter: Callable[[QKeyEvent, bool], bool] | None = None  # the box's saved-prompt list takes keys first

    def focusInEvent(self, event) -> None:
        super().focusInEvent(event)
        self.focus_changed.emit(True)

    def focusOutEvent(self, event) -> None:
        super().focusOutEvent(event)
        self.focus_changed.emit(False)

    def event(self, event: QEvent) -> bool:
        # Esc is the window's Stop shortcut: while the saved-prompt list shows, it closes the list.
        if (event.type() == QEvent.Type.ShortcutOverride and self.key_filter is not None
                and isinstance(event, QKeyEvent) and self.key_filter(event, True)):
            event.accept()
            return True
        return super().event(event)

    def keyPressEvent(self, event: QKeyEvent) -> None:
        if self.key_filter is not None and self.key_filter(event, False):
            return
        enter = event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter)
        if enter and not event.modifiers() & Qt.KeyboardModifier.ShiftModifier:
            self.submit()
            return
        super().keyPressEvent(event)

    def submit(self) -> None:
        """Enter, and the Send button: the text goes, or stays where sending waits."""
        text = self.toPlainText().strip()
        if not text:
            return
        if not self.can_submit:
            self.refused.emit()
            return
        self.clear()
        self.submitted.emit(text)

    def canInsertFromMimeData(self, source: QMimeData) -> bool:
        return bool(file_paths_of(source)) or source.hasImage() or super().canInsertFromMimeData(source)

    def insertFromMimeData(self, source: QMimeData) -> None:
        """Files first (a file manager's copy may carry an icon image too), then an image."""
        paths = file_paths_of(source)
        if paths:
            self.files_given.emit(paths)
        elif source.hasImage() and isinstance(image := source.imageData(), QImage) and not image.isNull():
            self.image_given.emit(image)
        else:
            super().insertFromMimeData(source)


class ComposerButton(QToolButton):
    """A round icon button inside the box; its glyph follows the palette's text colour.
    spoken: its name to a screen reader (it has no text)."""

    def __init__(self, glyph: str, name: str, tooltip: str, spoken: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.glyph = glyph
        self.setObjectName(name)
        self.setToolTip(tooltip)
        self.setAccessibleName(spoken)
        self.setCursor(Qt.CursorShape.PointingHandCursor)
        self.setIconSize(icon_size(18))
        self.setFixedSize(30, 30)
        self._paint_glyph()

    def changeEvent(self, event) -> None:
        super().changeEvent(event)
        if event.type() in (event.Type.PaletteChange, event.Type.StyleChange, event.Type.EnabledChange):
            self._paint_glyph()

    def _paint_glyph(self) -> None:
        group = QPalette.ColorGroup.Active if self.isEnabled() else QPalette.ColorGroup.Disabled
        self.setIcon(glyph_icon(self.glyph, self.palette().color(group, self.foregroundRole())))


class ComposerBox(QFrame):
    """The text field is `composer` (tests and controllers type into it); `send_button` and
    `stop_button` share one place, only one of them shown."""

    def __init__(self, placeholder: str, send_tooltip: str = "Send (Enter)", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("composerBox")
        self.composer = Composer()
        self.composer.setObjectName("composerText")
        self.composer.setAccessibleName("Message")
        self.composer.setTabChangesFocus(True)  # Tab leaves the box for its buttons, as in any form
        self.composer.setPlaceholderText(placeholder)
        self.composer.setFrameShape(QFrame.Shape.NoFrame)
        self.composer.setFixedHeight(COMPOSER_MIN_H)
        self.tray = AttachmentTray()
        self.notice = QLabel()  # why Enter did not send, while it cannot
        self.notice.setObjectName("composerNotice")
        self.notice.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)  # one line, elided
        self.notice.hide()
        self.queue_bar = Banner("Queued: sent when the reply ends", "Keep the message here without sending it",
                                "queueLabel")
        self.queue_bar.cancelled.connect(lambda: self.set_queued(False))
        self.queued = False
        self.saved_prompts: list[SavedPrompt] = []  # the prompt library (ui/controllers/prompts.py)
        self.prompt_list = QListWidget()  # "/" and a name's first letters: the saved prompts that match
        self.prompt_list.setObjectName("promptList")
        self.prompt_list.setAccessibleName("Saved prompts")
        self.prompt_list.setFocusPolicy(Qt.FocusPolicy.NoFocus)  # the keys stay in the text
        self.prompt_list.hide()
        self._matches: list[SavedPrompt] = []
        self.attach_button = ComposerButton("paperclip", "attachButton",
                                            "Attach files: PDF, Word, PowerPoint, Excel, HTML, text, Markdown, "
                                            "code, images… (or drop or paste them)", "Attach files")
        # The chat's MCP tools (ui/controllers/tool_rounds.py fills its menu); a chat tab shows it.
        self.tools_button = QToolButton()
        self.tools_button.setObjectName("toolsButton")
        self.tools_button.setText("Tools")
        self.tools_button.setCursor(Qt.CursorShape.PointingHandCursor)
        self.tools_button.setToolTip("The MCP servers whose tools this chat's model may call")
        # clicked + popup(), not setMenu(): a tool button's own menu runs a nested event loop
        self.tools_menu = QMenu(self.tools_button)
        self.tools_menu.setToolTipsVisible(True)  # a tool's description
        self.tools_button.clicked.connect(self._show_tools_menu)
        self.tools_button.hide()
        self.send_button = ComposerButton("send", "sendButton", send_tooltip, "Send")
        self.stop_button = ComposerButton("stop", "stopButton", "Stop the reply being written", "Stop the reply")
        self.file_dialog: QFileDialog | None = None  # the one open, if any
        self.busy = False
        self.send_tooltip = send_tooltip
        self._layout()
        self.attach_button.clicked.connect(self.choose_files)
        self.composer.files_given.connect(self.attach)
        self.composer.image_given.connect(self.tray.add_image)
        self.composer.focus_changed.connect(self._show_typing)
        self.composer.refused.connect(self._say_why)
        self.composer.textChanged.connect(self._show_matching_prompts)
        # The box grows with what is typed (wrapped lines too), then scrolls.
        self.composer.document().documentLayout().documentSizeChanged.connect(lambda _size: self._fit_height())
        self.composer.key_filter = self._prompt_keys
        self.prompt_list.itemClicked.connect(lambda item: self._use_prompt(self.prompt_list.row(item)))
        self.stop_button.clicked.connect(lambda: self.set_queued(False))  # Stop: the text stays to rethink
        self.tray.changed.connect(self._update_send)
        self.drops = accept_file_drops(self, self.attach)
        self.set_busy(False)

    def _fit_height(self) -> None:
        """As tall as its lines, from COMPOSER_MIN_H up to COMPOSER_MAX_LINES lines."""
        c = self.composer
        lines = max(1, round(c.document().documentLayout().documentSize().height()))  # a plain layout counts lines
        margins = c.contentsMargins()
        chrome = round(2 * c.document().documentMargin()) + margins.top() + margins.bottom()
        first = c.document().firstBlock()
        line = c.blockBoundingRect(first).height() / max(1, first.layout().lineCount())  # a laid-out line's
        height = round(min(lines, COMPOSER_MAX_LINES) * line) + chrome
        c.setFixedHeight(max(COMPOSER_MIN_H, height))

    def _layout(self) -> None:
        buttons = QHBoxLayout()
        buttons.setContentsMargins(0, 0, 0, 0)
        buttons.addWidget(self.attach_button)
        buttons.addWidget(self.tools_button)
        buttons.addStretch(1)
        buttons.addWidget(self.send_button)
        buttons.addWidget(self.stop_button)
        box = self.box_layout = QVBoxLayout(self)
        box.setContentsMargins(8, 4, 6, 4)
        box.setSpacing(2)
        box.addWidget(self.tray)
        box.addWidget(self.notice)
        box.addWidget(self.queue_bar)
        box.addWidget(self.prompt_list)
        box.addWidget(self.composer)
        box.addLayout(buttons)

    def _show_typing(self, focused: bool) -> None:
        self.setProperty("typing", focused)
        self.style().unpolish(self)
        self.style().polish(self)

    def _show_tools_menu(self) -> None:
        """Above the button, which sits at the window's bottom edge: dropped below it, a server
        with its tools listed ran past the window (issue 39, defect 13). The menu is filled as
        it shows (aboutToShow), so its height is known only once popup() returns."""
        button_top = self.tools_button.mapToGlobal(QPoint(0, 0))
        self.tools_menu.popup(button_top)
        above = button_top.y() - self.tools_menu.height()
        screen = self.tools_button.screen().availableGeometry()
        if above >= screen.top():
            self.tools_menu.move(button_top.x(), above)

    def choose_files(self) -> None:
        """The paperclip: a file dialog opened with open() (no nested event loop)."""
        self.file_dialog = open_files_dialog(self, "Attach files", ATTACH_FILTERS, self._chosen)
        self.file_dialog.finished.connect(lambda _result: setattr(self, "file_dialog", None))

    def _chosen(self, paths: list[str]) -> None:
        self.attach([Path(p) for p in paths])
        self.composer.setFocus()

    def attach(self, paths: Sequence[Path]) -> None:
        self.tray.add_files(paths)

    def restore_documents(self, documents: Sequence[NewDocument]) -> None:
        self.tray.add_documents(documents)

    def take_documents(self) -> tuple[NewDocument, ...]:
        """The files read, to go with the message being sent; the chips go."""
        documents = self.tray.ready_documents()
        self.tray.clear()
        return documents

    def can_send(self) -> bool:
        return not self.busy and not self.tray.extracting() and not self.tray.failed()

    def _why_not(self) -> str:
        """Why the message waits, in one line ("" while a reply is written: Enter then keeps
        the text, as it always did, and Stop is the box's button)."""
        if self.busy:
            return ""
        failed = [chip.path.name for chip in self.tray.failed()]
        if len(failed) == 1:
            return f"Not sent: {failed[0]} could not be read. Remove it (×) to send without it."
        if failed:
            return f"Not sent: {len(failed)} files could not be read ({', '.join(failed)}). Remove them (×) to send."
        return "Not sent yet: wait until the files are read." if self.tray.extracting() else ""

    def _say_why(self) -> None:
        if self.busy and not self.tray.extracting() and not self.tray.failed():
            self.set_queued(True)
            return
        self.notice.setToolTip(self._why_not())
        self._show_notice()

    # ----- the prompt library: "/" and a name --------------------------------------------

    def set_saved_prompts(self, prompts: Sequence[SavedPrompt]) -> None:
        self.saved_prompts = list(prompts)
        self._show_matching_prompts()

    def _show_matching_prompts(self) -> None:
        text = self.composer.toPlainText()
        typing_a_name = text.startswith("/") and "\n" not in text
        self._matches = matching(self.saved_prompts, text[1:]) if typing_a_name else []
        self.prompt_list.clear()
        for prompt in self._matches:
            self.prompt_list.addItem(f"/{prompt.name}  —  {_first_line(prompt.text)}")
        if self._matches:
            self.prompt_list.setCurrentRow(0)
            rows = min(len(self._matches), PROMPT_ROWS)  # as tall as its rows, up to six, then it scrolls
            listed = self.prompt_list
            listed.setFixedHeight(rows * listed.sizeHintForRow(0) + 2 * listed.frameWidth())
        self.prompt_list.setVisible(bool(self._matches))

    def _prompt_keys(self, event: QKeyEvent, only_asking: bool) -> bool:
        """While the list shows: Up and Down choose, Enter takes the prompt, Esc closes the
        list (the "/" text stays); every other key types on. only_asking: whether the key is
        ours (a shortcut override), without acting on it."""
        if not self.prompt_list.isVisible():
            return False
        key, row = event.key(), self.prompt_list.currentRow()
        if only_asking:
            return key in (Qt.Key.Key_Down, Qt.Key.Key_Up, Qt.Key.Key_Return, Qt.Key.Key_Enter, Qt.Key.Key_Escape)
        if key in (Qt.Key.Key_Down, Qt.Key.Key_Up):
            step = 1 if key == Qt.Key.Key_Down else -1
            self.prompt_list.setCurrentRow(max(0, min(len(self._matches) - 1, row + step)))
            return True
        if key in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
            self._use_prompt(row)
            return True
        if key == Qt.Key.Key_Escape:
            self.prompt_list.hide()
            return True
        return False

    def _use_prompt(self, row: int) -> None:
        """The prompt's text in place of "/name", its first {{variable}} selected to type over."""
        if not 0 <= row < len(self._matches):
            return
        text = self._matches[row].text
        self.composer.setPlainText(text)  # (no "/" any more: the list goes)
        cursor = self.composer.textCursor()
        where = first_variable(text)
        if where is None:
            cursor.movePosition(cursor.MoveOperation.End)
        else:
            cursor.setPosition(where[0])
            cursor.setPosition(where[1], cursor.MoveMode.KeepAnchor)
        self.composer.setTextCursor(cursor)
        self.composer.setFocus()

    # ----- a message queued while a reply is written -------------------------------------

    def set_queued(self, queued: bool) -> None:
        """Enter while a reply is written queues the message: it stays in the box (still
        editable, kept as the draft over a restart) and is sent when the reply ends. Cancel,
        or Stop, leaves it there unsent."""
        self.queued = queued
        self.queue_bar.setVisible(queued)

    def _send_queued(self) -> None:
        """After the reply's end has been handled (the chat's busy state settled)."""
        if self.busy:  # another reply began meanwhile (Regenerate): wait for that one
            self.set_queued(True)
        else:
            self.composer.submit()  # sends, or says why not (a file still being read)

    def _show_notice(self) -> None:
        whole = self.notice.toolTip()
        room = max(40, self.notice.width() or self.width() - 20)
        self.notice.setText(self.notice.fontMetrics().elidedText(whole, Qt.TextElideMode.ElideMiddle, room))
        self.notice.setVisible(bool(whole))

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        if self.notice.isVisible():
            self._show_notice()

    def set_busy(self, busy: bool) -> None:
        """Send while idle, Stop while a reply is written (the same place in the box)."""
        self.busy = busy
        self.send_button.setVisible(not busy)
        self.stop_button.setVisible(busy)
        self.stop_button.setEnabled(busy)
        # At once, not at the next layout pass: until then the button just shown sat where it
        # was last placed, beside the place (a window grabbed then showed it there).
        self.box_layout.activate()
        self._update_send()
        if not busy and self.queued:
            self.set_queued(False)
            QTimer.singleShot(0, self._send_queued)

    def _update_send(self) -> None:
        """Enter and Send wait while a reply is written or a file is being read, or could not
        be read (Send stays clickable then, to say why); the line saying why goes with it."""
        allowed = self.can_send()
        self.send_button.setEnabled(not self.busy and not self.tray.extracting())
        self.composer.can_submit = allowed
        if self.tray.extracting() and not self.busy:
            self.send_button.setToolTip("Waiting for the files to be read")
        elif self.tray.failed() and not self.busy:
            self.send_button.setToolTip("A file could not be read: remove it (×) to send")
        else:
            self.send_button.setToolTip(self.send_tooltip)
        if self.notice.isVisible():  # still true, or gone with what blocked
            self.notice.setToolTip(self._why_not())
            self._show_notice()


def _first_line(text: str, chars: int = 60) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= chars else line[: chars - 1] + "…"
