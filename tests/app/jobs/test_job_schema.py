"""A job's JSON Schema (structured output): checked once, as the server checks
response_format's json_schema (app/output_schema.py), so the New job form and `chorus batch
run --schema` refuse what the server refuses, in its words; stored with the job's spec,
applied to every item's request as a grammar, and each answer validated against it."""

from __future__ import annotations

import json

import pytest

from app.jobs import JobForm, JobSpec, TemplateWork, preview
from app.jobs.inputs import csv_rows
from app.server.http.errors import ApiError
from app.server.openai.parsing import response_grammar_of
from inference import Delta, FinishReason
from storage import ItemRecord
from tests.support.cli import chorus_in_process

ROWS = csv_rows("name,city\nAda,London\nAlan,Wilmslow\n")
PERSON = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
          "required": ["name", "age"]}
UNENFORCEABLE = {"type": "object", "properties": {"age": {"not": {"type": "string"}}}}


def server_says(schema: dict) -> str:
    """What the server answers a chat completion whose response_format carries this schema."""
    with pytest.raises(ApiError) as refused:
        response_grammar_of({"response_format": {"type": "json_schema",
                                                  "json_schema": {"name": "s", "schema": schema}}})
    return str(refused.value)


def test_the_form_refuses_a_schema_the_server_refuses_in_the_same_words():
    shown = preview(JobForm("Describe $name.", schema_text=json.dumps(UNENFORCEABLE)), ROWS)
    assert not shown.ok
    assert shown.problem == ("The JSON Schema cannot be enforced: json_schema.properties.age uses 'not', "
                             "which is not supported: no grammar can enforce it")
    server = server_says(UNENFORCEABLE)
    assert server.endswith("schema.properties.age uses 'not', which is not supported: no grammar can enforce it")
    assert shown.problem.split("json_schema", 1)[1] == server.split("json_schema.schema", 1)[1]


def test_the_form_refuses_text_that_is_not_json_and_a_schema_that_is_not_an_object():
    assert preview(JobForm("x $name", schema_text="{type: object"), ROWS).problem.startswith(
        "The JSON Schema is not JSON: ")
    assert preview(JobForm("x $name", schema_text="[1]"), ROWS).problem == (
        "The JSON Schema cannot be enforced: json_schema must be a JSON Schema object, got list")


def test_a_valid_schema_is_previewed_and_stored_with_the_spec():
    form = JobForm("Describe $name.", schema_text=json.dumps(PERSON))
    shown = preview(form, ROWS)
    assert shown.ok and shown.schema == PERSON
    assert "Answers follow this JSON Schema" in shown.text() and '"required": ["name", "age"]' in shown.text()
    spec = form.spec()
    assert JobSpec.from_json(spec.to_json()).json_schema == PERSON
    assert preview(JobForm("Describe $name.", schema_text="  \n"), ROWS).schema is None  # blank: free text


def item(seq: int) -> ItemRecord:
    return ItemRecord(id=seq + 1, job_id="job_1", seq=seq, custom_id=None, fields={"name": "Ada"}, state="pending")


def answer(work: TemplateWork, text: str, reason: FinishReason = FinishReason.STOP):
    run = work.start(item(0), "r0")
    assert not isinstance(run, type(None)) and hasattr(run, "requests")
    run.add(0, Delta(request_id="r0", text=text))
    run.add(0, Delta.finished_with("r0", reason))
    return run, run.result(0.1)


def test_every_request_carries_the_schemas_grammar_and_each_answer_is_validated():
    work = TemplateWork(JobSpec(template="Describe $name.", json_schema=PERSON))
    run, good = answer(work, '{"name": "Ada", "age": 36}')
    assert run.requests[0].sampling.grammar == JobSpec(template="", json_schema=PERSON).grammar()
    assert good.error is None and good.answer == '{"name": "Ada", "age": 36}'
    _run, cut = answer(work, '{"name": "Ada", "a', FinishReason.LENGTH)
    assert cut.error.startswith("the answer is not JSON (") and cut.answer == '{"name": "Ada", "a'
    _run, wrong = answer(work, '{"name": "Ada", "age": "old"}')
    assert wrong.error == "the answer does not follow the JSON Schema: at ['age'], 'old' is not of type 'integer'"
    free = TemplateWork(JobSpec(template="Describe $name."))
    run, text = answer(free, "not JSON at all")
    assert run.requests[0].sampling.grammar is None and text.error is None


def test_a_job_whose_stored_schema_cannot_be_enforced_fails_each_item_with_the_reason():
    result = TemplateWork(JobSpec(template="Describe $name.", json_schema=UNENFORCEABLE)).start(item(0), "r0")
    assert getattr(result, "error", None) == ("json_schema.properties.age uses 'not', which is not supported: "
                                              "no grammar can enforce it")


def test_chorus_batch_run_refuses_the_schema_before_loading_a_model(tmp_path, capsys):
    rows = tmp_path / "people.csv"
    rows.write_text("name\nAda\n", encoding="utf-8")
    schema = tmp_path / "bad.schema.json"
    schema.write_text(json.dumps(UNENFORCEABLE), encoding="utf-8")
    said = chorus_in_process(capsys, tmp_path, "batch", "run", str(rows), "--prompt", "Describe $name.",
                             "--schema", str(schema), "--model", str(tmp_path / "no-such-model.gguf"))
    assert said.returncode == 2
    assert "json_schema.properties.age uses 'not', which is not supported" in said.stderr
    assert chorus_in_process(capsys, tmp_path, "batch", "list").stdout == ""  # no job was made
