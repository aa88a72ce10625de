"""`chorus app` (the desktop window) and the handler of `chorus bench-ui`.

These two commands run Qt code from ui/, the layer above app/. The imports are inside the
handlers so that the other commands never load Qt, and so that this is the one place app/
reaches up into ui/ (allowed by pyproject.toml's import contracts, nowhere else).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from app.cli.command import add_command
from app.cli.engine_args import add_model_args, resolve_model
from app.models import catalog as model_catalog
from app.paths import models_dir


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    gui = add_command(sub, "app", run_app, help="the desktop window")
    add_model_args(gui)
    gui.add_argument("--theme", choices=("system", "light", "dark"), default=None,
                     help="this run's theme (default: the one chosen in View → Theme, else system)")
    gui.add_argument("--quit-after", type=float, default=None, help=argparse.SUPPRESS)
    # Packaging's smoke test: one prompt through the real window and engine, then exit.
    gui.add_argument("--smoke-prompt", default=None, help=argparse.SUPPRESS)
    # ... with these files attached (extracted, counted by the engine, stored with the message).
    gui.add_argument("--smoke-attach", action="append", default=[], type=Path, help=argparse.SUPPRESS)
    gui.set_defaults(report_failure=report_failure)


def report_failure(message: str) -> int:
    """What stopped `chorus app` before its window (a data folder that cannot be made, a
    model that cannot be found): the line on stderr and, with a display, a box."""
    from ui.app_main import show_startup_error

    return show_startup_error(message)


def run_app(args: argparse.Namespace, base: Path) -> int:
    from ui.app_main import run_app as run_window

    mdir = models_dir(base)
    spec = model_catalog.missing(args.model, mdir)
    if spec is not None:  # first start: the window opens at once and fetches it on its welcome page
        return run_window(args, model_catalog.model_path(spec, mdir), base, fetch_first=spec.key)
    return run_window(args, resolve_model(args, base), base)


def run_bench_ui(args: argparse.Namespace, base: Path) -> int:
    """`chorus bench-ui` (its options are with the other benchmarks, in app/cli/bench.py)."""
    from ui.bench import run_ui_bench

    return run_ui_bench(args, resolve_model(args, base))
