"""What packaging adds to the running app: GPU layers from the model dialog reaching the
engine, the smoke run that the bundle check uses (run here from source), the desktop
entry installer, and an install where the C sampling kernel cannot be built."""

from __future__ import annotations

import configparser
import os
import shutil
import sqlite3
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from app.models.probe import ModelProbe
from tests.support.gui_app import WAIT_MS, App
from tests.support.paths import ROOT


@pytest.mark.model
def test_gpu_layers_from_the_dialog_reach_the_engine_settings(qtbot, qt_asyncio, tmp_path, model_path) -> None:
    app = App(qtbot, tmp_path, model_path)
    try:
        probe = app.window.model_probe
        assert isinstance(probe, ModelProbe)
        assert probe.estimate(model_path).n_ctx == 4096  # the controller's current settings
        copy = tmp_path / "copy.gguf"
        copy.symlink_to(model_path)
        app.window.model_load_requested.emit(str(copy), 0)
        qtbot.waitUntil(lambda: app.controllers.engines.model_name == "copy.gguf"
                        and app.controllers.engines.engine.state.status == "ready", timeout=WAIT_MS)
        assert app.controllers.engines.engine.settings.n_gpu_layers == 0
        assert app.controllers.engines.engine.state.info.n_gpu_layers == 0  # what the engine process loaded with
        # -1: no choice in the dialog. The model's library defaults decide (none here), not the
        # previous model's setting: llama.cpp's default, which on this CPU build loads 0 layers.
        app.window.model_load_requested.emit(str(model_path), -1)
        qtbot.waitUntil(lambda: app.controllers.engines.model_name == model_path.name
                        and app.controllers.engines.engine.state.status == "ready", timeout=WAIT_MS)
        assert app.controllers.engines.engine.settings.n_gpu_layers is None
        assert app.controllers.engines.engine.state.info.n_gpu_layers == 0
    finally:
        app.close()


