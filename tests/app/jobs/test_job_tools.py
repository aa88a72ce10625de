"""A job whose model calls tools (app/jobs/tools.py, tool_run.py), on the real model and the
SDK-made MCP test server started for the job's run: every item's forced call validates
against the tool's schema, runs on the server, and its result is in the item's stored
exchange before the answer; the job's tools are kept in its spec, so a resumed job calls the
same ones; a server that does not start stops the job before any item runs."""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path

import pytest

from app.jobs import COMPLETED, PAUSED, JobRunner, JobSpec, JobTools, JobToolsError, export, new_job
from app.tools import StdioServer
from inference import SPARE_PRIORITY, ChatRequest, Delta, FinishReason, job_owner
from storage import ItemInput, JobsRepository, open_database
from tests.support.cli import chorus, chorus_in_process

jsonschema = pytest.importorskip("jsonschema")
TEST_SERVER = Path(__file__).parents[2] / "support" / "mcp_test_server.py"
ADDER = JobTools.of([StdioServer("test", sys.executable, (str(TEST_SERVER), "stdio"))], choice="required",
                    max_rounds=2, enabled=["add"], timeout_s=20)
SPEC = JobSpec(template="What is $a plus $b? Use the add tool.", sampling={"max_tokens": 40, "temperature": 0.0},
               tools=ADDER.to_json())
PAIRS = [(17, 25), (3, 4), (120, 5), (8, 9)]


@pytest.fixture
def jobs(tmp_path):
    db = open_database(tmp_path / "chorus.db")
    yield JobsRepository(db)
    db.close()


def rows() -> list[ItemInput]:
    return [ItemInput(fields={"a": str(a), "b": str(b)}) for a, b in PAIRS]


class Recording:
    """The real engine, with the requests it was sent kept (their priority and owner)."""

    def __init__(self, engine) -> None:
        self.engine, self.sent = engine, []
        self.lock = threading.Lock()

    def __getattr__(self, name):
        return getattr(self.engine, name)

    def stream(self, chat: ChatRequest, sink) -> str:
        with self.lock:
            self.sent.append(chat)
        return self.engine.stream(chat, sink)


def test_the_spec_keeps_the_tools_and_refuses_them_beside_a_schema():
    again = JobSpec.from_json(json.loads(json.dumps(SPEC.to_json())))
    tools = JobTools.from_json(again.tools)
    assert tools == ADDER and tools.servers()[0].args == (str(TEST_SERVER), "stdio")
    with pytest.raises(ValueError, match="JSON Schema or come after tool calls"):
        JobSpec(template="x", json_schema={"type": "object"}, tools=ADDER.to_json())
    with pytest.raises(ValueError, match="auto or required"):
        JobTools.of([], web={}, choice="none")
    with pytest.raises(ValueError, match="needs an MCP server or the web tools"):
        JobTools.of([])


@pytest.mark.model
def test_every_item_calls_the_tool_and_answers_with_its_result(jobs, shared_engine, tmp_path):
    job = new_job(jobs, rows(), SPEC)
    engine = Recording(shared_engine)
    assert JobRunner(jobs, engine, job.id, window=3).run() == COMPLETED

    items = jobs.items(job.id)
    assert [i.state for i in items] == ["done"] * len(PAIRS), [i.error for i in items]
    for item in items:
        call_turn, result, answer = item.exchange
        call = call_turn["tool_calls"][0]
        assert call["function"]["name"] == "add" and "written" not in call_turn
        arguments = json.loads(call["function"]["arguments"])
        jsonschema.validate(arguments, {"type": "object", "properties": {"a": {"type": "integer"},
                                        "b": {"type": "integer"}}, "required": ["a", "b"]})
        assert result == {"role": "tool", "tool_call_id": call["id"], "content": str(arguments["a"] + arguments["b"])}
        assert answer == {"role": "assistant", "content": item.answer} and item.answer.strip()
        assert item.completion_tokens > 0 and item.prompt_tokens > 0
    # Two turns an item, each at spare priority in the job's lane; the second's prompt holds the first's.
    assert len(engine.sent) == 2 * len(PAIRS)
    assert {c.priority for c in engine.sent} == {SPARE_PRIORITY}
    assert {c.owner for c in engine.sent} == {job_owner(job.id)}
    for first in engine.sent:
        if first.sampling.grammar is not None:  # the forced call's turn
            follow = [c for c in engine.sent if c.messages[:len(first.messages)] == first.messages
                      and len(c.messages) > len(first.messages)]
            assert len(follow) == 1

    out = tmp_path / "out.jsonl"
    export(jobs, job.id, out)
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [line["exchange"] for line in lines] == [i.exchange for i in items]
    export(jobs, job.id, tmp_path / "out.csv")
    assert "exchange" in (tmp_path / "out.csv").read_text().splitlines()[0].split(",")


