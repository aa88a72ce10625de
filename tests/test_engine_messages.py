"""The engine's small vocabulary, without a model: request ids, finished deltas, and a
request handle fed from outside the engine loop."""

from __future__ import annotations

import re
import threading

from inference import new_request_id


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
