"""`chorus serve`: the engine behind an OpenAI-compatible HTTP API, until Ctrl-C."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from app.cli.engine_args import settings_from_args
from app.server.openai_api import ChorusHTTPServer, ServerConfig
from inference import ModelLoadError
from inference.engine import Engine


def run_serve(args: argparse.Namespace, model: Path) -> int:
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
