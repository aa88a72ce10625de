"""The dependency direction ui -> app -> (inference, storage), checked on the source (AST).

inference/ and storage/ import no Qt and nothing of app/ or ui/; neither imports the other.
app/ imports no Qt.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
GUI_AND_APP = {"PySide6", "qasync", "shiboken6", "ui", "app"}
QT = {"PySide6", "qasync", "shiboken6", "pyqtgraph"}
FORBIDDEN = {
    "inference": GUI_AND_APP | {"storage"},
    "storage": GUI_AND_APP | {"inference"},
    "app": QT,  # Qt-free services; only the CLI's GUI commands reach up into ui/, lazily
}


def imported_modules(source: str, package: str) -> set[str]:
    """Top-level names of every module the source imports (also inside functions).

    Relative imports resolve into `package`; importlib.import_module("x") and
    __import__("x") with a literal name count too.
    """
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                found.add(node.module or "")
            elif node.level == 1:
                found.add(package)
            else:  # from .. import x / from ..x import y: above the package, at the root
                found.update([node.module] if node.module else [a.name for a in node.names])
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in ("import_module", "__import__") and isinstance(node.args[0].value, str):
                found.add(node.args[0].value)
    return {name.split(".")[0] for name in found if name}


def python_files(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


def violations(package: str) -> list[str]:
    bad = []
    for path in python_files(package):
        names = imported_modules(path.read_text(encoding="utf-8"), package)
        for name in sorted(names & FORBIDDEN[package]):
            bad.append(f"{path.relative_to(ROOT)} imports {name}")
    return bad


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_layer_imports_only_downwards(package: str) -> None:
    assert (ROOT / package / "__init__.py").is_file()
    assert violations(package) == []


def test_the_check_sees_the_engine_sources() -> None:
    names = {p.name for p in python_files("inference")}
    assert {"scheduler.py", "kv_cache.py", "engine.py", "runner.py"} <= names
    # and it does see real imports in them
    source = (ROOT / "inference" / "scheduler.py").read_text(encoding="utf-8")
    assert "inference" in imported_modules(source, "inference")


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("import PySide6.QtCore", {"PySide6"}),
        ("from PySide6.QtWidgets import QWidget", {"PySide6"}),
        ("import qasync as q", {"qasync"}),
        ("def f():\n    from app import cli", {"app"}),
        ("from ui.widgets.main_window import MainWindow", {"ui"}),
        ("try:\n    import shiboken6\nexcept ImportError:\n    pass", {"shiboken6"}),
        ("import importlib\nimportlib.import_module('storage.db')", {"importlib", "storage"}),
        ("__import__('PySide6')", {"PySide6"}),
        ("from . import errors", {"inference"}),
        ("from .errors import RequestError", {"inference"}),
        ("from .. import app", {"app"}),
        ("from ..storage.db import x", {"storage"}),
        ("import applications", {"applications"}),  # a name that merely starts with 'app'
        ("x = 'import PySide6'", set()),
    ],
)
def test_import_detection(source: str, expected: set[str]) -> None:
    assert imported_modules(source, "inference") == expected


def test_a_forbidden_import_is_reported() -> None:
    assert imported_modules("from app.paths import data_dir", "storage") & FORBIDDEN["storage"] == {"app"}
    assert imported_modules("import inference.engine", "storage") & FORBIDDEN["storage"] == {"inference"}
    assert imported_modules("import storage", "inference") & FORBIDDEN["inference"] == {"storage"}
    assert imported_modules("import pyqtgraph as pg", "app") & FORBIDDEN["app"] == {"pyqtgraph"}
