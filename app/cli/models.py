"""`chorus models list|fetch|path|rm|defaults`: the model library and the catalog.

`rm` cannot know what a running `chorus app` or `chorus serve` has loaded (another
process): it deletes. The desktop window's Models window refuses while the model is loaded.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, replace
from datetime import datetime
from pathlib import Path

from app.cli import models_hub
from app.cli.command import add_command
from app.models import capacity
from app.models import catalog as model_catalog
from app.models.fit import gb, machine_memory
from app.models.library import LibraryEntry, LibraryError, ModelDefaults, ModelLibrary, open_library
from app.paths import models_dir
from inference import KV_TYPES, SPECULATIVE_MODES
from inference.gguf import GgufError, read_gguf_header


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    models = add_command(sub, "models", run_list, help="the model library: list, fetch, remove, defaults")
    msub = models.add_subparsers(dest="models_command")  # bare `models` lists
    add_command(msub, "list", run_list, help="the models on this machine, and the catalog's others")
    fetch = add_command(msub, "fetch", run_fetch, help="download and verify models (default: the default model)")
    fetch.add_argument("names", nargs="*")
    path = add_command(msub, "path", run_path, help="print the file path of an installed model")
    path.add_argument("name", nargs="?", default=model_catalog.DEFAULT_MODEL)
    rm = add_command(msub, "rm", run_rm, help="delete a model's files and forget it (asks first on a terminal)")
    rm.add_argument("name")
    rm.add_argument("--yes", "-y", action="store_true", help="do not ask (needed when not on a terminal)")
    fit = add_command(msub, "fit", run_fit,
                      help="how many chats of each context fit this machine's memory, for each KV cache type")
    fit.add_argument("name", nargs="?", default=None, help="an installed model (default: the default model)")
    fit.add_argument("--ctx", type=int, action="append", default=None,
                     help="context per chat (repeatable; default 2048, 4096, 8192, 16384)")
    fit.add_argument("--gpu-layers", type=int, default=None, help="layers to offload (default: all if supported)")
    fit.add_argument("--json", action="store_true", help="print one JSON object")
    defaults = add_command(msub, "defaults", run_defaults,
                           help="show or set a model's load defaults (used unless the command line says otherwise)")
    defaults.add_argument("name")
    defaults.add_argument("--ctx", type=int, default=None, help="context size in tokens")
    defaults.add_argument("--gpu-layers", type=int, default=None, help="layers to offload (0: CPU only)")
    defaults.add_argument("--threads", type=int, default=None, help="CPU threads")
    defaults.add_argument("--kv-type", choices=KV_TYPES, default=None, help="the KV cache type for this model")
    defaults.add_argument("--speculative", choices=SPECULATIVE_MODES, default=None,
                          help="speculative decoding for this model (off | lookup | draft)")
    defaults.add_argument("--draft-model", default=None, metavar="MODEL",
                          help="its draft model for --speculative draft (implied): an installed model's name "
                               "or a GGUF file with this model's vocabulary")
    projector = defaults.add_mutually_exclusive_group()
    projector.add_argument("--mmproj", default=None, metavar="FILE",
                           help="its vision projector (mmproj GGUF): the model then sees images in chats")
    projector.add_argument("--no-mmproj", action="store_true", help="forget its vision projector")
    template = defaults.add_mutually_exclusive_group()
    template.add_argument("--chat-template", type=Path, default=None, metavar="FILE",
                          help="a Jinja chat template file used instead of the model's own")
    template.add_argument("--clear", action="store_true", help="drop all of this model's defaults")
    models_hub.register_hub(msub)  # `chorus models search|pull` (the Hugging Face Hub)


# ----- list ----------------------------------------------------------------------------------


def run_list(args: argparse.Namespace, base: Path) -> int:
    with open_library(base) as library:
        entries = library.entries()
    listed = {e.name for e in entries}
    print(f"{'NAME':<32} {'SIZE':>9}  {'SOURCE':<24} {'LAST USED':<16}  {'STATE':<13}  DEFAULTS")
    for e in entries:
        print(_row(e.name, _size(e.size_bytes) if e.size_bytes else "-", _source(e), _when(e.last_used),
                   "installed" if e.installed else "not installed", _defaults(e.defaults)))
        print(f"{'':<4}{e.path}")
    for spec in model_catalog.CATALOG.values():
        if spec.key not in listed:
            print(_row(spec.key, "-", "catalog", "-", "not installed",
                       f"{spec.title} [{spec.license}]; chorus models fetch {spec.key}"))
    return 0


def _row(name: str, size: str, source: str, used: str, state: str, rest: str) -> str:
    return f"{name:<32} {size:>9}  {source:<24} {used:<16}  {state:<13}  {rest}".rstrip()


def _size(n: int) -> str:
    value = float(n)
    for unit in ("B", "KB", "MB"):
        if value < 1000:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{value:.1f} GB"


def _source(e: LibraryEntry) -> str:
    return f"hub {e.hub_repo}" if e.source == "hub" and e.hub_repo else e.source


def _when(t: datetime | None) -> str:
    return t.astimezone().strftime("%Y-%m-%d %H:%M") if t is not None else "never"


def _defaults(d: ModelDefaults) -> str:
    parts = [f"{label} {value}" for label, value in (("ctx", d.n_ctx), ("gpu-layers", d.n_gpu_layers),
                                                    ("threads", d.n_threads), ("kv-type", d.kv_type),
                                                    ("speculative", d.speculative),
                                                    ("draft-model", d.draft_model and Path(d.draft_model).name),
                                                    ("mmproj", d.mmproj and Path(d.mmproj).name))
             if value is not None]
    if d.chat_template is not None:
        parts.append("own chat template")
    return ", ".join(parts) or "-"


# ----- fetch, path -----------------------------------------------------------------------------


def run_fetch(args: argparse.Namespace, base: Path) -> int:
    names = args.names or [model_catalog.DEFAULT_MODEL]
    unknown = [n for n in names if n not in model_catalog.CATALOG]
    if unknown:
        print(f"chorus: unknown model(s): {', '.join(unknown)}; known: {', '.join(model_catalog.CATALOG)}",
              file=sys.stderr)
        return 2
    for name in names:
        path = model_catalog.fetch(model_catalog.CATALOG[name], models_dir(base), say=_say)
        with open_library(base) as library:
            entry = library.record_fetched(name)  # recorded as the catalog's, with its projector
        vision = f", with vision projector {Path(entry.defaults.mmproj).name}" if entry.defaults.mmproj else ""
        print(f"{name}: {path} (sha256 verified{vision})")
    return 0


def run_path(args: argparse.Namespace, base: Path) -> int:
    print(model_catalog.resolve(args.name, models_dir(base)))
    return 0


# ----- rm ------------------------------------------------------------------------------------


def run_rm(args: argparse.Namespace, base: Path) -> int:
    with open_library(base) as library:
        try:
            listed = library.listed(args.name)
            if listed is None:
                raise LibraryError(f"{args.name} is not in the library (not installed); see `chorus models list`")
            entry, files = listed, library.files_to_delete(args.name)
        except LibraryError as exc:
            return _fail(exc)
        what = (f"delete {len(files)} file(s), {_size(sum(f.stat().st_size for f in files))}: "
                + ", ".join(str(f) for f in files)) if files else f"forget {entry.path} (the file is kept)"
        if not args.yes:
            if not sys.stdin.isatty():
                return _fail(f"not on a terminal: pass --yes to remove {args.name} ({what})")
            answer = input(f"Remove {args.name}: {what}? [y/N] ").strip().lower()
            if answer not in ("y", "yes"):
                print("nothing removed", file=sys.stderr)
                return 1
        try:
            library.remove(args.name, loaded=set())  # another process's loaded model is not known here
        except LibraryError as exc:
            return _fail(exc)
    print(f"removed {args.name}" + ("" if files else f" from the library; {entry.path} was kept"))
    return 0


# ----- fit -------------------------------------------------------------------------------------


def run_fit(args: argparse.Namespace, base: Path) -> int:
    try:
        path = _model_file(args.name or model_catalog.DEFAULT_MODEL, base)
        header = read_gguf_header(path)
        with open_library(base) as library:
            projector = library.defaults_for(path).mmproj  # a vision model's projector counts too
    except (LibraryError, GgufError, OSError, model_catalog.ModelFetchError) as exc:
        return _fail(exc)
    projector_bytes = capacity.projector_size(projector)
    ram, gpu = machine_memory()
    from inference import backend  # llama.cpp loads for this command alone, not at the CLI's start

    rows = capacity.plan(header, ram, gpu, backend.gpu_offload_supported(), args.gpu_layers,
                         contexts=tuple(args.ctx) if args.ctx else capacity.CONTEXTS, projector_bytes=projector_bytes)
    if args.json:
        print(json.dumps({"model": path.name, "ram_available": ram, "gpu_free": gpu,
                          "projector_bytes": projector_bytes, "capacity": [asdict(r) for r in rows]}, indent=2))
        return 0
    contexts = sorted({r.ctx_per_chat for r in rows})
    limit = rows[0].limit if rows else "RAM"
    vision = f", with its vision projector ({gb(projector_bytes)})" if projector_bytes else ""
    print(f"{path.name}{vision}: chats that fit in {gb(ram) if limit == 'RAM' else gb(gpu or 0)} free {limit} "
          f"(at most {capacity.MAX_CHATS})")
    print(f"{'KV type':<10}" + "".join(f"{f'{c} tokens':>14}" for c in contexts))
    for kv in dict.fromkeys(r.kv_type for r in rows):
        cells = {r.ctx_per_chat: r for r in rows if r.kv_type == kv}
        print(f"{kv:<10}" + "".join(f"{cells[c].chats:>8} chats" for c in contexts))
    per_cell = {r.kv_type: r.kv_bytes_per_chat / r.ctx_per_chat for r in rows}
    print("KV per token: " + ", ".join(f"{kv} {n / 1024:.1f} KiB" for kv, n in per_cell.items()))
    return 0


def _model_file(name: str, base: Path) -> Path:
    """A catalog model, a GGUF path, or a model of the library by its name."""
    if name in model_catalog.CATALOG or Path(name).expanduser().is_file():
        return model_catalog.resolve(name, models_dir(base))
    with open_library(base) as library:
        return library.entry(name).path


# ----- defaults --------------------------------------------------------------------------------


def run_defaults(args: argparse.Namespace, base: Path) -> int:
    with open_library(base) as library:
        try:
            entry = library.entry(args.name)
            defaults = ModelDefaults() if args.clear else entry.defaults
            changes = {k: v for k, v in (("n_ctx", args.ctx), ("n_gpu_layers", args.gpu_layers),
                                         ("n_threads", args.threads), ("kv_type", args.kv_type),
                                         ("speculative", args.speculative))
                       if v is not None}
            if args.chat_template is not None:
                changes["chat_template"] = _read_template(args.chat_template)
            if args.draft_model is not None:
                changes["draft_model"] = str(_draft_path(library, args.draft_model))
                changes.setdefault("speculative", "draft")
            if args.mmproj is not None:
                changes["mmproj"] = str(_existing_file(args.mmproj, "vision projector"))
            elif args.no_mmproj:
                changes["mmproj"] = None
            if changes or args.clear:
                entry = library.set_defaults(args.name, replace(defaults, **changes))
        except (LibraryError, OSError) as exc:
            return _fail(exc)
    print(f"{entry.name}: {_defaults(entry.defaults)}")
    if entry.defaults.chat_template is not None:
        print(entry.defaults.chat_template)
    return 0


def _draft_path(library: ModelLibrary, name: str) -> Path:
    """An installed model's file by its name, else the file named (which must exist)."""
    try:
        return library.entry(name).path
    except LibraryError:
        path = Path(name).expanduser()
        if not path.is_file():
            raise LibraryError(f"no installed model or file named {name}") from None
        return path.resolve()


def _existing_file(name: str, what: str) -> Path:
    path = Path(name).expanduser()
    if not path.is_file():
        raise LibraryError(f"no {what} file at {path}")
    return path.resolve()


def _read_template(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise LibraryError(f"cannot read the chat template {path}: {getattr(exc, 'strerror', None) or exc}") from None


def _fail(why: object) -> int:
    print(f"chorus: {why}", file=sys.stderr)
    return 2


def _say(message: str) -> None:
    print(f"chorus: {message}", file=sys.stderr)
