"""`chorus serve`: the engine behind an OpenAI-compatible HTTP API, until Ctrl-C."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from app.cli.command import add_command
from app.cli.engine_args import add_model_args, resolve_model, settings_from_args
from app.server.openai_api import ChorusHTTPServer, ServerConfig
from inference import ModelLoadError
from inference.engine import Engine


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    serve = add_command(sub, "serve", run_serve, help="OpenAI-compatible server on the engine")
    add_model_args(serve)
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default: loopback only)")
    serve.add_argument("--port", type=int, default=8080)
    serve.add_argument("--api-key", default=None, help="require 'Authorization: Bearer KEY' (or env CHORUS_API_KEY)")
    serve.add_argument("--parallel", type=int, default=8, help="sequences decoded together")


def run_serve(args: argparse.Namespace, base: Path) -> int:
    model = resolve_model(args, base)
    key = args.api_key or os.environ.get("CHORUS_API_KEY")
    try:
        engine = Engine.start(settings_from_args(args, model, n_seq_max=args.parallel))
    except ModelLoadError as exc:
        print(f"chorus: {exc}", file=sys.stderr)
        return 2
    try:
        server = ChorusHTTPServer(engine, ServerConfig(args.host, args.port, key, model.stem))
    except OSError as exc:
        engine.shutdown()
        print(f"chorus: cannot listen on {args.host}:{args.port}: {exc.strerror}", file=sys.stderr)
        return 2
    auth = "API key required" if key else "no API key"
    print(f"serving {model.name} at {server.url}/v1 ({auth}); Ctrl-C stops", file=sys.stderr, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        engine.shutdown()
    return 0
