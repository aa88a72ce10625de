"""`chorus models list|fetch|path`: the model catalog and what is installed of it."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from app.cli import models_hub
from app.cli.command import add_command
from app.models import catalog as model_catalog
from app.paths import models_dir


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    models = add_command(sub, "models", run_list, help="list or fetch models")  # bare `models` lists
    msub = models.add_subparsers(dest="models_command")
    add_command(msub, "list", run_list, help="known models and whether they are installed")
    fetch = add_command(msub, "fetch", run_fetch, help="download and verify models (default: the default model)")
    fetch.add_argument("names", nargs="*")
    path = add_command(msub, "path", run_path, help="print the file path of an installed model")
    path.add_argument("name", nargs="?", default=model_catalog.DEFAULT_MODEL)
    models_hub.register_hub(msub)


def run_list(args: argparse.Namespace, base: Path) -> int:
    mdir = models_dir(base)
    for spec in model_catalog.CATALOG.values():
        installed = model_catalog.is_installed(spec, mdir)
        mark = "installed" if installed else "not installed"
        default = " (default)" if spec.key == model_catalog.DEFAULT_MODEL else ""
        print(f"{spec.key:<14} {mark:<14} {spec.title}{default}  [{spec.license}]")
        if installed:
            print(f"{'':<14} {model_catalog.model_path(spec, mdir)}")
    return 0


def run_fetch(args: argparse.Namespace, base: Path) -> int:
    names = args.names or [model_catalog.DEFAULT_MODEL]
    unknown = [n for n in names if n not in model_catalog.CATALOG]
    if unknown:
        print(f"chorus: unknown model(s): {', '.join(unknown)}; known: {', '.join(model_catalog.CATALOG)}",
              file=sys.stderr)
        return 2
    for name in names:
        path = model_catalog.fetch(model_catalog.CATALOG[name], models_dir(base), say=_say)
        print(f"{name}: {path} (sha256 verified)")
    return 0


def run_path(args: argparse.Namespace, base: Path) -> int:
    print(model_catalog.resolve(args.name, models_dir(base)))
    return 0


def _say(message: str) -> None:
    print(f"chorus: {message}", file=sys.stderr)
