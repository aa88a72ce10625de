"""`chorus serve`: the engine behind an OpenAI-compatible HTTP API, until Ctrl-C; with
--models, several installed models, each loaded when a request names it (serve_models.py)."""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path

from app.cli.command import add_command
from app.cli.engine_args import add_model_args, library_defaults, resolve_model, settings_from_args
from app.cli.serve_models import ServeModelsError, memory_size, one_model_options, served_set
from app.engines.model_pool import DEFAULT_KEEP_ALIVE_S
from app.paths import files_dir, kv_cache_dir
from app.server.config import DEFAULT_MAX_TOKENS_CAP, ServerConfig, image_host
from app.server.uvicorn_server import HttpServer
from inference import ModelLoadError
from storage import DEFAULT_FILENAME


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    serve = add_command(sub, "serve", run_serve, help="OpenAI-compatible server on the engine")
    add_model_args(serve)
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default: loopback only)")
    serve.add_argument("--port", type=int, default=8080, help="port to listen on (0: any free port)")
    serve.add_argument("--api-key", type=_api_key, default=None,
                       help="require 'Authorization: Bearer KEY' (or env CHORUS_API_KEY); never empty")
    serve.add_argument("--parallel", type=int, default=8, help="sequences decoded together")
    serve.add_argument("--max-concurrent", type=_positive, default=256,
                       help="requests served at once; more get 429 with Retry-After (default 256)")
    serve.add_argument("--max-tokens-cap", type=_non_negative, default=DEFAULT_MAX_TOKENS_CAP,
                       help=f"most tokens one reply may ask for, and the default (default {DEFAULT_MAX_TOKENS_CAP}; "
                            "0: no cap, a reply runs to the end of the context)")
    serve.add_argument("--cors-origin", action="append", type=_origin, default=[], metavar="ORIGIN",
                       help="let web pages from ORIGIN (scheme://host[:port], or * for any) call the API; "
                            "repeatable (default: none)")
    serve.add_argument("--image-host", action="append", type=_host, default=[], metavar="HOST[:PORT]",
                       help="fetch the images a request names by http(s) URL when they are on HOST (any port, or "
                            "that PORT); repeatable (default: none; requests send images as data: URLs)")
    serve.add_argument("--models", default=None, metavar="all|NAME,NAME",
                       help="serve several installed models (names from `chorus models list`, or all), each loaded "
                            "when a request names it; --model then names the default (default: --model alone)")
    serve.add_argument("--models-memory", type=memory_size, default=None, metavar="SIZE",
                       help="with --models: the memory the loaded models may use together, e.g. 4GiB; the least "
                            "recently used idle model is unloaded to make room (default: 70%% of the available RAM)")
    serve.add_argument("--keep-alive", type=_non_negative_float, default=DEFAULT_KEEP_ALIVE_S, metavar="SECONDS",
                       help="with --models: unload a model idle this long; a request's keep_alive overrides it "
                            f"(default {DEFAULT_KEEP_ALIVE_S:g})")


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _non_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def _non_negative_float(text: str) -> float:
    value = float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {text}")
    return value


def _host(text: str) -> str:
    try:
        return image_host(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _origin(text: str) -> str:
    # A browser sends Origin as scheme://host[:port] with no path: "http://localhost:3000/"
    # would never match, and the pages it meant would be refused without a word.
    origin = text.strip()
    if origin == "*":
        return origin
    scheme, sep, rest = origin.partition("://")
    if not sep or scheme not in ("http", "https") or not rest or "/" in rest:
        raise argparse.ArgumentTypeError(f"must be scheme://host[:port] (no path) or *, got {text!r}")
    return origin


def _api_key(text: str) -> str:
    # An empty key would turn authentication off without a word (`--api-key "$UNSET_VAR"`):
    # a server its owner believes protected must not serve everyone.
    if not text.strip():
        raise argparse.ArgumentTypeError("must not be empty (leave --api-key out to serve without a key)")
    return text


def _key_of(args: argparse.Namespace) -> str | None:
    """--api-key, else CHORUS_API_KEY; an empty or blank variable is refused, as an empty key is."""
    if args.api_key is not None:
        return str(args.api_key)
    key = os.environ.get("CHORUS_API_KEY")
    if key is not None and not key.strip():
        raise ValueError("CHORUS_API_KEY is set but empty: set a key, or unset it to serve without one")
    return key


def _interrupt(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


def run_serve(args: argparse.Namespace, base: Path) -> int:
    try:
        key = _key_of(args)
    except ValueError as exc:
        print(f"chorus: {exc}", file=sys.stderr)
        return 2
    if args.models is not None:
        return _serve_models(args, base, key)
    model = resolve_model(args, base)
    config = ServerConfig(args.host, args.port, key, model.stem, max_concurrent=args.max_concurrent,
                          max_tokens_cap=args.max_tokens_cap or None, cors_origins=tuple(args.cors_origin),
                          image_hosts=tuple(args.image_host),
                          responses_db=base / DEFAULT_FILENAME, files_dir=files_dir(base))
    try:
        from inference import Engine  # llama.cpp loads for this command alone, not at the CLI's start

        engine = Engine.start(settings_from_args(args, model, library_defaults(base, model), n_seq_max=args.parallel,
                                                 kv_cache_dir=kv_cache_dir(base)))
    except ModelLoadError as exc:
        print(f"chorus: {exc}", file=sys.stderr)
        return 2
    try:
        try:
            server = HttpServer(engine, config, ready=lambda: engine.running)
        except OSError as exc:
            print(f"chorus: cannot listen on {args.host}:{args.port}: {exc.strerror or exc}", file=sys.stderr)
            return 2
        auth = "API key required" if key else "no API key"
        print(f"serving {model.name} at {server.url}/v1 ({auth}); Ctrl-C stops", file=sys.stderr, flush=True)
        signal.signal(signal.SIGTERM, _interrupt)  # a service manager's stop: as Ctrl-C
        server.serve_until_interrupted()
    finally:
        engine.shutdown()
    return 0


def _serve_models(args: argparse.Namespace, base: Path, key: str | None) -> int:
    """--models: the pool of the models named, none loaded until a request names it."""
    single = one_model_options(args)
    if single:
        print(f"chorus: {', '.join(single)} apply to one model: serve it alone (without --models)", file=sys.stderr)
        return 2
    from inference import Engine  # llama.cpp loads for this command alone, not at the CLI's start

    try:
        served = served_set(args, base, lambda settings, progress: Engine.start(settings, on_progress=progress))
    except ServeModelsError as exc:
        print(f"chorus: {exc}", file=sys.stderr)
        return 2
    config = ServerConfig(args.host, args.port, key, served.models.default, max_concurrent=args.max_concurrent,
                          max_tokens_cap=args.max_tokens_cap or None, cors_origins=tuple(args.cors_origin),
                          image_hosts=tuple(args.image_host),
                          responses_db=base / DEFAULT_FILENAME, files_dir=files_dir(base))
    try:
        try:
            server = HttpServer(None, config, models=served.models)
        except OSError as exc:
            print(f"chorus: cannot listen on {args.host}:{args.port}: {exc.strerror or exc}", file=sys.stderr)
            return 2
        auth = "API key required" if key else "no API key"
        names = ", ".join(served.pool.names)
        print(f"serving {names} at {server.url}/v1 ({auth}); Ctrl-C stops", file=sys.stderr, flush=True)
        for line in served.lines:
            print(line, file=sys.stderr)
        signal.signal(signal.SIGTERM, _interrupt)  # a service manager's stop: as Ctrl-C
        server.serve_until_interrupted()
    finally:
        served.pool.shutdown()
    return 0
