"""The OpenAI server under load and faults, as clients on raw sockets see it (issue 13):
clients killed in each phase stop costing anything, slow clients do not hold up the
others, and 128 concurrent clients each get an answer or a clean 429.

Each test starts a real server on loopback over a small engine of its own, so the
engine's metrics count only this test's requests.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest

from app.bench.raw_http import Target, chat_body, request_bytes, stream_chat
from app.bench.serve import run_load
from inference import ChatRequest, SamplingParams
from inference.core.metrics import MetricsSnapshot
from tests.support.engine_checks import assert_nothing_else_generates
from tests.support.served import KEY
from tests.support.served import serving as served

pytestmark = pytest.mark.model

KILLED = 8  # clients killed in each phase
KILL_AFTER_S = 1.0
SETTLE_GOAL_S = 2.0  # issue 13: running and queued back to 0 this soon after the kill
SETTLE_WAIT_S = 15.0  # how long the test waits for it (the machine is shared and noisy)
PHASE_WAIT_S = 60.0  # how long a phase may take to be reached on a loaded machine


@contextlib.contextmanager
def serving(engine) -> Iterator[Target]:
    """The server on a free loopback port over `engine`, until the block ends."""
    with served(engine) as server:
        yield Target.from_url(server.url, KEY)


def wait_metrics(engine, done: Callable[[MetricsSnapshot], bool], timeout_s: float) -> tuple[MetricsSnapshot, float]:
    """The engine's fresh metrics once `done` holds for them (or at the timeout), and when."""
    start = time.monotonic()
    while True:
        m = engine.metrics(fresh=True)
        elapsed = time.monotonic() - start
        if done(m) or elapsed > timeout_s:
            return m, elapsed
        time.sleep(0.05)


def send(target: Target, body: dict) -> socket.socket:
    """A client that sends its request and reads nothing back: closing it is killing it."""
    sock = socket.create_connection((target.host, target.port), timeout=30)
    sock.sendall(request_bytes(target, body))
    return sock


# ----- clients killed in each phase -------------------------------------------------------------

LONG_TEXT = " ".join(f"Line {i}: the quick brown fox jumps over the lazy dog number {i}." for i in range(30))
STORY = "Write a very long story about a lighthouse keeper and the sea."


@dataclass(frozen=True)
class Phase:
    settings: dict  # the engine's
    prompt: str  # each client's, after its own number
    blockers: int  # requests occupying the engine's sequences before the clients come
    reached: Callable[[MetricsSnapshot, int], bool]  # (metrics, the clients' prompt tokens)
    describe: str


PHASES = {
    # 4 sequences busy with other work: the 8 clients wait in the engine's queue.
    "queued": Phase(dict(n_ctx=8192, n_seq_max=4), STORY, blockers=4,
                    reached=lambda m, _prompt: m.queued >= KILLED, describe="all 8 queued"),
    # ~600-token prompts, 8 of them: at the kill, some are still being computed.
    "prefilling": Phase(dict(n_ctx=8192, n_seq_max=KILLED), LONG_TEXT, blockers=0,
                        reached=lambda m, prompt: m.running >= 1 and m.prompt_tokens_computed < prompt,
                        describe="prompts still being computed"),
    # short prompts, long answers: all 8 decoding.
    "decoding": Phase(dict(n_ctx=8192, n_seq_max=KILLED), STORY, blockers=0,
                      reached=lambda m, _prompt: m.running == KILLED and m.generated_tokens >= 2 * KILLED,
                      describe="all 8 decoding"),
}


@pytest.mark.parametrize("stream", [True, False], ids=["streaming", "non-streaming"])
@pytest.mark.parametrize("phase_name", list(PHASES))
def test_killed_clients_stop_costing_anything(make_engine, phase_name, stream):
    phase = PHASES[phase_name]
    engine = make_engine(**phase.settings)
    # ignore_eos (an extension, as vLLM's; ignored where unknown): no request ends on its own.
    bodies = [{**chat_body(1000, f"Client {i}. {phase.prompt}", stream=stream), "ignore_eos": True}
              for i in range(KILLED)]
    prompt_tokens = sum(len(engine.inputs.chat_tokens(b["messages"])) for b in bodies)
    blockers = [engine.submit(ChatRequest(messages=({"role": "user", "content": f"Blocker {i}. {STORY}"},),
                                          sampling=SamplingParams(temperature=0, max_tokens=1000, ignore_eos=True)))
                for i in range(phase.blockers)]
    if blockers:
        wait_metrics(engine, lambda m: m.running == phase.blockers and m.generated_tokens > 0, PHASE_WAIT_S)
    with serving(engine) as target:
        clients = [send(target, body) for body in bodies]
        time.sleep(KILL_AFTER_S)  # part of the test: the clients live a while before they are killed
        at_kill, _ = wait_metrics(engine, lambda m: phase.reached(m, prompt_tokens), PHASE_WAIT_S)
        for sock in clients:
            sock.close()
        for handle in blockers:
            handle.cancel()  # the engine's own work ends too: what remains is the clients'
        assert phase.reached(at_kill, prompt_tokens), f"the phase ({phase.describe}) was never reached: {at_kill}"

        settled, took = wait_metrics(engine, lambda m: m.running == 0 and m.queued == 0, SETTLE_WAIT_S)
        assert settled.running == 0 and settled.queued == 0, (
            f"{KILLED} clients killed while {phase.describe} ({'streaming' if stream else 'non-streaming'}): "
            f"{took:.1f} s after the kill the engine still runs {settled.running} and queues {settled.queued} "
            f"(goal: back to 0 within {SETTLE_GOAL_S:.0f} s, issue 13)")
        assert_nothing_else_generates(engine)  # after the kill, for nobody


