"""The dependency rule ui -> app -> (inference | storage), no Qt outside ui/: pyproject.toml's
import-linter contracts, run on this source tree and on a planted tree that breaks each one.

import-linter follows every import, also those inside functions and indirect chains
(app -> storage -> PySide6 is app importing Qt).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the backport, which import-linter itself installs there
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"  # installed with the `test` extra

# Just enough of the four packages for the contracts, including the two allowed lazy imports.
CLEAN_TREE = {
    "ui/__init__.py": "",
    "ui/app_main.py": "import PySide6.QtWidgets\nimport app.cli.main\n",
    "ui/bench.py": "import pyqtgraph\n",
    "app/__init__.py": "",
    "app/cli/__init__.py": "",
    "app/cli/main.py": "import inference.core.engine\nimport storage.db\n",
    "app/cli/gui.py": "def run():\n    from ui.app_main import run_app\n    from ui.bench import run_ui_bench\n",
    "inference/__init__.py": "",
    "inference/core/engine.py": "import llama_cpp\n",
    "storage/__init__.py": "",
    "storage/db.py": "import sqlalchemy\n",
}


def lint_imports(cwd: Path, config: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-logo", "--no-cache", str(config)],
        cwd=cwd, env={"PYTHONPATH": str(cwd), "PATH": ""}, capture_output=True, text=True, timeout=120,
    )


def test_this_tree_keeps_every_contract() -> None:
    out = lint_imports(ROOT, ROOT / "pyproject.toml")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Contracts: 3 kept, 0 broken." in out.stdout


def test_the_contracts_state_the_whole_rule() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]
    contracts = {c["id"]: c for c in config["contracts"]}
    assert set(config["root_packages"]) == {"app", "ui", "inference", "storage"}
    assert contracts["layers"]["layers"] == ["ui", "app", "inference | storage"]
    assert set(contracts["independent"]["modules"]) == {"inference", "storage"}
    assert set(contracts["no-qt"]["source_modules"]) == {"app", "inference", "storage"}
    assert {"PySide6", "pyqtgraph", "qasync"} <= set(contracts["no-qt"]["forbidden_modules"])
    allowed = {"app.cli.gui -> ui.app_main", "app.cli.gui -> ui.bench"}  # the CLI's GUI commands
    for contract in contracts.values():
        assert set(contract.get("ignore_imports", allowed)) == allowed


@pytest.fixture
def planted(tmp_path: Path):
    """A small tree under the real contracts; write(path, source) plants a file, run() lints."""
    config = tmp_path / "pyproject.toml"
    config.write_text((ROOT / "pyproject.toml").read_text(encoding="utf-8"), encoding="utf-8")

    def write(path: str, source: str) -> None:
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(source, encoding="utf-8")

    for path, source in CLEAN_TREE.items():
        write(path, source)

    def run() -> subprocess.CompletedProcess[str]:
        return lint_imports(tmp_path, config)

    return write, run


def test_the_planted_clean_tree_passes(planted) -> None:
    _write, run = planted
    out = run()
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.parametrize(
    ("path", "source", "reported"),
    [
        ("inference/bad.py", "def f():\n    import storage.db\n", "inference is not allowed to import storage"),
        ("storage/bad.py", "from inference import engine\n", "storage is not allowed to import inference"),
        ("storage/bad.py", "import app.cli.main\n", "storage is not allowed to import app"),
        ("app/cli/chat.py", "def f():\n    from ui.bench import x\n", "app is not allowed to import ui"),
        ("inference/bad.py", "def f():\n    import qasync\n", "inference is not allowed to import qasync"),
        ("storage/bad.py", "from PySide6.QtCore import QObject\n", "storage is not allowed to import PySide6"),
        ("app/plot.py", "import pyqtgraph as pg\n", "app is not allowed to import pyqtgraph"),
    ],
)
def test_a_planted_violation_is_reported(planted, path: str, source: str, reported: str) -> None:
    write, run = planted
    write(path, source)
    out = run()
    assert out.returncode == 1, out.stdout + out.stderr
    assert reported in out.stdout
