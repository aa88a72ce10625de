"""The versions the About dialog shows, gathered without Qt (the dialog adds Qt's own) and
without llama.cpp: its build is what the engine reported (ModelInfo.backend), since the
window's process never loads it."""

from __future__ import annotations

import platform
import sqlite3
import sys
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from inference import BackendInfo

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"


@dataclass(frozen=True, slots=True)
class AboutInfo:
    chorus: str
    backend: BackendInfo | None  # the engine's llama.cpp build; None until an engine reported it
    pyside6: str
    sqlite: str
    python: str
    data_dir: Path
    frozen: bool  # running from the PyInstaller bundle

    def rows(self, qt_version: str | None = None) -> list[tuple[str, str]]:
        """(label, value) pairs in the order a person reads them. Qt's runtime version
        comes from Qt itself, so the (Qt) caller passes it in."""
        qt = f"{qt_version} (PySide6 {self.pyside6})" if qt_version else f"PySide6 {self.pyside6}"
        b = self.backend
        engine = [("llama.cpp", f"{b.llama_cpp} via llama-cpp-python {b.llama_cpp_python}"),
                  ("GPU offload", "yes" if b.gpu_offload else "no (CPU only)"),
                  ("llama.cpp build", b.system_info)] if b is not None else [
                  ("llama.cpp", "not known yet: no local model has loaded")]
        return [
            ("Chorus", self.chorus + (" (bundle)" if self.frozen else "")),
            *engine,
            ("Qt", qt),
            ("SQLite", self.sqlite),
            ("Python", self.python),
            ("Data folder", str(self.data_dir)),
        ]


def chorus_version() -> str:
    """From the installed package's metadata; a source checkout that was never installed
    reads pyproject.toml instead."""
    try:
        return metadata.version("chorus")
    except metadata.PackageNotFoundError:
        pass
    if sys.version_info < (3, 11):  # no tomllib before 3.11
        return "unknown"
    import tomllib  # type: ignore[import-not-found, unused-ignore]  # mypy checks as 3.10

    try:
        return str(tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]["version"])
    except (OSError, KeyError, ValueError):
        return "unknown"


def _distribution_version(*names: str) -> str:
    for name in names:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return "unknown"


def gather_about(data_dir: Path, backend: BackendInfo | None) -> AboutInfo:
    return AboutInfo(
        chorus=chorus_version(),
        backend=backend,
        pyside6=_distribution_version("PySide6-Essentials", "PySide6"),
        sqlite=sqlite3.sqlite_version,
        python=f"{platform.python_version()} ({platform.python_implementation()})",
        data_dir=Path(data_dir),
        frozen=bool(getattr(sys, "frozen", False)),
    )