# ----- slow clients ------------------------------------------------------------------------------

SLOW_CLIENTS = 50
SLOW_DELAY_GOAL_S = 0.5  # issue 13: 50 slow clients delay a normal request by at most this
NOISE_S = 1.0  # added to the goal in the assertion: the machine is shared by several jobs


async def dribble(target: Target) -> None:
    """A client sending its request headers one byte a second, for ever."""
    reader, writer = await asyncio.open_connection(target.host, target.port)
    head = f"POST /v1/chat/completions HTTP/1.1\r\nHost: {target.host}\r\nX-Slow: {'a' * 1000}\r\n"
    try:
        for byte in head.encode():
            writer.write(bytes([byte]))
            await writer.drain()
            await asyncio.sleep(1.0)
    except ConnectionError:
        pass  # the server gave up on it: allowed, that is one way of not being held up
    finally:
        writer.close()


async def normal_latencies(target: Target, n: int) -> list[float]:
    latencies = []
    for _ in range(n):
        result = await stream_chat(target, chat_body(8, "Say hello."), 60)
        assert result.completed, f"a normal request failed: {result.failure} {result.detail}"
        latencies.append(result.latency_s)
    return latencies


async def with_and_without_slow_clients(target: Target) -> tuple[float, float, int]:
    await normal_latencies(target, 1)  # the prompt's KV cached: every measured request alike
    quiet = statistics.median(await normal_latencies(target, 5))
    slow = [asyncio.create_task(dribble(target)) for _ in range(SLOW_CLIENTS)]
    await asyncio.sleep(3.0)  # all connected, a few header bytes in
    still_sending = sum(not t.done() for t in slow)
    busy = statistics.median(await normal_latencies(target, 5))
    for task in slow:
        task.cancel()
    await asyncio.gather(*slow, return_exceptions=True)
    return quiet, busy, still_sending


def test_slow_clients_do_not_hold_up_a_normal_request(make_engine):
    engine = make_engine(n_ctx=4096, n_seq_max=4)
    with serving(engine) as target:
        quiet, busy, still_sending = asyncio.run(with_and_without_slow_clients(target))
    assert busy - quiet <= SLOW_DELAY_GOAL_S + NOISE_S, (
        f"with {SLOW_CLIENTS} clients sending headers a byte a second ({still_sending} still at it), a normal "
        f"request took {busy:.2f} s against {quiet:.2f} s without them (goal: at most {SLOW_DELAY_GOAL_S} s "
        f"more, issue 13)")


# ----- many clients at once ---------------------------------------------------------------------

LOAD_CLIENTS = 128
LOAD_TOKENS = 16
# Each client's patience: a few tens of seconds on a quiet 2-core machine, minutes when
# other jobs share it; a timeout here is a failure like any other.
LOAD_TIMEOUT_S = 300


@pytest.mark.timeout(900)
def test_128_clients_each_complete_or_get_a_clean_429(make_engine):
    engine = make_engine(n_ctx=4096, n_seq_max=8)
    with serving(engine) as target:
        report = asyncio.run(run_load(target, LOAD_CLIENTS, LOAD_TOKENS, timeout_s=LOAD_TIMEOUT_S))
    summary = "\n".join(report.lines())
    assert report.failed_total == 0, f"no client may fail (resets, timeouts, 5xx):\n{summary}"
    assert report.completed + report.rejected_429 == LOAD_CLIENTS, summary
    assert report.retry_after_seen == report.rejected_429, f"a clean 429 says when to come back:\n{summary}"
    assert report.after is not None
    assert report.after.completed, f"the server must serve a new request after the load:\n{summary}"