@pytest.mark.model
def test_the_smoke_run_answers_one_prompt_saves_it_and_exits_zero(tmp_path, model_path) -> None:
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / model_path.name).symlink_to(model_path)
    env = {**os.environ, "CHORUS_DATA_DIR": str(tmp_path)}
    env.pop("QT_QPA_PLATFORM", None)  # the smoke run goes offscreen by itself
    out = subprocess.run([sys.executable, "-m", "app", "app", "--smoke-prompt", "Say hi."],
                         capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "smoke test passed" in out.stderr
    assert "chorus: Chorus 0.1.0; llama.cpp " in out.stderr  # the About dialog's versions, printed
    reply = out.stdout.strip()
    assert reply
    with sqlite3.connect(tmp_path / "chorus.db") as conn:
        rows = conn.execute("SELECT role, content, status FROM messages ORDER BY id").fetchall()
    assert rows[0] == ("user", "Say hi.", "complete")
    assert rows[1][0] == "assistant" and rows[1][2] == "complete" and rows[1][1].strip() == reply


def test_a_smoke_run_on_a_broken_model_fails_with_a_reason(tmp_path) -> None:
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + b"\0" * 5000)
    env = {**os.environ, "CHORUS_DATA_DIR": str(tmp_path)}
    out = subprocess.run([sys.executable, "-m", "app", "app", "--model", str(bad), "--smoke-prompt", "Hi"],
                         capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 1
    assert "smoke test failed: the engine did not start" in out.stderr
    assert "bad.gguf" in out.stderr


# ----- the desktop entry -------------------------------------------------------------------


def install_desktop(xdg: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "XDG_DATA_HOME": str(xdg)}
    return subprocess.run(["bash", str(ROOT / "packaging" / "install_desktop.sh"), *args],
                          capture_output=True, text=True, env=env, timeout=60)


def read_entry(path: Path) -> dict[str, str]:
    parser = configparser.ConfigParser(interpolation=None)
    parser.optionxform = str  # keys are case-sensitive
    parser.read(path)
    return dict(parser["Desktop Entry"])


def test_the_desktop_entry_and_icon_install_for_the_user_and_uninstall(tmp_path) -> None:
    command = tmp_path / "my apps" / "chorus"  # a path with a space: quoted in Exec
    command.parent.mkdir()
    command.write_text("#!/bin/sh\n")
    command.chmod(0o755)
    xdg = tmp_path / "share"
    out = install_desktop(xdg, "--command", str(command))
    assert out.returncode == 0, out.stderr
    entry = read_entry(xdg / "applications" / "chorus.desktop")
    assert entry["Exec"] == f'"{command}" app'
    assert entry["TryExec"] == str(command)
    assert entry["Icon"] == "chorus" and entry["Type"] == "Application" and entry["Name"] == "Chorus"
    assert (xdg / "icons/hicolor/scalable/apps/chorus.svg").read_bytes() == (ROOT / "ui/icons/chorus.svg").read_bytes()
    assert (xdg / "icons/hicolor/256x256/apps/chorus.png").read_bytes() == (ROOT / "ui/icons/chorus.png").read_bytes()
    out = install_desktop(xdg, "--uninstall")
    assert out.returncode == 0
    assert not (xdg / "applications" / "chorus.desktop").exists()
    assert not (xdg / "icons/hicolor/256x256/apps/chorus.png").exists()


def test_a_bundle_folder_runs_its_executable_and_a_missing_one_is_refused(tmp_path) -> None:
    bundle = tmp_path / "chorus-bundle"
    bundle.mkdir()
    xdg = tmp_path / "share"
    missing = install_desktop(xdg, "--bundle", str(bundle))
    assert missing.returncode == 2 and "is not an executable" in missing.stderr
    (bundle / "chorus").write_text("#!/bin/sh\n")
    (bundle / "chorus").chmod(0o755)
    assert install_desktop(xdg, "--bundle", str(bundle)).returncode == 0
    assert read_entry(xdg / "applications" / "chorus.desktop")["Exec"] == f"{bundle}/chorus app"


def test_the_shipped_desktop_entry_is_valid() -> None:
    entry = read_entry(ROOT / "packaging" / "linux" / "chorus.desktop")
    assert entry["Exec"] == "chorus app" and entry["Icon"] == "chorus"
    assert entry["StartupWMClass"] == "chorus"  # QGuiApplication.setDesktopFileName("chorus")
    validate = subprocess.run(["sh", "-c", "command -v desktop-file-validate"], capture_output=True, text=True)
    if validate.returncode == 0:  # desktop-file-utils, where installed
        checked = subprocess.run(["desktop-file-validate", str(ROOT / "packaging/linux/chorus.desktop")],
                                 capture_output=True, text=True)
        assert checked.returncode == 0, checked.stdout + checked.stderr


def test_the_package_builds_without_a_c_compiler_leaving_the_kernel_out(tmp_path) -> None:
    """The sampling extension is optional: with a compiler that fails (none, or MSVC
    without OpenMP) the wheel still builds, without it, and sampling takes the numpy path
    (test_sampling_model.py runs the engine that way)."""
    src = tmp_path / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(
        ".git", ".venv*", "build", "dist", "artifacts", "__pycache__", "*.so", "*.egg-info", ".*_cache"))
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-v", "-w", str(tmp_path / "wheels"),
                            str(src)], env={**os.environ, "CC": "/bin/false"}, capture_output=True, text=True,
                           timeout=600)
    assert built.returncode == 0, built.stderr[-3000:]
    assert 'building extension "inference.sample._kernel" failed' in built.stdout + built.stderr
    (wheel,) = (tmp_path / "wheels").glob("chorus-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "inference/sample/kernel.py" in names and "inference/sample/rows.py" in names
    assert not [n for n in names if n.startswith("inference/sample/_kernel") and n.endswith((".so", ".pyd"))]
