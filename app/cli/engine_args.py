"""LoadSettings from command-line options."""

from __future__ import annotations

import argparse
from pathlib import Path

from inference.params import LoadSettings


def settings_from_args(args: argparse.Namespace, model: Path, **overrides) -> LoadSettings:
    values = dict(model_path=model)
    if getattr(args, "ctx", None):
        values["n_ctx"] = args.ctx
    if getattr(args, "threads", None):
        values["n_threads"] = args.threads
    if getattr(args, "gpu_layers", None) is not None:
        values["n_gpu_layers"] = args.gpu_layers
    if getattr(args, "reproducible", False):
        values["reproducible"] = True
    values.update(overrides)
    return LoadSettings(**values)
