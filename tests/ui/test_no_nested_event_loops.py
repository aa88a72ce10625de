"""No nested event loops in ui/: a dialog's exec() or a static dialog helper
(QMessageBox.warning, QInputDialog.getText, QFileDialog.getOpenFileName, ...) runs its own
event loop inside qasync's, which stalls every asyncio task (streams, storage hops) and
breaks a task that is awaiting when it opens. Dialogs are opened with open() and signals.

An AST scan of every module under ui/, checked against known-bad snippets so it cannot
pass by finding nothing."""

from __future__ import annotations

import ast

from tests.support.paths import ROOT

UI = ROOT / "ui"

STATIC_HELPERS = {
    "QMessageBox": {"warning", "information", "critical", "question", "about", "aboutQt"},
    "QInputDialog": {"getText", "getMultiLineText", "getInt", "getDouble", "getItem"},
    "QFileDialog": {"getOpenFileName", "getOpenFileNames", "getSaveFileName", "getExistingDirectory",
                    "getOpenFileUrl", "getOpenFileUrls", "getSaveFileUrl", "getExistingDirectoryUrl",
                    "getOpenFileContent"},
    "QColorDialog": {"getColor"},
    "QFontDialog": {"getFont"},
}
EXEC_NAMES = {"exec", "exec_"}
# (module, function) allowed an exec(): the GUI benchmark drives the window from a plain
# script with a top-level QEventLoop (no qasync loop, no dialog), not nested in anything;
# the box of what stops the start (a damaged database, a data folder that cannot be made)
# runs before the app's loop exists (the only loop, and a QEventLoop: a qasync loop there
# would leave asyncio's loop state behind it).
ALLOWED_EXEC = {("bench.py", "_run_until"), ("app_main.py", "show_startup_error")}


def nested_loop_calls(source: str, module: str = "<snippet>") -> list[str]:
    """'module:line what' for every exec() call or static dialog helper in source."""
    found: list[str] = []

    class Scan(ast.NodeVisitor):
        function: str | None = None  # the innermost function being walked

        def visit_FunctionDef(self, node) -> None:
            outer, self.function = self.function, node.name
            self.generic_visit(node)
            self.function = outer

        visit_AsyncFunctionDef = visit_FunctionDef

        def visit_Call(self, node: ast.Call) -> None:
            if isinstance(node.func, ast.Attribute):
                name, owner = node.func.attr, node.func.value
                if name in EXEC_NAMES and (module, self.function) not in ALLOWED_EXEC:
                    found.append(f"{module}:{node.lineno} .{name}()")
                elif isinstance(owner, ast.Name) and name in STATIC_HELPERS.get(owner.id, ()):
                    found.append(f"{module}:{node.lineno} {owner.id}.{name}()")
            self.generic_visit(node)

    Scan().visit(ast.parse(source))
    return found


def test_the_scan_finds_each_kind_of_nested_loop() -> None:
    bad = (
        "def f(self):\n"
        "    QMessageBox.warning(self, 'a', 'b')\n"
        "    new, ok = QInputDialog.getText(self, 'Rename', 'Title:')\n"
        "    path, _ = QFileDialog.getSaveFileName(self)\n"
        "    dialog.exec()\n"
        "    menu.exec_(pos)\n"
    )
    found = nested_loop_calls(bad)
    assert [f.split(" ", 1)[1] for f in found] == [
        "QMessageBox.warning()", "QInputDialog.getText()", "QFileDialog.getSaveFileName()", ".exec()", ".exec_()"]
    good = "def f(self):\n    dialog.open()\n    QMessageBox(self).open()\n    box.warningText()\n"
    assert nested_loop_calls(good) == []


def test_the_exemption_is_for_the_benchmark_s_own_loop_only() -> None:
    source = "def _run_until(loop):\n    loop.exec()\ndef other(d):\n    d.exec()\n"
    assert nested_loop_calls(source, "bench.py") == ["bench.py:4 .exec()"]


def test_ui_has_no_exec_or_static_dialog_calls() -> None:
    modules = sorted(UI.rglob("*.py"))
    assert len(modules) >= 30, "the scan must see the whole ui package"
    assert any(p.name == "main_window.py" for p in modules)
    found = [hit for p in modules for hit in nested_loop_calls(p.read_text(encoding="utf-8"),
                                                               p.relative_to(UI).as_posix())]
    assert found == [], "nested event loops in ui/ (open the dialog with open() and signals):\n" + "\n".join(found)
