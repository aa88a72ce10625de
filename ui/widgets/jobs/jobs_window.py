"""Chat → Jobs…: the chat database's background jobs (app/jobs), one row each (job, input,
state, done/failed/total, items a minute and time left while one runs), and for the one
selected a progress bar, its actions (Pause, Resume, Cancel, Retry failed, Export…, Delete…,
also the Delete key, after a confirmation), its answers (Enter or a double-click opens one as
a chat, to go on from it) and its failed items with their errors. Not
modal: it stays open beside the chats and follows the jobs live. It shows and asks; the
controller (ui/controllers/jobs.py) does."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, Qt, Signal
from PySide6.QtGui import QKeyEvent, QKeySequence
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QMessageBox,
    QProgressBar,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from app.jobs import JobView, duration_text
from storage import ItemRecord
from ui.widgets.common.file_dialogs import open_file_dialog

COLUMNS = ("Job", "Input", "Model", "State", "Progress", "Rate", "Time left")
PROGRESS_COLUMN = COLUMNS.index("Progress")
EXPORT_FILTERS = "JSON Lines (*.jsonl);;CSV (*.csv)"  # chorus batch export's formats
MAX_ANSWERS = 1000  # listed for the selected job (Export… writes them all)


class JobsWindow(QDialog):
    new_requested = Signal()
    pause_requested = Signal(str)
    resume_requested = Signal(str)
    cancel_requested = Signal(str)
    retry_requested = Signal(str)
    export_requested = Signal(str, str)  # job id, path (.jsonl or .csv)
    selected = Signal(str)  # a job was selected: list its failed items
    delete_requested = Signal(str)  # confirmed: delete the job (a running one is cancelled first)
    open_item_requested = Signal(str, int)  # job id, item id: open that answer as a chat

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Jobs")
        self.resize(860, 560)
        self.views: list[JobView] = []
        self.delete_box: QMessageBox | None = None
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.setAccessibleName("Jobs")
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().setVisible(False)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)
        self.table.itemSelectionChanged.connect(self._selection_changed)
        self.empty_label = QLabel("No jobs yet. New job… runs a prompt template over every row of a CSV or "
                                  "JSONL file, on the model's spare capacity: chats go first.")
        self.empty_label.setWordWrap(True)
        self.progress = QProgressBar()
        self.progress.setAccessibleName("Progress of the selected job")
        self.progress.setFormat("%v/%m")
        self.detail_label = QLabel()
        self.buttons: dict[str, QPushButton] = {}
        row = QHBoxLayout()
        for key, text in (("new", "New job…"), ("pause", "Pause"), ("resume", "Resume"), ("cancel", "Cancel"),
                          ("retry", "Retry failed"), ("export", "Export…"), ("delete", "Delete…")):
            button = QPushButton(text)
            button.setAutoDefault(False)
            self.buttons[key] = button
            row.addWidget(button)
            if key == "new":
                row.addStretch(1)
        self.buttons["new"].clicked.connect(self.new_requested.emit)
        for key, signal in (("pause", self.pause_requested), ("resume", self.resume_requested),
                            ("cancel", self.cancel_requested), ("retry", self.retry_requested)):
            self.buttons[key].clicked.connect(lambda _c=False, s=signal: self._emit_for_selected(s))
        self.buttons["export"].clicked.connect(self.ask_export)
        self.buttons["delete"].clicked.connect(self.ask_delete)
        self.table.installEventFilter(self)  # the Delete key on the list asks to delete its job
        self.failed_label = QLabel("Failed items")
        self.failed_table = _item_table(("Row", "Input", "Error"), "Failed items")
        self.answers_table = _item_table(("Row", "Input", "Answer"), "Answers")
        self.answers_table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.answers_table.setToolTip("Enter or a double-click opens the answer as a chat")
        self.answers_table.itemActivated.connect(self._answer_activated)
        failed_page = QWidget()
        failed_layout = QVBoxLayout(failed_page)
        failed_layout.setContentsMargins(0, 0, 0, 0)
        failed_layout.addWidget(self.failed_label)
        failed_layout.addWidget(self.failed_table)
        self.item_tabs = QTabWidget()
        self.item_tabs.addTab(self.answers_table, "Answers")
        self.item_tabs.addTab(failed_page, "Failed")
        layout = QVBoxLayout(self)
        layout.addWidget(self.table, 3)
        layout.addWidget(self.empty_label)
        layout.addWidget(self.detail_label)
        layout.addWidget(self.progress)
        layout.addLayout(row)
        layout.addWidget(self.item_tabs, 2)
        self._update_buttons()

    # ----- what the controller shows ------------------------------------------------------

    def set_jobs(self, views: list[JobView]) -> None:
        """The whole list, newest first; the selection stays on its job (else the first)."""
        chosen = self.selected_id()
        self.views = list(views)
        self.table.blockSignals(True)
        self.table.setRowCount(len(self.views))
        for index, view in enumerate(self.views):
            self._fill(index, view)
        ids = [v.id for v in self.views]
        if ids:
            self.table.selectRow(ids.index(chosen) if chosen in ids else 0)
        self.table.blockSignals(False)
        self.empty_label.setVisible(not ids)
        if self.selected_id() != chosen or chosen is None:
            self._selection_changed()  # another job: its failed items are asked for
        else:
            self._show_detail(self.selected_view())  # the same job: its failed items stay listed

    def update_job(self, view: JobView) -> None:
        """One job's row again (live progress), without touching the others or the selection."""
        for index, old in enumerate(self.views):
            if old.id == view.id:
                self.views[index] = view
                self._fill(index, view)
                if view.id == self.selected_id():
                    self._show_detail(view)
                return

    def set_failed(self, job_id: str, items: list[ItemRecord]) -> None:
        if job_id != self.selected_id():
            return
        self.failed_table.setRowCount(len(items))
        for index, item in enumerate(items):
            fields = ", ".join(f"{k}={v}" for k, v in item.fields.items())
            for column, text in enumerate((str(item.seq + 1), fields, item.error or "")):
                cell = QTableWidgetItem(text)
                cell.setToolTip(text)
                self.failed_table.setItem(index, column, cell)
        self.failed_label.setText(f"Failed items ({len(items)})" if items else "Failed items: none")
        self.item_tabs.setTabText(1, f"Failed ({len(items)})" if items else "Failed")

    def set_answers(self, job_id: str, items: list[ItemRecord]) -> None:
        """The selected job's answered items, in order (the first MAX_ANSWERS); listed again
        while it runs, the answer the user is on stays current (found by its item, wherever
        the answers that came meanwhile moved it)."""
        if job_id != self.selected_id():
            return
        table = self.answers_table
        current = table.item(table.currentRow(), 0) if table.currentRow() >= 0 else None
        on_item, on_column = (current.data(Qt.ItemDataRole.UserRole), table.currentColumn()) if current else (None, 0)
        shown = items[:MAX_ANSWERS]
        self.answers_table.setRowCount(len(shown))
        for index, item in enumerate(shown):
            fields = ", ".join(f"{k}={v}" for k, v in item.fields.items() if not k.startswith("@"))
            answer = " ".join((item.answer or "").split())
            for column, text in enumerate((str(item.seq + 1), fields, answer)):
                cell = QTableWidgetItem(text)
                cell.setToolTip(text[:2000])
                if column == 0:
                    cell.setData(Qt.ItemDataRole.UserRole, item.id)
                self.answers_table.setItem(index, column, cell)
        more = f" (the first {MAX_ANSWERS:,})" if len(items) > MAX_ANSWERS else ""
        self.item_tabs.setTabText(0, f"Answers ({len(items):,}{more})" if items else "Answers")
        row = next((i for i, item in enumerate(shown) if item.id == on_item), None)
        if row is not None:
            table.setCurrentCell(row, on_column)

    def _answer_activated(self, cell: QTableWidgetItem) -> None:
        chosen = self.selected_id()
        first = self.answers_table.item(cell.row(), 0)
        if chosen is not None and first is not None:
            self.open_item_requested.emit(chosen, int(first.data(Qt.ItemDataRole.UserRole)))

    def selected_id(self) -> str | None:
        rows = self.table.selectionModel().selectedRows()
        if not rows or rows[0].row() >= len(self.views):
            return None
        return self.views[rows[0].row()].id

    def selected_view(self) -> JobView | None:
        chosen = self.selected_id()
        return next((v for v in self.views if v.id == chosen), None)

    def ask_export(self) -> None:
        view = self.selected_view()
        if view is None:
            return
        open_file_dialog(self, "Export the job's results", EXPORT_FILTERS,
                         lambda path, chosen: self.export_requested.emit(view.id, _with_suffix(path, chosen)),
                         directory=f"{view.id}.jsonl", save=True)

    def ask_delete(self) -> QMessageBox | None:
        """Asks first, in a window-modal box opened with open() (no nested event loop)."""
        view = self.selected_view()
        if view is None or not view.deletable:
            return None
        what = f"Delete job {view.id} ({view.source or 'no input'}) with its {view.total} items and their results?"
        if view.running:
            what += "\nIt is running: it is cancelled first, then deleted."
        elif view.state == "interrupted":
            what += ("\nA quit or a kill left it running; if `chorus batch` still runs it, "
                     "its next results are lost.")
        if view.kind != "template":
            what += "\nThe batch's output and error files go too; its input file stays."
        box = QMessageBox(QMessageBox.Icon.Question, "Delete job", what,
                          QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No, self)
        box.setDefaultButton(QMessageBox.StandardButton.No)
        job_id = view.id

        def answered(button) -> None:
            if box.standardButton(button) == QMessageBox.StandardButton.Yes:
                self.delete_requested.emit(job_id)

        box.buttonClicked.connect(answered)
        box.finished.connect(lambda _result: self._delete_box_closed(box))
        self.delete_box = box
        box.open()
        return box

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 (Qt's name)
        """The platform's Delete key on the list of jobs."""
        if (watched is self.table and event.type() == QEvent.Type.KeyPress and isinstance(event, QKeyEvent)
                and event.matches(QKeySequence.StandardKey.Delete)):
            self.ask_delete()
            return True
        return super().eventFilter(watched, event)

    def _delete_box_closed(self, box: QMessageBox) -> None:
        if self.delete_box is box:
            self.delete_box = None
        box.deleteLater()

    # ----- inside -------------------------------------------------------------------------

    def _fill(self, index: int, view: JobView) -> None:
        kind = "" if view.kind == "template" else f" ({view.kind})"
        texts = (view.id + kind, view.source, view.model, view.state, view.progress_text(), view.rate_text(),
                 duration_text(view.eta_s) if view.running else "")
        for column, text in enumerate(texts):
            cell = self.table.item(index, column)
            if cell is None:
                cell = QTableWidgetItem()
                self.table.setItem(index, column, cell)
            if cell.text() != text:
                cell.setText(text)
            if column == PROGRESS_COLUMN:
                cell.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)

    def _selection_changed(self) -> None:
        view = self.selected_view()
        self._show_detail(view)
        self.failed_table.setRowCount(0)
        self.failed_label.setText("Failed items")
        self.answers_table.setRowCount(0)
        self.item_tabs.setTabText(0, "Answers")
        self.item_tabs.setTabText(1, "Failed")
        if view is not None:
            self.selected.emit(view.id)

    def _show_detail(self, view: JobView | None) -> None:
        if view is None:
            self.progress.setRange(0, 1)
            self.progress.setValue(0)
            self.detail_label.setText("")
        else:
            self.progress.setRange(0, max(1, view.total))
            self.progress.setValue(view.finished)
            parts = [view.state, view.progress_text()]
            if view.running:
                parts += [view.rate_text() or "measuring…",
                          f"{duration_text(view.eta_s)} left" if view.eta_s is not None else ""]
            self.detail_label.setText(" · ".join(p for p in parts if p))
        self._update_buttons()

    def _update_buttons(self) -> None:
        view = self.selected_view()
        template = view is not None and view.kind == "template"
        running = view is not None and view.running
        resumable = view is not None and view.resumable
        self.buttons["pause"].setEnabled(template and running)
        self.buttons["resume"].setEnabled(resumable)
        self.buttons["cancel"].setEnabled(template and (running or resumable))
        self.buttons["retry"].setEnabled(template and not running and view is not None and view.failed > 0)
        self.buttons["export"].setEnabled(view is not None)
        self.buttons["delete"].setEnabled(view is not None and view.deletable)

    def _emit_for_selected(self, signal) -> None:
        chosen = self.selected_id()
        if chosen is not None:
            signal.emit(chosen)


def _item_table(columns: tuple[str, ...], name: str) -> QTableWidget:
    """A read-only list of a job's items: the row number, its input (resizable), the rest."""
    table = QTableWidget(0, len(columns))
    table.setHorizontalHeaderLabels(columns)
    table.setAccessibleName(name)
    table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    table.verticalHeader().setVisible(False)
    header = table.horizontalHeader()
    header.setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
    header.setSectionResizeMode(1, QHeaderView.ResizeMode.Interactive)
    header.setStretchLastSection(True)
    table.setColumnWidth(1, 260)
    return table


def _with_suffix(path: str, name_filter: str) -> str:
    if path.lower().endswith((".csv", ".jsonl")):
        return path
    return path + (".csv" if "*.csv" in name_filter else ".jsonl")
