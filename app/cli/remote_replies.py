"""`chorus chat --server URL`: replies from a remote OpenAI-compatible server, through the same
engine client interface as a local engine's (RemoteEngine)."""

from __future__ import annotations

import argparse
import os

from app.engines.remote import RemoteClient, RemoteEndpoint, RemoteEngine, RemoteError


def add_remote_args(p: argparse.ArgumentParser) -> None:
    group = p.add_argument_group("a remote server instead of a local model")
    group.add_argument("--server", metavar="URL", default=None,
                       help="an OpenAI-compatible server's base URL (vLLM, llama-server, Chorus), "
                            "e.g. http://127.0.0.1:8080/v1")
    group.add_argument("--api-key", default=None, help="its API key (or env CHORUS_API_KEY)")
    group.add_argument("--remote-model", metavar="NAME", default=None,
                       help="the server's model (default: the one it serves)")


def connect(args: argparse.Namespace) -> RemoteEngine:
    """The server named by --server, with its model checked (or chosen when it serves one);
    RemoteError or ValueError says why not."""
    key = args.api_key or os.environ.get("CHORUS_API_KEY") or None
    probe = RemoteEndpoint(args.server, args.remote_model or "", key)
    models = RemoteClient(probe).models()
    name = args.remote_model
    if name is None:
        if len(models) != 1:
            listed = ", ".join(models) or "none"
            raise RemoteError(f"{args.server} serves {len(models)} models ({listed}): pick one with --remote-model")
        name = models[0]
    elif name not in models:
        raise RemoteError(f"{args.server} has no model {name!r} (it has: {', '.join(models) or 'none'})")
    engine = RemoteEngine(RemoteEndpoint(args.server, name, key))
    engine.start()
    return engine
