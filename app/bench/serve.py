"""`chorus bench-serve`: N concurrent raw-HTTP streaming clients against the OpenAI API.

Unless given a server's URL, it starts `chorus serve` in a subprocess on a free loopback
port (as a user would run it) and stops it afterwards. All N clients start at once; each
sends one streaming chat completion of T tokens and reads it to `[DONE]`, with no retries.
Then one more request measures how soon the server serves again after the load.
run_bench_serve() returns the server's URL and the report; render() is its lines or JSON.
"""

from __future__ import annotations

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
from dataclasses import dataclass
from pathlib import Path

import httpx

import app
from app.bench.load_report import LoadReport
from app.bench.raw_http import Target, chat_body, stream_chat

READY_TIMEOUT_S = 180.0  # loading the model, first run included


class ServerStartError(RuntimeError):
    """The server subprocess exited or never answered."""


@dataclass(frozen=True)
class ServerOptions:
    """How the bench starts `chorus serve`: its data folder, model, --parallel and engine options."""

    base: Path
    model: Path
    parallel: int = 8
    ctx: int | None = None
    threads: int | None = None
    gpu_layers: int | None = None
    reproducible: bool = False

    def engine_flags(self) -> list[str]:
        """The engine options as `chorus serve` takes them (those not set are left out)."""
        flags: list[str] = []
        for name, value in (("ctx", self.ctx), ("threads", self.threads), ("gpu-layers", self.gpu_layers)):
            if value is not None:
                flags += [f"--{name}", str(value)]
        if self.reproducible:
            flags.append("--reproducible")
        return flags


@dataclass(frozen=True)
class ServeBenchOptions:
    clients: int = 32  # concurrent streaming requests
    max_tokens: int = 16  # of each request
    timeout_s: float = 120.0  # a client's wait for its whole answer
    api_key: str | None = None  # sent as 'Authorization: Bearer KEY'
    server: str | None = None  # URL of a running server; None: start one as `start` says
    start: ServerOptions | None = None


@dataclass(frozen=True)
class ServeBenchResult:
    url: str  # the server the clients talked to
    report: LoadReport


async def run_load(target: Target, clients: int, max_tokens: int, timeout_s: float) -> LoadReport:
    """N clients at once, then one more request; the report of both."""
    bodies = [chat_body(max_tokens, f"Client {i}: count from one to twenty in words.") for i in range(clients)]
    start = time.perf_counter()
    results = await asyncio.gather(*(stream_chat(target, body, timeout_s) for body in bodies))
    wall = time.perf_counter() - start
    after = await stream_chat(target, chat_body(max_tokens, "After the load: say hello."), timeout_s)
    return LoadReport.of(list(results), max_tokens, wall, after)


def run_bench_serve(options: ServeBenchOptions) -> ServeBenchResult:
    """The load against options.server, or against a server started for it and stopped after.
    Raises ServerStartError when that server does not come up, ValueError for a bad URL."""
    with _server(options) as url:
        report = asyncio.run(run_load(Target.from_url(url, options.api_key), options.clients, options.max_tokens,
                                      options.timeout_s))
    return ServeBenchResult(url, report)


def render(result: ServeBenchResult, as_json: bool) -> str:
    """One JSON object (the server's URL and the report), or a heading and the report's lines."""
    if as_json:
        return json.dumps({"server": result.url, **result.report.as_dict()})
    report = result.report
    heading = f"{report.clients} streaming clients x {report.max_tokens} tokens against {result.url}"
    return "\n".join([heading, *report.lines()])


@contextmanager
def _server(options: ServeBenchOptions) -> Iterator[str]:
    if options.server:
        yield options.server.rstrip("/").removesuffix("/v1")
        return
    if options.start is None:
        raise ValueError("bench-serve needs a server's URL or the options to start one")
    with started_server(options.start, options.api_key) as url:
        yield url


@contextmanager
def started_server(start: ServerOptions, api_key: str | None = None) -> Iterator[str]:
    """`chorus serve` in a subprocess on a free loopback port, until the block ends."""
    port = free_port()
    command = [sys.executable, "-m", "app", "--data-dir", str(start.base), "serve", "--port", str(port),
               "--model", str(start.model), "--parallel", str(start.parallel), *start.engine_flags()]
    if api_key:
        command += ["--api-key", api_key]
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=_child_env())
        try:
            url = f"http://127.0.0.1:{port}"
            _wait_ready(url, proc, log, api_key)
            yield url
        finally:
            _stop(proc)


def free_port() -> int:
    """A port nothing listens on now (the kernel's pick, released for the server to take)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


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
