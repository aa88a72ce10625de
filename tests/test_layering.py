"""The dependency rule ui -> app -> (inference | storage), no Qt outside ui/, app and ui only
through the engine's door, the engine's rooms in layers, llama.cpp only in three rooms, ui/'s
controllers above its services above its widgets, its widget families in layers, controllers
that do not import each other, no import cycles: pyproject.toml's import-linter contracts, run
on this source tree and on a planted tree that breaks each one.

import-linter follows every import, also those inside functions and indirect chains
(app -> storage -> PySide6 is app importing Qt).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import ROOT

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the backport, which import-linter itself installs there
    import tomli as tomllib

LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"  # installed with the `test` extra

# Just enough of the four packages for the contracts, including the two allowed lazy imports.
CLEAN_TREE = {
    "ui/__init__.py": "",
    "ui/app_main.py": "import PySide6.QtWidgets\nimport app.cli.main\n",
    "ui/bench.py": "import pyqtgraph\n",
    "app/__init__.py": "",
    "app/cli/__init__.py": "",
    "app/cli/main.py": "from inference import Engine\nimport inference.gguf\nimport storage.db\n",
    "app/cli/gui.py": "def run():\n    from ui.app_main import run_app\n    from ui.bench import run_ui_bench\n",
    "inference/__init__.py": "from inference.core.engine import Engine\n",
    "inference/errors.py": "",
    "inference/params.py": "import inference.errors\n",
    "inference/outputs.py": "",
    "inference/request.py": "import inference.params\n",
    "inference/core/__init__.py": "",
    "inference/core/engine.py": "import inference.worker.runner\nimport inference.sched.scheduler\n",
    "inference/worker/__init__.py": "",
    "inference/worker/runner.py": "import llama_cpp\nimport inference.sample.rows\nimport inference.tokenizer.vocab\n",
    "inference/sched/__init__.py": "",
    "inference/sched/scheduler.py": "import inference.kv.cache_manager\nimport inference.request\n",
    "inference/speculative/__init__.py": "",
    "inference/speculative/proposer.py": "import inference.sched.scheduler\nimport inference.request\n",
    "inference/kv/__init__.py": "",
    "inference/kv/cache_manager.py": "import inference.kv.prefix_tree\n",
    "inference/kv/prefix_tree.py": "",
    "inference/sample/__init__.py": "",
    "inference/sample/rows.py": "import llama_cpp\n",
    "inference/tokenizer/__init__.py": "",
    "inference/tokenizer/vocab.py": "import llama_cpp\nimport inference.gguf.reader\n",
    "inference/gguf/__init__.py": "from inference.gguf.reader import read_gguf_header\n",
    "inference/gguf/reader.py": "import inference.errors\n",
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
    assert "Contracts: 10 kept, 0 broken." in out.stdout


def test_the_contracts_state_the_whole_rule() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]
    contracts = {c["id"]: c for c in config["contracts"]}
    assert set(config["root_packages"]) == {"app", "ui", "inference", "storage"}
    assert contracts["layers"]["layers"] == ["ui", "app", "inference | storage"]
    assert set(contracts["independent"]["modules"]) == {"inference", "storage"}
    assert set(contracts["no-qt"]["source_modules"]) == {"app", "inference", "storage"}
    assert {"PySide6", "pyqtgraph", "qasync"} <= set(contracts["no-qt"]["forbidden_modules"])
    assert contracts["rooms"]["containers"] == ["inference"]
    assert "kv | sample | tokenizer" in contracts["rooms"]["layers"]  # independent of each other
    assert contracts["llama"]["forbidden_modules"] == ["llama_cpp"]
    assert set(contracts["acyclic"]["ancestors"]) == {"app", "ui", "inference", "storage"}
    assert contracts["ui-rooms"]["containers"] == ["ui"]
    assert contracts["ui-rooms"]["layers"] == ["controllers", "services", "widgets"]
    assert contracts["widget-families"]["containers"] == ["ui.widgets"]
    # every family of ui/widgets/ in the order, and nothing else
    families = {p.name for p in (ROOT / "ui" / "widgets").iterdir() if (p / "__init__.py").exists()}
    layered = {name.strip() for names in contracts["widget-families"]["layers"] for name in names.split("|")}
    assert layered == families
    # every controller, and nothing else: the root that builds them is not one
    controllers = {f"ui.controllers.{p.stem if p.suffix else p.name}" for p in (ROOT / "ui" / "controllers").iterdir()
                   if p.name not in ("__init__.py", "root.py", "__pycache__")}
    assert set(contracts["controllers"]["modules"]) == controllers
    allowed = {"app.cli.gui -> ui.app_main", "app.cli.gui -> ui.bench"}  # the CLI's GUI commands
    for contract in contracts.values():
        if contract["id"] == "llama":  # the benchmarks' references call llama.cpp directly
            assert all(i.startswith("app.bench.") and i.endswith("-> llama_cpp") for i in contract["ignore_imports"])
            continue
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
    contracts = tomllib.loads(config.read_text(encoding="utf-8"))["tool"]["importlinter"]["contracts"]
    for contract in contracts:  # every module a contract names exists, and its ignored imports happen
        for container in contract.get("containers", []):  # a layer the tree lacks: a package
            for layer in (name.strip() for names in contract["layers"] for name in names.split("|")):
                room = tmp_path / container.replace(".", "/") / layer
                if not room.is_dir() and not room.with_suffix(".py").exists():
                    write(str((room / "__init__.py").relative_to(tmp_path)), "")
        for module in [*contract.get("forbidden_modules", []), *contract.get("modules", [])]:
            if module.split(".")[0] in ("app", "ui", "inference", "storage"):
                write(module.replace(".", "/") + ".py", "")
        for ignored in contract.get("ignore_imports", []):
            importer, imported = (part.strip() for part in ignored.split("->"))
            path = tmp_path / (importer.replace(".", "/") + ".py")
            if not path.exists():
                write(str(path.relative_to(tmp_path)), "")
            path.write_text(path.read_text(encoding="utf-8") + f"import {imported}\n", encoding="utf-8")
    for package in {p.parent for p in tmp_path.rglob("*.py")}:
        if not (package / "__init__.py").exists():
            write(str((package / "__init__.py").relative_to(tmp_path)), "")

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
        # through the engine's door only
        ("app/chat.py", "from inference.core.engine import Engine\n", "app is not allowed to import inference.core"),
        ("ui/view.py", "def f():\n    from inference.outputs import Delta\n",
         "ui is not allowed to import inference.outputs"),
        # the rooms' layers; kv, sample and tokenizer independent
        ("inference/kv/bad.py", "import inference.sched.scheduler\n",
         "inference.kv is not allowed to import inference.sched"),
        ("inference/sample/bad.py", "import inference.tokenizer.vocab\n",
         "inference.sample is not allowed to import inference.tokenizer"),
        ("inference/params.py", "def f():\n    import inference.core.engine\n",
         "inference.params is not allowed to import inference.core"),
        ("inference/sched/bad.py", "def f():\n    import inference.speculative.proposer\n",
         "inference.sched is not allowed to import inference.speculative"),
        # llama.cpp only in the worker, sample and tokenizer rooms
        ("inference/kv/disk.py", "def f():\n    import llama_cpp\n", "inference.kv is not allowed to import llama_cpp"),
        ("app/cli/probe.py", "import llama_cpp\n", "app is not allowed to import llama_cpp"),
        # ui/'s rooms: controllers -> services -> widgets, and controllers independent
        ("ui/services/presenter.py", "def f():\n    import ui.controllers.root\n",
         "ui.services is not allowed to import ui.controllers"),
        ("ui/widgets/view.py", "import ui.services.presenter\n", "ui.widgets is not allowed to import ui.services"),
        # ui/widgets/'s families in layers
        ("ui/widgets/common/bad.py", "def f():\n    import ui.widgets.chat\n",
         "ui.widgets.common is not allowed to import ui.widgets.chat"),
        ("ui/widgets/compare/bad.py", "import ui.widgets.perf\n",
         "ui.widgets.compare is not allowed to import ui.widgets.perf"),
        ("ui/controllers/welcome.py", "def f():\n    from ui.controllers.titles import Titles\n",
         "ui.controllers.welcome is not allowed to import ui.controllers.titles"),
        # no cycles, lazy imports included
        ("inference/kv/prefix_tree.py", "def f():\n    import inference.kv.cache_manager\n", "No cycles are allowed"),
    ],
)
def test_a_planted_violation_is_reported(planted, path: str, source: str, reported: str) -> None:
    write, run = planted
    write(path, source)
    out = run()
    assert out.returncode == 1, out.stdout + out.stderr
    assert reported in out.stdout
