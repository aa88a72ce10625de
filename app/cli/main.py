"""`chorus` command line: chat, bench, models."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from app.models import catalog as model_catalog
from app.paths import data_dir, models_dir
from storage.errors import StorageError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="chorus", description=__doc__)
    parser.add_argument("--data-dir", help="folder for models and chats (default: user data folder; env CHORUS_DATA_DIR)")
    parser.add_argument("-v", "--verbose", action="store_true", help="log engine details")
    sub = parser.add_subparsers(dest="command")

    chat = sub.add_parser("chat", help="chat in the terminal, streaming")
    _add_model_args(chat)
    chat.add_argument("--system", default=None, help="system prompt")
    chat.add_argument("--max-tokens", type=int, default=512)
    chat.add_argument("--temperature", type=float, default=0.7)
    chat.add_argument("--seed", type=int, default=None)
    chat.add_argument("--conversation", type=int, default=None, help="continue a saved conversation")

    gui = sub.add_parser("app", help="the desktop window")
    _add_model_args(gui)
    gui.add_argument("--theme", choices=("system", "light", "dark"), default="system")
    gui.add_argument("--quit-after", type=float, default=None, help=argparse.SUPPRESS)
    # Packaging's smoke test: one prompt through the real window and engine, then exit.
    gui.add_argument("--smoke-prompt", default=None, help=argparse.SUPPRESS)

    ubench = sub.add_parser("bench-ui", help="GUI event-loop stalls while N tabs stream")
    _add_model_args(ubench)
    ubench.add_argument("--tabs", type=int, default=16)
    ubench.add_argument("--max-tokens", type=int, default=128)
    ubench.add_argument("--panel", action="store_true", help="with the performance panel open")
    ubench.add_argument("--compare", action="store_true", help="4 of the tabs are panes of a compare view on screen")
    ubench.add_argument("--json", action="store_true")

    serve = sub.add_parser("serve", help="OpenAI-compatible server on the engine")
    _add_model_args(serve)
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default: loopback only)")
    serve.add_argument("--port", type=int, default=8080)
    serve.add_argument("--api-key", default=None, help="require 'Authorization: Bearer KEY' (or env CHORUS_API_KEY)")
    serve.add_argument("--parallel", type=int, default=8, help="sequences decoded together")

    export = sub.add_parser("export", help="export conversations to Markdown or JSON")
    export.add_argument("--format", choices=("md", "json"), default="json")
    export.add_argument("--conversation", type=int, action="append", help="conversation id (repeatable; default: all)")
    export.add_argument("--comparison", type=int, default=None,
                        help="one comparison: its panes side by side (md) or its conversations as a group (json)")
    export.add_argument("path", help="file to write ('-' for standard output)")

    imp = sub.add_parser("import", help="import conversations from a Chorus JSON export")
    imp.add_argument("path")

    sub.add_parser("list", help="list saved conversations")

    backup = sub.add_parser("backup", help="copy the chat database consistently (safe while the app runs)")
    backup.add_argument("path", help="new file, or a folder for a dated file")

    sbench = sub.add_parser("bench-storage", help="time checkpoints, opening and search on a scratch database")
    sbench.add_argument("--messages", type=int, default=100_000, help="messages in the search corpus")
    sbench.add_argument("--long", type=int, default=10_000, help="messages in the long conversation")
    sbench.add_argument("--json", action="store_true")

    bench = sub.add_parser("bench", help="N chats through the engine vs one after another")
    _add_model_args(bench)
    bench.add_argument("--chats", type=int, default=8)
    bench.add_argument("--system-tokens", type=int, default=1000)
    bench.add_argument("--max-tokens", type=int, default=128)
    bench.add_argument("--warm", action="store_true", help="pin the system prompt before the clock starts")
    bench.add_argument("--n-seq-max", type=int, default=None, help="engine sequences (default: chats + 2)")
    bench.add_argument("--skip-baseline", action="store_true", help="run only the engine")
    bench.add_argument("--native", action="store_true", help="also time llama.cpp's raw batched decode")
    bench.add_argument("--json", action="store_true", help="print one JSON object")

    ebench = sub.add_parser("bench-engines", help="two models decoding at once: all cores each vs cores split")
    ebench.add_argument("--models", nargs=2, default=["smollm2-135m", "gemma3-270m"], help="catalog names or GGUF paths")
    ebench.add_argument("--threads", type=int, default=None, help="cores to use (default: physical cores)")
    ebench.add_argument("--max-tokens", type=int, default=150)
    ebench.add_argument("--json", action="store_true")

    models = sub.add_parser("models", help="list or fetch models")
    msub = models.add_subparsers(dest="models_command")
    msub.add_parser("list", help="known models and whether they are installed")
    fetch = msub.add_parser("fetch", help="download and verify models (default: the default model)")
    fetch.add_argument("names", nargs="*")
    path = msub.add_parser("path", help="print the file path of an installed model")
    path.add_argument("name", nargs="?", default=model_catalog.DEFAULT_MODEL)
    return parser


def _add_model_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default=None, help="catalog name or GGUF path (default: smollm2-135m)")
    p.add_argument("--ctx", type=int, default=None, help="context size in tokens")
    p.add_argument("--threads", type=int, default=None, help="threads (default: physical cores)")
    p.add_argument("--gpu-layers", type=int, default=None, help="layers to offload (default: all if supported)")
    p.add_argument("--reproducible", action="store_true", help="bit-identical results whatever the batch holds (slower)")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    base = data_dir(args.data_dir)
    try:
        if args.command == "models":
            return _models(args, models_dir(base))
        if args.command == "bench":
            from app.bench.engine import run_bench

            return run_bench(args, _model_path(args, base))
        if args.command in ("export", "import", "list"):
            from app.cli import chats as chats_cli

            return getattr(chats_cli, f"run_{args.command}")(args, base)
        if args.command == "backup":
            from app.cli.backup import run_backup

            return run_backup(args, base)
        if args.command == "app":
            from ui.app_main import run_app

            return run_app(args, _model_path(args, base), base)
        if args.command == "serve":
            from app.cli.serve import run_serve

            return run_serve(args, _model_path(args, base))
        if args.command == "bench-engines":
            from app.bench.engines import run_engines_bench

            return run_engines_bench(args, [model_catalog.resolve(m, models_dir(base)) for m in args.models])
        if args.command == "bench-ui":
            from ui.bench import run_ui_bench

            return run_ui_bench(args, _model_path(args, base))
        if args.command == "bench-storage":
            from app.bench.storage import run_storage_bench

            return run_storage_bench(args)
        if args.command in (None, "chat"):
            from app.cli.chat import run_chat

            if args.command is None:
                args = build_parser().parse_args([*(argv or sys.argv[1:]), "chat"])
            return run_chat(args, _model_path(args, base), base)
    except (model_catalog.ModelFetchError, StorageError) as exc:
        print(f"chorus: {exc}", file=sys.stderr)
        return 2
    return 1


def _model_path(args: argparse.Namespace, base: Path) -> Path:
    """The chosen model; the default one is fetched on first use, no questions asked."""
    mdir = models_dir(base)
    name = args.model or model_catalog.DEFAULT_MODEL
    spec = model_catalog.CATALOG.get(name)
    if spec is not None and not model_catalog.is_installed(spec, mdir):
        model_catalog.fetch(spec, mdir, say=lambda m: print(f"chorus: {m}", file=sys.stderr))
    return model_catalog.resolve(name, mdir)


def _models(args: argparse.Namespace, mdir: Path) -> int:
    cmd = args.models_command or "list"
    if cmd == "list":
        for spec in model_catalog.CATALOG.values():
            installed = model_catalog.is_installed(spec, mdir)
            mark = "installed" if installed else "not installed"
            default = " (default)" if spec.key == model_catalog.DEFAULT_MODEL else ""
            print(f"{spec.key:<14} {mark:<14} {spec.title}{default}  [{spec.license}]")
            if installed:
                print(f"{'':<14} {model_catalog.model_path(spec, mdir)}")
        return 0
    if cmd == "fetch":
        names = args.names or [model_catalog.DEFAULT_MODEL]
        unknown = [n for n in names if n not in model_catalog.CATALOG]
        if unknown:
            print(f"chorus: unknown model(s): {', '.join(unknown)}; known: {', '.join(model_catalog.CATALOG)}", file=sys.stderr)
            return 2
        for name in names:
            path = model_catalog.fetch(model_catalog.CATALOG[name], mdir, say=lambda m: print(f"chorus: {m}", file=sys.stderr))
            print(f"{name}: {path} (sha256 verified)")
        return 0
    if cmd == "path":
        print(model_catalog.resolve(args.name, mdir))
        return 0
    return 1
