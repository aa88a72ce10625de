"""`chorus chat --server URL`: replies from a remote OpenAI-compatible server, read the way
the terminal chat reads a local engine's (iterate the deltas, cancel on Ctrl-C)."""

from __future__ import annotations

import argparse
import os
from dataclasses import replace

from app.engines.remote import RemoteClient, RemoteEndpoint, RemoteError
from app.engines.sources import ModelSource
from inference import ChatRequest, Delta, RequestHandle, new_request_id


def add_remote_args(p: argparse.ArgumentParser) -> None:
    group = p.add_argument_group("a remote server instead of a local model")
    group.add_argument("--server", metavar="URL", default=None,
                       help="an OpenAI-compatible server's base URL (vLLM, llama-server, Chorus), "
                            "e.g. http://127.0.0.1:8080/v1")
    group.add_argument("--api-key", default=None, help="its API key (or env CHORUS_API_KEY)")
    group.add_argument("--remote-model", metavar="NAME", default=None,
                       help="the server's model (default: the one it serves)")


class RemoteReplies:
    """The terminal chat's engine when it talks to a server: submit() returns the same
    RequestHandle a local engine gives (iterate its deltas; cancel() stops the stream)."""

    def __init__(self, endpoint: RemoteEndpoint) -> None:
        self.source = ModelSource.remote(endpoint.base_url, endpoint.model)
        self._handles: dict[str, RequestHandle] = {}
        self._client = RemoteClient(endpoint, self._route)

    def _route(self, delta: Delta) -> None:  # on the request's reader thread
        handle = self._handles[delta.request_id]
        if delta.finished:
            del self._handles[delta.request_id]
        handle.deliver(delta)

    def submit(self, chat: ChatRequest) -> RequestHandle:
        request_id = chat.request_id or new_request_id()
        handle = RequestHandle(request_id, self._client, None)
        self._handles[request_id] = handle  # before submit: the first delta may come at once
        self._client.submit(replace(chat, request_id=request_id))
        return handle

    def shutdown(self) -> None:
        self._client.close()


def connect(args: argparse.Namespace) -> RemoteReplies:
    """The server named by --server, with its model checked (or chosen when it serves one);
    RemoteError or ValueError says why not."""
    key = args.api_key or os.environ.get("CHORUS_API_KEY") or None
    probe = RemoteEndpoint(args.server, args.remote_model or "", key)
    models = RemoteClient(probe, lambda d: None).models()
    name = args.remote_model
    if name is None:
        if len(models) != 1:
            listed = ", ".join(models) or "none"
            raise RemoteError(f"{args.server} serves {len(models)} models ({listed}): pick one with --remote-model")
        name = models[0]
    elif name not in models:
        raise RemoteError(f"{args.server} has no model {name!r} (it has: {', '.join(models) or 'none'})")
    return RemoteReplies(RemoteEndpoint(args.server, name, key))
