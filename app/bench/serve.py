"""`chorus bench-serve`: N concurrent raw-HTTP streaming clients against the OpenAI API.

Unless given a server's URL, it starts `chorus serve` in a subprocess on a free loopback
port (as a user would run it) and stops it afterwards. All N clients start at once; each
sends one streaming chat completion of T tokens and reads it to `[DONE]`, with no retries.
Then one more request measures how soon the server serves again after the load.
run_bench_serve() returns the server's URL and the report; render() is its lines or JSON.

With --system-words the clients share a system prompt of rules (about 4/3 tokens a word),
and with --rounds the same requests are sent again once each round has finished: the last
round's time to first token is the warm one, each prompt already seen (what a server's
prompt cache is for; llama.cpp's server with -np N -kvu is the peer).
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
from app.bench.workload import SENTENCES

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
    system_words: int = 0  # a system prompt of about this many words shared by the clients; 0: none
    rounds: int = 1  # the same requests again once each round has finished


@dataclass(frozen=True)
class ServeBenchResult:
    url: str  # the server the clients talked to
    report: LoadReport  # the last round's
    earlier: tuple[LoadReport, ...] = ()  # the rounds before it


def system_prompt(words: int) -> str:
    """Rules of the bench's sentences, numbered, until about `words` words."""
    rules: list[str] = []
    count = 0
    while count < words:
        rule = f"Rule {len(rules) + 1}: {SENTENCES[len(rules) % len(SENTENCES)]}"
        rules.append(rule)
        count += len(rule.split())
    return " ".join(rules)


async def run_load(target: Target, clients: int, max_tokens: int, timeout_s: float, system: str | None = None,
                   after: bool = True) -> LoadReport:
    """N clients at once, then (with after) one more request; the report of both."""
    bodies = [chat_body(max_tokens, f"Client {i}: count from one to twenty in words.", system=system)
              for i in range(clients)]
    start = time.perf_counter()
    results = await asyncio.gather(*(stream_chat(target, body, timeout_s) for body in bodies))
    wall = time.perf_counter() - start
    last = (await stream_chat(target, chat_body(max_tokens, "After the load: say hello."), timeout_s) if after
            else None)
    return LoadReport.of(list(results), max_tokens, wall, last)


async def _rounds(target: Target, options: ServeBenchOptions) -> list[LoadReport]:
    """options.rounds rounds of the same requests; the request after the load only after the
    last (in between it would take a slot whose cached prompt the next round wants)."""
    system = system_prompt(options.system_words) if options.system_words > 0 else None
    rounds = max(1, options.rounds)
    return [await run_load(target, options.clients, options.max_tokens, options.timeout_s, system,
                           after=i == rounds - 1) for i in range(rounds)]


def run_bench_serve(options: ServeBenchOptions) -> ServeBenchResult:
    """The load against options.server, or against a server started for it and stopped after.
    Raises ServerStartError when that server does not come up, ValueError for a bad URL."""
    with _server(options) as url:
        reports = asyncio.run(_rounds(Target.from_url(url, options.api_key), options))
    return ServeBenchResult(url, reports[-1], tuple(reports[:-1]))


def render(result: ServeBenchResult, as_json: bool) -> str:
    """One JSON object (the server's URL and the report, the earlier rounds' under
    "earlier_rounds"), or a heading and the report's lines, each round's TTFT first."""
    if as_json:
        extra = {"earlier_rounds": [r.as_dict() for r in result.earlier]} if result.earlier else {}
        return json.dumps({"server": result.url, **result.report.as_dict(), **extra})
    report = result.report
    heading = f"{report.clients} streaming clients x {report.max_tokens} tokens against {result.url}"
    rounds = [f"round {i + 1}: TTFT {r.ttft_s.text()}" for i, r in enumerate(result.earlier)]
    if rounds:
        rounds.append(f"round {len(rounds) + 1} (the last, reported below): TTFT {report.ttft_s.text()}")
    return "\n".join([heading, *rounds, *report.lines()])


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
