"""`chorus serve --models all|NAME,NAME...`: the installed models the server offers, each
loaded on demand in one model pool (app/engines/model_pool.py) within a memory budget
(--models-memory) and unloaded when idle past --keep-alive.

Each model loads with the command line's options over its own library defaults, as
`chorus serve --model NAME` would load it; what it counts against the budget is the
capacity planner's estimate for that (app/models/capacity.load_bytes)."""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from app.cli.engine_args import settings_from_args
from app.engines.model_pool import LoadedEngine, ModelPool, PoolModel, size_text
from app.engines.process import probe_backend
from app.models import catalog as model_catalog
from app.models.capacity import load_bytes
from app.models.fit import RAM_FITS, machine_memory
from app.models.library import LibraryEntry, open_library
from app.paths import kv_cache_dir
from app.server.pooled_models import PooledModels, model_card
from inference import LoadSettings
from inference.gguf import GgufError, GgufHeader, read_gguf_header

ALL = "all"
# Options that name one model's companion file: they cannot apply to every model served.
ONE_MODEL_OPTIONS = (("mmproj", "--mmproj"), ("draft_model", "--draft-model"), ("chats_that_fit", "--chats-that-fit"))
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b?)\s*$", re.IGNORECASE)
_POWERS = {"": 0, "k": 1, "m": 2, "g": 3, "t": 4}


def memory_size(text: str) -> int:
    """--models-memory: bytes, or with a unit: 4GiB, 4G (both 4 * 2**30, as Docker reads
    4g), 4GB (4 * 10**9), 512MiB, 512M."""
    match = _SIZE.match(text)
    if match is None:
        raise argparse.ArgumentTypeError(f"must be a size such as 4GiB, 4G, 4GB or 512MiB, got {text!r}")
    number, prefix, suffix = match.groups()
    decimal = suffix.lower() == "b" and prefix != ""  # "GB": powers of 1000; "G", "GiB": of 1024
    value = int(float(number) * (1000 if decimal else 1024) ** _POWERS[prefix.lower()])
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be more than 0, got {text!r}")
    return value


def default_budget() -> int:
    """What the models may use together when --models-memory is not given: the share of the
    RAM available now that `chorus models fit` counts as fitting (the OS and the rest keep
    the remainder)."""
    ram, _gpu = machine_memory()
    return int(RAM_FITS * ram)


class ServeModelsError(ValueError):
    """A --models list the server cannot serve: one line."""


@dataclass(frozen=True)
class ServedSet:
    models: PooledModels
    pool: ModelPool
    lines: list[str]  # what the server says at start about each model


def one_model_options(args: argparse.Namespace) -> list[str]:
    """The options given that apply to one model only (refused with --models)."""
    return [flag for attr, flag in ONE_MODEL_OPTIONS if getattr(args, attr, None)]


# (settings, a callback for the load's progress) -> the engine, loaded (Engine.start)
EngineStart = Callable[[LoadSettings, Callable[[float], None]], LoadedEngine]


def served_set(args: argparse.Namespace, base: Path, start_engine: EngineStart) -> ServedSet:
    """The pool of the models --models names, not loaded yet. start_engine loads one."""
    entries = _chosen(args.models, base)
    gpu = probe_backend().gpu_offload
    models, cards, aliases, lines = [], {}, {}, []
    with open_library(base) as library:
        defaults = {e.name: library.defaults_for(e.path) for e in entries}
    for entry in entries:
        settings = settings_from_args(args, entry.path, defaults[entry.name], n_seq_max=args.parallel,
                                      kv_cache_dir=kv_cache_dir(base))
        header = _header(entry)
        models.append(PoolModel(entry.name, load_bytes(settings, header, gpu), settings))
        cards[entry.name] = model_card(settings, header)
        if entry.path.stem != entry.name:
            aliases[entry.path.stem] = entry.name  # what `chorus serve --model` called it
        need = size_text(models[-1].memory_bytes)
        lines.append(f"  {entry.name}: about {need} with a {settings.n_ctx}-token context")
    budget = args.models_memory or default_budget()
    for model in models:
        if model.memory_bytes > budget:
            lines.append(f"  warning: {model.name} cannot fit the budget of {size_text(budget)}: its requests "
                         "will be refused")
    names = [m.name for m in models]
    default = _default(args.model, names, aliases)

    def make_engine(model: PoolModel, threads: int, progress: Callable[[float], None]) -> LoadedEngine:
        assert isinstance(model.load, LoadSettings)
        return start_engine(replace(model.load, n_threads=threads, n_threads_batch=threads), progress)

    pool = ModelPool(models, make_engine, budget_bytes=budget, keep_alive_s=args.keep_alive,
                     cpu_threads=args.threads or None)
    lines.insert(0, f"models on demand within {size_text(budget)}, unloaded after {args.keep_alive:g} s idle; "
                    f"a request without a model gets {default}:")
    return ServedSet(PooledModels(pool, default, cards, aliases), pool, lines)


def _chosen(spec: str, base: Path) -> list[LibraryEntry]:
    with open_library(base) as library:
        installed = [e for e in library.entries() if e.installed and not _is_projector(e)]
    if spec.strip() == ALL:
        if not installed:
            raise ServeModelsError("no model is installed; run: chorus models fetch")
        return installed
    by_name = {e.name: e for e in installed}
    names = [n.strip() for n in spec.split(",") if n.strip()]
    unknown = [n for n in names if n not in by_name]
    if unknown or not names:
        listed = ", ".join(by_name) or "none"
        raise ServeModelsError(f"--models: not installed: {', '.join(unknown) or '(no name)'}; installed: {listed} "
                               "(chorus models list)")
    return [by_name[n] for n in dict.fromkeys(names)]


def _is_projector(entry: LibraryEntry) -> bool:
    """A vision projector (mmproj) file in the models folder is no model to serve."""
    try:
        return read_gguf_header(entry.path).architecture == "clip"
    except GgufError:
        return False  # its load will say what is wrong with it


def _header(entry: LibraryEntry) -> GgufHeader:
    try:
        return read_gguf_header(entry.path)
    except GgufError as exc:
        raise ServeModelsError(f"{entry.name}: {exc}") from None


def _default(chosen: str | None, names: list[str], aliases: dict[str, str]) -> str:
    """--model names the default among those served; else the catalog's default, else the first."""
    if chosen:
        name = aliases.get(chosen, chosen)
        if name not in names:
            raise ServeModelsError(f"--model {chosen} is not among the models served ({', '.join(names)})")
        return name
    return model_catalog.DEFAULT_MODEL if model_catalog.DEFAULT_MODEL in names else names[0]
