"""The app on a real X display: missing system libraries are named with the command that
installs them (instead of Qt aborting the process), and the whole app runs on Xvfb through
Qt's xcb plugin, as on a user's desktop (the rest of the suite runs offscreen)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ui.qt_platform import DEBIAN_PACKAGES, display_problem, missing_libraries, packages_for, uses_xcb

ON_CI = os.environ.get("CI") == "true"


def _needs(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        if ON_CI:  # CI installs it (packaging/bootstrap.sh --tests): never skip there
            pytest.fail(f"{tool} is not installed")
        pytest.skip(f"{tool} is not installed (packaging/bootstrap.sh --tests installs it as root)")
    return path


@pytest.fixture
def plugin_missing_a_library(tmp_path) -> Path:
    """A real shared object linked against a library that is gone at run time, as Qt's
    plugin is on a machine without libxcb-cursor0."""
    cc = _needs("cc")
    (tmp_path / "gone.c").write_text("int gone(void) { return 1; }\n")
    (tmp_path / "plugin.c").write_text("int gone(void);\nint plugin(void) { return gone(); }\n")
    subprocess.run([cc, "-shared", "-fPIC", "-o", tmp_path / "libchorusgone.so.0", tmp_path / "gone.c",
                    "-Wl,-soname,libchorusgone.so.0"], check=True)
    subprocess.run([cc, "-shared", "-fPIC", "-o", tmp_path / "libqxcb.so", tmp_path / "plugin.c",
                    "-Wl,--no-as-needed", tmp_path / "libchorusgone.so.0"], check=True)
    (tmp_path / "libchorusgone.so.0").unlink()
    return tmp_path / "libqxcb.so"


def test_a_missing_library_is_named_with_the_command_that_installs_it(plugin_missing_a_library) -> None:
    assert missing_libraries(plugin_missing_a_library) == ["libchorusgone.so.0"]
    problem = display_problem({"DISPLAY": ":0"}, plugin=plugin_missing_a_library)
    assert problem is not None
    assert "libchorusgone.so.0" in problem
    assert "sudo apt-get install libchorusgone.so.0" in problem


def test_qt_libraries_map_to_debian_packages() -> None:
    assert packages_for(["libxcb-cursor.so.0", "libxcb-icccm.so.4", "libxcb-keysyms.so.1"]) == [
        "libxcb-cursor0", "libxcb-icccm4", "libxcb-keysyms1"]
    assert all(" " not in package for package in DEBIAN_PACKAGES.values())


def test_which_sessions_use_the_x11_plugin() -> None:
    if not sys.platform.startswith("linux"):
        pytest.skip("X11 is Linux's")
    assert uses_xcb({"DISPLAY": ":0"})
    assert uses_xcb({"QT_QPA_PLATFORM": "xcb"})
    assert not uses_xcb({"QT_QPA_PLATFORM": "offscreen", "DISPLAY": ":0"})
    assert not uses_xcb({"WAYLAND_DISPLAY": "wayland-0", "XDG_SESSION_TYPE": "wayland"})
    assert "no display" in display_problem({}, plugin=Path("/nonexistent"))


def test_the_installed_qt_has_what_its_x11_plugin_needs() -> None:
    """After the set-up (packaging/bootstrap.sh) nothing the plugin links may be missing."""
    from ui.qt_platform import xcb_plugin

    plugin = xcb_plugin()
    assert plugin is not None and plugin.exists()
    _needs("ldd")
    missing = missing_libraries(plugin)
    if missing and not ON_CI:
        pytest.skip(f"this machine lacks {missing}: sudo apt-get install {' '.join(packages_for(missing))}")
    assert missing == []


def test_the_app_refuses_plainly_without_a_display(tmp_path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    env.update(QT_QPA_PLATFORM="xcb", CHORUS_DATA_DIR=str(tmp_path))
    out = subprocess.run([sys.executable, "-m", "app", "app"], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 1, out.stderr[-2000:]
    assert "cannot open a window: no display" in out.stderr


@pytest.mark.model
def test_the_app_answers_a_prompt_in_a_real_x11_window(tmp_path, model_path) -> None:
    """The whole app through the xcb plugin on Xvfb: the window opens, the model answers,
    the reply is saved (what aborted with exit status 134 on a fresh Debian machine)."""
    xvfb_run = _needs("xvfb-run")
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / model_path.name).symlink_to(model_path)
    env = {**os.environ, "CHORUS_DATA_DIR": str(tmp_path), "QT_QPA_PLATFORM": "xcb"}
    out = subprocess.run(
        [xvfb_run, "-a", "-s", "-screen 0 1280x800x24", sys.executable, "-m", "app", "app",
         "--smoke-prompt", "Say hi."],
        capture_output=True, text=True, env=env, timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "smoke test passed" in out.stderr
    assert "platform: xcb" in out.stderr  # it really ran on X, not offscreen
    assert out.stdout.strip()
