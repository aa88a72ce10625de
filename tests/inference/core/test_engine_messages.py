"""The engine's small vocabulary, without a model: request ids, finished deltas, and a
request handle fed from outside the engine loop."""

from __future__ import annotations

import re
import threading

import pytest

from inference import new_request_id
from inference.core.engine import RequestHandle
from inference.outputs import Delta, FinishReason, Phase, RequestStats


def test_request_ids_are_twelve_hex_digits_after_the_prefix():
    assert re.fullmatch(r"[0-9a-f]{12}", new_request_id())
    assert re.fullmatch(r"http-[0-9a-f]{12}", new_request_id("http-"))


def test_request_ids_do_not_repeat_across_threads():
    ids: list[str] = []
    lock = threading.Lock()

    def mint() -> None:
        mine = [new_request_id() for _ in range(2_000)]
        with lock:
            ids.extend(mine)

    threads = [threading.Thread(target=mint) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(ids) == 8_000 and len(set(ids)) == len(ids)


def test_a_finished_delta_says_finished_with_its_reason_error_and_stats():
    stats = RequestStats(3, 1, 2, 0.0, 0.1, 20.0, None, None, 0.2)
    delta = Delta.finished_with("r1", FinishReason.ERROR, "boom", stats)
    assert (delta.request_id, delta.phase, delta.finish_reason) == ("r1", Phase.FINISHED, FinishReason.ERROR)
    assert (delta.error, delta.stats, delta.text, delta.token_ids) == ("boom", stats, "", ())
    assert delta.finished


def test_a_finished_delta_may_carry_the_last_text():
    delta = Delta.finished_with("r2", FinishReason.LENGTH, text=" end", token_ids=(7, 8))
    assert (delta.text, delta.token_ids, delta.error, delta.stats) == (" end", (7, 8), None, None)


@pytest.mark.parametrize("reason", list(FinishReason))
def test_every_reason_makes_a_finished_delta(reason):
    assert Delta.finished_with("r", reason).finished and Delta.finished_with("r", reason).finish_reason is reason


class Source:
    """A delta source outside any engine loop: records cancels."""

    def __init__(self) -> None:
        self.cancelled: list[str] = []

    def cancel(self, request_id: str) -> None:
        self.cancelled.append(request_id)


def test_a_handle_fed_from_another_thread_streams_and_completes():
    source, seen = Source(), []
    handle = RequestHandle("r1", source, seen.append)
    deltas = [Delta("r1", text="Hel", token_ids=(1,)), Delta("r1", text="lo", token_ids=(2,)),
              Delta.finished_with("r1", FinishReason.STOP)]
    feeder = threading.Thread(target=lambda: [handle.deliver(d) for d in deltas])
    feeder.start()
    assert list(handle) == deltas
    feeder.join()
    result = handle.result(timeout=1)
    assert (result.text, result.token_ids, result.finish_reason) == ("Hello", (1, 2), FinishReason.STOP)
    assert seen == deltas and handle.done and handle.final is deltas[-1]
    handle.cancel()
    assert source.cancelled == ["r1"]


def test_a_handle_waits_until_its_finished_delta():
    handle = RequestHandle("r2", Source(), None)
    handle.deliver(Delta("r2", text="part"))
    assert not handle.done
    with pytest.raises(TimeoutError):
        handle.result(timeout=0.01)
