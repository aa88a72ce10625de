"""`chorus bench-serve`: N concurrent raw-HTTP streaming clients against the OpenAI API.

Unless given a server's URL, it starts `chorus serve` in a subprocess on a free loopback
port (as a user would run it) and stops it afterwards. All N clients start at once; each
sends one streaming chat completion of T tokens and reads it to `[DONE]`, with no retries.
Then one more request measures how soon the server serves again after the load.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

import app
from app.bench.load_report import LoadReport
from app.bench.raw_http import Target, chat_body, stream_chat

READY_TIMEOUT_S = 180.0  # loading the model, first run included


class ServerStartError(RuntimeError):
    """The server subprocess exited or never answered."""


async def run_load(target: Target, clients: int, max_tokens: int, timeout_s: float) -> LoadReport:
    """N clients at once, then one more request; the report of both."""
    bodies = [chat_body(max_tokens, f"Client {i}: count from one to twenty in words.") for i in range(clients)]
    start = time.perf_counter()
    results = await asyncio.gather(*(stream_chat(target, body, timeout_s) for body in bodies))
    wall = time.perf_counter() - start
    after = await stream_chat(target, chat_body(max_tokens, "After the load: say hello."), timeout_s)
    return LoadReport.of(list(results), max_tokens, wall, after)


def run_bench_serve(args: argparse.Namespace, base: Path, model: Path | None) -> int:
    try:
        with _server(args, base, model) as url:
            report = asyncio.run(run_load(Target.from_url(url, args.api_key), args.clients, args.max_tokens,
                                          args.timeout))
    except (ServerStartError, ValueError) as exc:
        print(f"chorus: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps({"server": url, **report.as_dict()}))
    else:
        print(f"{args.clients} streaming clients x {args.max_tokens} tokens against {url}")
        print("\n".join(report.lines()))
    return 0


@contextmanager
def _server(args: argparse.Namespace, base: Path, model: Path | None) -> Iterator[str]:
    if args.server:
        yield args.server.rstrip("/").removesuffix("/v1")
        return
    assert model is not None  # the command resolves one whenever it starts a server
    with started_server(base, model, args) as url:
        yield url


@contextmanager
def started_server(base: Path, model: Path, args: argparse.Namespace) -> Iterator[str]:
    """`chorus serve` in a subprocess on a free loopback port, until the block ends."""
    port = free_port()
    command = [sys.executable, "-m", "app", "--data-dir", str(base), "serve", "--port", str(port),
               "--model", str(model), "--parallel", str(args.parallel), *_engine_flags(args)]
    if args.api_key:
        command += ["--api-key", args.api_key]
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=_child_env())
        try:
            url = f"http://127.0.0.1:{port}"
            _wait_ready(url, proc, log, args.api_key)
            yield url
        finally:
            _stop(proc)


def free_port() -> int:
    """A port nothing listens on now (the kernel's pick, released for the server to take)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _engine_flags(args: argparse.Namespace) -> list[str]:
    flags = []
    for name in ("ctx", "threads", "gpu_layers"):
        value = getattr(args, name, None)
        if value is not None:
            flags += [f"--{name.replace('_', '-')}", str(value)]
    if getattr(args, "reproducible", False):
        flags.append("--reproducible")
    return flags


def _child_env() -> dict[str, str]:
    """This process's environment, with this copy of Chorus importable as `app`."""
    root = str(Path(app.__file__).resolve().parent.parent)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    return env


def _wait_ready(url: str, proc: subprocess.Popen, log, api_key: str | None) -> None:
    """Until /health says 200 (or, on a server without it, /v1/models does)."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    deadline = time.monotonic() + READY_TIMEOUT_S
    path = "/health"
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            log.seek(0)
            tail = log.read()[-2000:].decode("utf-8", "replace").strip()
            raise ServerStartError(f"the server exited with status {proc.returncode}:\n{tail}")
        try:
            status = httpx.get(url + path, headers=headers, timeout=5).status_code
        except httpx.HTTPError:
            status = None  # not listening yet
        if status == 200:
            return
        if status == 404 and path == "/health":
            path = "/v1/models"
            continue
        time.sleep(0.25)
    raise ServerStartError(f"the server at {url} did not answer within {READY_TIMEOUT_S:.0f} s")


def _stop(proc: subprocess.Popen) -> None:
    """Ctrl-C first (the server's own clean stop), killed if that does not end it."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
