"""Lanes through the engine's process, on the real model: each request's owner crosses the
pipe with it, and the snapshots the process pushes back count each owner's rows and queue."""

from __future__ import annotations

import pytest

from app.engines.process import EngineProcess
from inference import ChatRequest, LoadSettings, SamplingParams, chat_owner, job_owner
from tests.support.waiting import wait_until

pytestmark = pytest.mark.model

TAB = chat_owner("Trip plans", 1)
JOB = job_owner("3f9c0a1b")


def long_chat(text: str, owner) -> ChatRequest:
    return ChatRequest(messages=({"role": "user", "content": text},),
                       sampling=SamplingParams.greedy(2000, ignore_eos=True), owner=owner)


def lanes_of(client) -> dict:
    m = client.metrics()
    return {} if m is None else {lane.owner: lane for lane in m.lanes}


def test_a_tab_and_a_job_are_two_lanes_with_their_rows_and_queue(model_path):
    client = EngineProcess(LoadSettings(model_path=model_path, n_ctx=4096, n_seq_max=2))
    client.start()
    try:
        ids = [client.stream(long_chat("Tell me about the sea.", TAB), lambda d: None),
               client.stream(long_chat("Tell me about rivers.", JOB), lambda d: None),
               # two sequences: the job's second item waits for one
               client.stream(long_chat("Tell me about lakes.", JOB), lambda d: None)]

        def both_decoding() -> bool:
            lanes = lanes_of(client)
            return (TAB in lanes and JOB in lanes and lanes[TAB].rows == 1 and lanes[JOB].rows == 1
                    and lanes[TAB].tok_s > 0 and lanes[JOB].tok_s > 0)

        wait_until(both_decoding, "a tab and a job decoding", timeout=120)
        m = client.metrics()
        assert [lane.owner for lane in m.lanes] == [TAB, JOB]  # the tabs' first
        tab, job = m.lanes
        assert (tab.kind, tab.name, tab.rows, tab.queued) == ("chat", "Trip plans", 1, 0)
        assert (job.kind, job.name, job.rows, job.queued) == ("job", "3f9c0a1b", 1, 1)
        assert tab.kv_cells > 0 and job.kv_cells > 0 and tab.kv_cells + job.kv_cells <= m.kv_cells_used
        for request_id in ids:
            client.cancel(request_id)
        # Idle: the last snapshot says so (published as the work ended), nothing left in a lane.
        wait_until(lambda: client.metrics().running == 0 and all(
            lane.rows == 0 and lane.queued == 0 for lane in client.metrics().lanes), "an idle snapshot", timeout=60)
    finally:
        client.shutdown()
