"""Lanes: the engine's requests grouped by owner, as a snapshot reports them (pure Python,
the LaneMeter alone; then the core on the fake runner)."""

from __future__ import annotations

from inference.core.lanes import LANE_WINDOW_S, LaneMeter
from inference.owner import NAME_CHARS, TITLE_OWNER, Owner, api_owner, chat_owner, job_owner
from inference.params import SamplingParams
from inference.request import Request
from tests.support.core_driver import make_driver

TAB = chat_owner("Trip plans", 7)
JOB = job_owner("3f9c0a1b")


def request(owner: Owner, seq: int | None = None, prompt: int = 10, output: int = 0) -> Request:
    req = Request(f"r{id(owner)}-{seq}-{output}", list(range(prompt)), SamplingParams.greedy(), owner=owner)
    req.seq = seq
    for _ in range(output):
        req.append_token(1)
    return req


def cells(seq: int) -> int:
    return 100 + seq  # a stand-in KV: sequence n holds 100 + n cells


def by_owner(lanes) -> dict[Owner, object]:
    return {lane.owner: lane for lane in lanes}


def test_each_owner_is_one_lane_with_its_rows_queue_and_cells():
    meter = LaneMeter()
    running = [request(TAB, seq=0), request(JOB, seq=1), request(JOB, seq=2)]
    waiting = [request(JOB), request(JOB), request(api_owner("curl/8.5.0"))]
    lanes = meter.lanes(0.0, running, waiting, cells)
    assert [lane.kind for lane in lanes] == ["chat", "api", "job"]  # the tabs' first
    tab, api, job = lanes
    assert (tab.name, tab.rows, tab.queued, tab.kv_cells) == ("Trip plans", 1, 0, 100)
    assert (job.rows, job.queued, job.kv_cells) == (2, 2, 101 + 102)
    assert (api.name, api.rows, api.queued, api.kv_cells) == ("curl/8.5.0", 0, 1, 0)


def test_a_lane_s_rate_is_its_tokens_over_the_window_finished_requests_included():
    meter = LaneMeter()
    meter.lanes(0.0, [request(TAB, seq=0)], [], cells)
    # a second later: 8 tokens in the running request, and one of 12 that finished meanwhile
    meter.finished(TAB, 12)
    [lane] = meter.lanes(1.0, [request(TAB, seq=0, output=8)], [], cells)
    assert lane.tok_s == 20.0
    # two more seconds, 10 more tokens: 30 over the 3 s since the first snapshot
    [lane] = meter.lanes(3.0, [request(TAB, seq=0, output=18)], [], cells)
    assert lane.tok_s == 10.0


def test_an_owner_seen_first_counts_what_it_made_since_the_last_snapshot():
    meter = LaneMeter()
    meter.lanes(0.0, [], [], cells)
    meter.finished(TITLE_OWNER, 6)  # a title that came and went between two snapshots
    [lane] = meter.lanes(0.5, [], [], cells)
    assert (lane.kind, lane.rows, lane.queued, lane.tok_s) == ("title", 0, 0, 12.0)


def test_an_idle_owner_leaves_once_its_tokens_are_out_of_the_window():
    meter = LaneMeter()
    meter.lanes(0.0, [request(JOB, seq=0)], [], cells)
    meter.finished(JOB, 5)
    assert [lane.owner for lane in meter.lanes(1.0, [], [], cells)] == [JOB]  # its rate still shows
    assert meter.lanes(1.0 + LANE_WINDOW_S + 0.1, [], [], cells) == ()
    assert meter.lanes(2.0 + LANE_WINDOW_S, [], [], cells) == ()
    assert not meter._tallies  # forgotten: owners never pile up


def test_a_preempted_request_keeps_its_tokens_in_its_owner_s_total():
    meter = LaneMeter()
    meter.lanes(0.0, [], [], cells)
    meter.lanes(1.0, [request(JOB, seq=0, output=4)], [], cells)
    back = request(JOB, output=4)  # back in the queue: its tokens are still its own
    [lane] = meter.lanes(2.0, [], [back], cells)
    assert (lane.rows, lane.queued, lane.tok_s) == (0, 1, 2.0)  # 4 tokens in 2 s, none lost


def test_names_are_one_short_line():
    owner = chat_owner("a title\nthat goes on " + "and on " * 20, 1)
    assert "\n" not in owner.name and len(owner.name) == NAME_CHARS and owner.name.endswith("…")
    assert chat_owner(None, 42).label == "chat 42" and Owner().label == "other"


def test_the_core_s_snapshot_has_a_lane_per_owner():
    d = make_driver(n_seqs=2)
    d.add("tab", [1] * 20, max_tokens=30, owner=TAB)
    d.add("job-1", [2] * 20, max_tokens=30, owner=JOB)
    d.add("job-2", [3] * 20, max_tokens=30, owner=JOB)  # no sequence left: it waits
    d.run(lambda: d.sched.running and all(r.is_decoding for r in d.sched.running))
    tab, job = d.core.snapshot().lanes
    assert (tab.owner, tab.rows, tab.queued) == (TAB, 1, 0)
    assert (job.owner, job.rows, job.queued) == (JOB, 1, 1)
    assert tab.kv_cells >= 20 and job.kv_cells >= 20
    d.run(lambda: not d.core.has_work())
    # all done: both lanes still show their rate over the window, with nothing in the batch
    lanes = d.core.snapshot().lanes
    assert [lane.owner for lane in lanes] == [TAB, JOB]
    assert all(lane.rows == 0 and lane.queued == 0 and lane.tok_s > 0 for lane in lanes)
    d.clock.now += LANE_WINDOW_S + 1
    d.core.snapshot()
    assert d.core.snapshot().lanes == ()  # idle for a whole window: gone
