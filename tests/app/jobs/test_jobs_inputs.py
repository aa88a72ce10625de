"""Job inputs and templates without a model (app/jobs): broken rows fail alone, a missing
column is its item's error, results export as JSONL and CSV from a real SQLite file."""

from __future__ import annotations

import csv
import json

import pytest

from app.jobs import InputError, ItemError, JobSpec, export, new_job, read_rows
from inference.params import SPARE_PRIORITY
from storage import ItemResult, JobsRepository, open_database


def test_a_csv_broken_row_fails_alone(tmp_path):
    path = tmp_path / "in.csv"
    path.write_text("name,city\nAda,London\nBob\nCy,Paris\n", encoding="utf-8")
    rows = read_rows(path)
    assert [r.fields for r in rows if r.error is None] == [{"name": "Ada", "city": "London"},
                                                            {"name": "Cy", "city": "Paris"}]
    assert [r.error for r in rows] == [None, "line 3: 1 fields where the header has 2", None]


def test_a_jsonl_line_not_json_fails_alone(tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_text('{"q": "one"}\n{oops\n\n[1]\n{"q": "two"}\n', encoding="utf-8")
    rows = read_rows(path)
    assert [r.fields.get("q") for r in rows if r.error is None] == ["one", "two"]
    errors = [r.error for r in rows if r.error]
    assert errors[0].startswith("line 2: not JSON (") and errors[1] == "line 4: not a JSON object"


def test_an_unknown_format_is_refused_whole(tmp_path):
    path = tmp_path / "in.txt"
    path.write_text("hello", encoding="utf-8")
    with pytest.raises(InputError, match="not a .csv or .jsonl"):
        read_rows(path)


def test_a_template_naming_a_missing_column_is_that_items_error():
    spec = JobSpec(template="Capital of $country?", system_prompt="Be brief.", sampling={"max_tokens": 8})
    chat = spec.request({"country": "France"}, "r1")
    assert chat.messages == ({"role": "system", "content": "Be brief."},
                             {"role": "user", "content": "Capital of France?"})
    assert chat.priority == SPARE_PRIORITY and chat.sampling.max_tokens == 8
    with pytest.raises(ItemError, match="lacks: country"):
        spec.request({"nation": "France"}, "r2")


def test_results_export_as_jsonl_and_csv(tmp_path):
    db = open_database(tmp_path / "chorus.db")
    try:
        jobs = JobsRepository(db)
        path = tmp_path / "in.csv"
        path.write_text("country\nFrance\nPeru\n", encoding="utf-8")
        job = new_job(jobs, read_rows(path), JobSpec(template="$country"), source="in.csv")
        first = jobs.pending(job.id)[0]
        jobs.finish(first.id, ItemResult(answer="Paris", finish_reason="stop", prompt_tokens=5, completion_tokens=2))
        assert export(jobs, job.id, tmp_path / "out.jsonl") == 2
        lines = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text(encoding="utf-8").splitlines()]
        assert [(r["fields"], r["state"], r["answer"], r["completion_tokens"]) for r in lines] == [
            ({"country": "France"}, "done", "Paris", 2), ({"country": "Peru"}, "pending", None, 0)]
        export(jobs, job.id, tmp_path / "out.csv")
        with (tmp_path / "out.csv").open(encoding="utf-8", newline="") as f:
            table = list(csv.DictReader(f))
        assert [(r["country"], r["answer"], r["finish_reason"]) for r in table] == [
            ("France", "Paris", "stop"), ("Peru", "", "")]
    finally:
        db.close()
