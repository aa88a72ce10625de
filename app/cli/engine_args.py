"""Model and engine options: the arguments, the model they name, LoadSettings from them."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from app.engines.process import probe_backend
from app.models import catalog as model_catalog
from app.models.capacity import chats_that_fit
from app.models.fit import machine_memory
from app.models.library import ModelDefaults, apply_defaults, open_library
from app.paths import models_dir
from inference import KV_TYPES, SPECULATIVE_MODES, LoadSettings
from inference.gguf import GgufError, read_gguf_header
from storage import StorageError


def add_model_args(p: argparse.ArgumentParser) -> None:
    """The options of every command that loads a model."""
    p.add_argument("--model", default=None, help="catalog name or GGUF path (default: smollm2-135m)")
    p.add_argument("--ctx", type=int, default=None, help="context size in tokens")
    p.add_argument("--threads", type=int, default=None, help="threads (default: physical cores)")
    p.add_argument("--gpu-layers", type=int, default=None, help="layers to offload (default: all if supported)")
    p.add_argument("--reproducible", action="store_true",
                   help="bit-identical results whatever the batch holds (slower)")
    p.add_argument("--kv-type", choices=KV_TYPES, default=None,
                   help="the KV cache's element type: f16 (default), q8_0 or q4_0 (about 1/2 or 1/4 of the memory "
                        "per cell, so more chats or a longer context fit; slight changes to the output)")
    p.add_argument("--flash-attn", choices=("on", "off", "auto"), default=None,
                   help="flash attention (default auto: llama.cpp's choice; a quantized KV cache turns it on)")
    p.add_argument("--chats-that-fit", type=int, default=None, metavar="CTX",
                   help="as many chats of CTX tokens each as fit this machine's memory with the KV type: "
                        "sets the sequences and the context (chorus models fit shows the numbers)")
    p.add_argument("--speculative", choices=SPECULATIVE_MODES, default=None,
                   help="speculative decoding: lookup drafts tokens from the chat's own text and verifies them "
                        "in the same batch (same output; faster when replies copy their prompt); draft has a "
                        "smaller model with the same vocabulary write them (--draft-model). Default: off, "
                        "or the model's library default")
    p.add_argument("--draft-model", default=None, metavar="MODEL",
                   help="the draft model of --speculative draft (implied): a catalog name or a GGUF file "
                        "with the model's vocabulary")
    p.add_argument("--mmproj", default=None, metavar="FILE",
                   help="a vision projector (mmproj GGUF) for the model: chats may then show it images")
    p.add_argument("--image-max-tokens", type=int, default=None, metavar="N",
                   help="the most tokens one image may take: a projector that reads images at their own size "
                        "(Qwen-VL's) reads a larger one smaller (default: the projector's own limit)")


def resolve_model(args: argparse.Namespace, base: Path) -> Path:
    """The chosen model; the default one is fetched on first use, no questions asked."""
    mdir = models_dir(base)
    if getattr(args, "draft_model", None):  # read by explicit_settings
        args.draft_model_path = _installed(args.draft_model, mdir, base)
    return _installed(args.model or model_catalog.DEFAULT_MODEL, mdir, base)


def _installed(name: str, mdir: Path, base: Path) -> Path:
    spec = model_catalog.CATALOG.get(name)
    if spec is not None and not model_catalog.is_installed(spec, mdir):
        model_catalog.fetch(spec, mdir, say=lambda m: print(f"chorus: {m}", file=sys.stderr))
        if spec.sees_images:  # its projector becomes its default before the defaults are read
            from app.models.library import open_library

            with open_library(base) as library:
                library.record_fetched(name)
    return model_catalog.resolve(name, mdir)


def explicit_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The LoadSettings fields the command line set: they win over a model's defaults."""
    values: dict[str, Any] = {}
    if getattr(args, "ctx", None):
        values["n_ctx"] = args.ctx
    if getattr(args, "threads", None):
        values["n_threads"] = args.threads
    if getattr(args, "gpu_layers", None) is not None:
        values["n_gpu_layers"] = args.gpu_layers
    if getattr(args, "reproducible", False):
        values["reproducible"] = True
    if getattr(args, "speculative", None) is not None:
        values["speculative"] = args.speculative
    if getattr(args, "draft_model_path", None) is not None:
        values["draft_model"] = args.draft_model_path
        values.setdefault("speculative", "draft")
    if getattr(args, "kv_type", None) is not None:
        values["kv_type"] = args.kv_type
    if getattr(args, "mmproj", None):
        values["mmproj"] = Path(args.mmproj).expanduser().resolve()
    if getattr(args, "image_max_tokens", None) is not None:
        values["image_max_tokens"] = args.image_max_tokens
    if getattr(args, "flash_attn", None) is not None:
        values["flash_attn"] = {"on": True, "off": False, "auto": None}[args.flash_attn]
    return values


def settings_from_args(args: argparse.Namespace, model: Path, defaults: ModelDefaults | None = None,
                       **overrides: Any) -> LoadSettings:
    """LoadSettings for model: the model's library defaults (if given) under the command
    line's options and the caller's overrides."""
    values = {**explicit_settings(args), **overrides}
    settings = LoadSettings(model_path=model, **values)
    if defaults is not None:
        settings = apply_defaults(settings, defaults, explicit=set(values))
    ctx = getattr(args, "chats_that_fit", None)
    return settings if ctx is None else fitted(settings, ctx)


def fitted(settings: LoadSettings, ctx_per_chat: int) -> LoadSettings:
    """settings for as many chats of ctx_per_chat as fit; a model too large says so and exits."""
    try:
        header = read_gguf_header(settings.model_path)
        ram, gpu = machine_memory()
        return chats_that_fit(settings, header, ctx_per_chat, ram, gpu, probe_backend().gpu_offload)
    except (GgufError, ValueError) as exc:
        raise SystemExit(f"chorus: {exc}") from None


def library_defaults(base: Path, model: Path) -> ModelDefaults:
    """The model's defaults in the library of the data folder, marking it used (it is about
    to load). A database that cannot be opened costs the defaults, not the command."""
    try:
        with open_library(base) as library:
            library.mark_used(model)
            return library.defaults_for(model)
    except StorageError as exc:
        print(f"chorus: the model library is not available, loading without its defaults: {exc}", file=sys.stderr)
        return ModelDefaults()
