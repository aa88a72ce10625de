"""`chorus bench-schemas` (app/bench/schemas.py) on the real model, small: a folder of two
sets, each outcome counted where it belongs, and a peer's answers read the way llama-server
writes them (a stand-in HTTP server on loopback: the real llama-server is not built here)."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from app.bench import schemas
from inference import LoadSettings
from tests.support.net import serving_on_a_thread

BOOLEAN = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
NOT = {"type": "object", "properties": {"x": {"not": {"type": "string"}}}}  # no engine enforces `not`
COLOUR = {"type": "string", "enum": ["red", "green"]}
NUMBER = {"type": "integer"}


@pytest.fixture
def data(tmp_path):
    (tmp_path / "Alpha").mkdir()
    (tmp_path / "Beta").mkdir()
    (tmp_path / "Alpha" / "a_boolean.json").write_text(json.dumps(BOOLEAN))
    (tmp_path / "Alpha" / "b_not.json").write_text(json.dumps(NOT))
    (tmp_path / "Beta" / "colour.json").write_text(json.dumps(COLOUR))
    (tmp_path / "Beta" / "number.json").write_text(json.dumps(NUMBER))
    (tmp_path / "Beta" / "broken.json").write_text("{not json")  # left out of the sample
    (tmp_path / "Beta" / "list.json").write_text("[1, 2]")  # not a schema object: left out too
    return tmp_path


class PeerStandIn(BaseHTTPRequestHandler):
    """Answers as llama-server does: a 400 for the schema it refuses, `length` for the
    boolean object (cut) and for the integer (whole all the same), a valid colour."""

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        schema = body["response_format"]["json_schema"]["schema"]
        if schema == NOT:
            self._answer(400, {"error": {"message": "unsupported"}})
        elif schema == BOOLEAN:
            self._answer(200, {"choices": [{"finish_reason": "length", "message": {"content": '{"ok": '}}]})
        elif schema == NUMBER:
            self._answer(200, {"choices": [{"finish_reason": "length", "message": {"content": "7"}}]})
        else:
            self._answer(200, {"choices": [{"finish_reason": "stop", "message": {"content": '"green"'}}]})

    def _answer(self, status: int, payload: dict) -> None:
        raw = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def peer():
    with serving_on_a_thread(ThreadingHTTPServer(("127.0.0.1", 0), PeerStandIn)) as server:
        yield f"http://127.0.0.1:{server.server_port}"


def test_the_sample_leaves_out_files_that_are_no_schema_and_is_the_same_for_a_seed(data):
    options = schemas.SchemaBenchOptions(data=data, sets=("Alpha", "Beta"), per_set=5)
    names = [(c.set_name, c.name) for c in schemas.sample_cases(options)]
    assert sorted(names) == [("Alpha", "a_boolean"), ("Alpha", "b_not"), ("Beta", "colour"), ("Beta", "number")]
    assert names == [(c.set_name, c.name) for c in schemas.sample_cases(options)]
    with pytest.raises(ValueError, match="no schema set 'Gamma'"):
        schemas.sample_cases(schemas.SchemaBenchOptions(data=data, sets=("Gamma",)))


@pytest.mark.model
def test_each_outcome_is_counted_in_its_set_for_chorus_and_the_peer(data, peer, model_path):
    options = schemas.SchemaBenchOptions(data=data, sets=("Alpha", "Beta"), per_set=5, max_tokens=32,
                                         concurrency=2, peer=peer)
    report = schemas.run_schema_bench(options, LoadSettings(model_path=model_path, n_ctx=2048))
    chorus, other = report["chorus"], report["peer"]
    assert chorus["Alpha"]["refused"] == 1 and chorus["Alpha"]["schemas"] == 2  # `not` is a 400 here too
    assert chorus["Beta"]["covered"] >= 1  # an enum's grammar leaves nothing else to write
    assert chorus["all"]["schemas"] == 4
    assert (other["Alpha"]["refused"], other["Alpha"]["out_of_tokens"], other["Beta"]["covered"]) == (1, 1, 1)
    assert other["Beta"]["closed"] == 1  # ended by max_tokens, valid all the same
    assert other["all"]["coverage"] == pytest.approx(2 / 4)
    assert 0 < report["compile_ms"]["p50"] <= report["compile_ms"]["max"]
    assert report["decode_tok_s"]["grammar"] > 0 and report["decode_tok_s"]["plain"] > 0
    text = schemas.render(report, as_json=False)
    assert "llama-server" in text and "Beta" in text