@pytest.mark.model
def test_a_paused_job_with_tools_resumes_each_item_exactly_once(jobs, shared_engine):
    job = new_job(jobs, rows() * 2, SPEC)
    first = JobRunner(jobs, shared_engine, job.id, window=2)
    assert first.run(on_progress=lambda counts: counts["done"] >= 2 and first.pause()) == PAUSED
    counts = jobs.counts(job.id)
    assert counts["done"] >= 2 and counts["pending"] > 0 and counts["failed"] == 0

    written: list[int] = []
    original = jobs.finish
    jobs.finish = lambda item_id, result: written.append(item_id) or original(item_id, result)
    assert JobRunner(jobs, shared_engine, job.id, window=2).run() == COMPLETED
    assert len(written) == len(set(written)) == counts["pending"]
    assert all(i.state == "done" and i.exchange for i in jobs.items(job.id))


def test_a_server_that_does_not_start_stops_the_job_before_any_item(jobs):
    broken = JobTools.of([StdioServer("gone", sys.executable, ("-c", "import sys; sys.exit(3)"))])
    job = new_job(jobs, rows(), JobSpec(template="$a", tools=broken.to_json()))
    with pytest.raises(JobToolsError, match="gone"):
        JobRunner(jobs, _NoEngine(), job.id, window=2).run()
    assert jobs.counts(job.id)["pending"] == len(PAIRS)


class _NoEngine:
    """No item may reach an engine: the job stops at its tools."""

    info = None

    def stream(self, chat, sink):
        raise AssertionError("an item ran without its tools")


def test_chorus_batch_run_refuses_tools_it_cannot_keep(tmp_path, capsys):
    source = tmp_path / "pairs.csv"
    source.write_text("a,b\n1,2\n", encoding="utf-8")
    schema = tmp_path / "schema.json"
    schema.write_text('{"type": "object"}', encoding="utf-8")
    run = ("batch", "run", str(source), "--prompt", "$a+$b", "--mcp", f"{sys.executable} {TEST_SERVER} stdio")
    both = chorus_in_process(capsys, tmp_path, *run, "--schema", str(schema))
    assert both.returncode == 2 and "JSON Schema or come after tool calls" in both.stderr
    rounds = chorus_in_process(capsys, tmp_path, *run, "--max-tool-rounds", "0")
    assert rounds.returncode == 2 and "--max-tool-rounds must be at least 1" in rounds.stderr
    assert chorus_in_process(capsys, tmp_path, "batch", "list").stdout == ""  # no job was made


@pytest.mark.model
def test_chorus_batch_run_with_an_mcp_server_stores_each_items_call(model_path, tmp_path):
    source = tmp_path / "pairs.csv"
    source.write_text("a,b\n" + "".join(f"{a},{b}\n" for a, b in PAIRS[:2]), encoding="utf-8")
    out = tmp_path / "out.jsonl"
    said = chorus(tmp_path / "data", "batch", "run", str(source), "--prompt", SPEC.template, "--max-tokens", "40",
                  "--temperature", "0", "--model", str(model_path), "--mcp", f"{sys.executable} {TEST_SERVER} stdio",
                  "--tool", "add", "--tool-choice", "required", "--max-tool-rounds", "2", "--out", str(out), "--json")
    assert said.returncode == 0, said.stderr
    assert json.loads(said.stdout.strip().splitlines()[-1])["done"] == 2
    for line in map(json.loads, out.read_text(encoding="utf-8").splitlines()):
        call = line["exchange"][0]["tool_calls"][0]["function"]
        arguments = json.loads(call["arguments"])
        assert call["name"] == "add" and line["exchange"][1]["content"] == str(arguments["a"] + arguments["b"])
        assert line["answer"] == line["exchange"][-1]["content"]


class CallingEngine:
    """A stand-in model that answers every turn with one call (the generic format's JSON),
    at once; it counts the turns it was sent."""

    info = None

    def __init__(self, call: str) -> None:
        self.call, self.turns = call, 0
        self.sent = threading.Event()

    def prepare(self, chat):
        return chat

    def stream(self, chat, sink) -> str:
        self.turns += 1
        sink(Delta(chat.request_id, text=self.call, token_ids=(1, 2, 3)))
        sink(Delta.finished_with(chat.request_id, FinishReason.STOP))
        self.sent.set()
        return chat.request_id

    def cancel(self, request_id) -> None:
        pass


def test_a_pause_while_an_items_tool_call_hangs_returns_soon_and_leaves_the_item_pending(jobs):
    hanging = JobTools.of([StdioServer("test", sys.executable, (str(TEST_SERVER), "stdio"))], choice="required",
                          enabled=["slow"], timeout_s=60)
    job = new_job(jobs, rows()[:1], JobSpec(template="Wait $a seconds.", tools=hanging.to_json()))
    engine = CallingEngine('{"name": "slow", "arguments": {"seconds": 30}}')
    runner = JobRunner(jobs, engine, job.id, window=1)

    def pause_once_the_call_runs() -> None:
        engine.sent.wait(30)
        time.sleep(0.5)  # the call is on the server by now (a pause before it would be no hang)
        runner.pause()

    threading.Thread(target=pause_once_the_call_runs, daemon=True).start()
    began = time.monotonic()
    assert runner.run() == PAUSED
    assert time.monotonic() - began < 20  # not the call's 30 s, nor its 60 s timeout
    assert engine.turns == 1 and jobs.counts(job.id) == {"pending": 1, "done": 0, "failed": 0}
    time.sleep(1.0)  # the loop's thread ends after the run: it starts no turn and writes nothing
    assert engine.turns == 1 and jobs.counts(job.id)["pending"] == 1
