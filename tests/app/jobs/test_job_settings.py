"""A row's own sampling settings (issue 37: "N seeds / presets of one prompt"): a column
named @ and a sampling field sets it for that row's item; `chorus batch run --seeds N` is
one prompt with seeds 1..N."""

from __future__ import annotations

import json

import pytest

from app.jobs import ItemError, JobSpec, seed_rows
from app.jobs.inputs import csv_rows
from tests.support.cli import chorus_in_process

SPEC = JobSpec(template="Forecast for $city at $temperature degrees.", sampling={"max_tokens": 8, "temperature": 0.7})


def request_of(row: dict):
    return SPEC.request(row, "r1")


def test_at_columns_set_their_rows_sampling_and_data_columns_stay_data():
    (row,) = [item.fields for item in csv_rows("city,temperature,@seed,@temperature,@top_p\nOslo,-3,42,1.2,0.9\n")]
    chat = request_of(row)
    sampling = chat.sampling
    assert (sampling.seed, sampling.temperature, sampling.top_p, sampling.max_tokens) == (42, 1.2, 0.9, 8)
    assert chat.messages[-1]["content"] == "Forecast for Oslo at -3 degrees."  # "temperature" is the data's
    plain = request_of({"city": "Oslo", "temperature": "-3"}).sampling
    assert (plain.seed, plain.temperature) == (None, 0.7)  # the job's own


def test_a_bad_setting_fails_its_item_with_the_reason():
    base = {"city": "Oslo", "temperature": "1"}
    with pytest.raises(ItemError, match="'colour' is not a sampling setting"):
        request_of({**base, "@colour": "red"})
    with pytest.raises(ItemError, match="column @seed: '2.5' is not a int"):
        request_of({**base, "@seed": "2.5"})
    with pytest.raises(ItemError, match="top_p must be"):
        request_of({**base, "@top_p": "7"})
    with pytest.raises(ItemError, match="column @temperature is empty"):
        request_of({**base, "@temperature": ""})
    assert request_of({**base, "@seed": "3.0", "@ignore_eos": "true"}).sampling.ignore_eos is True
    assert request_of({**base, "@seed": str(2**64 - 1)}).sampling.seed == 2**64 - 1  # exactly, not via a float


def test_seed_rows_are_one_prompt_with_seeds_one_to_n():
    assert [r.fields for r in seed_rows(3)] == [{"@seed": 1}, {"@seed": 2}, {"@seed": 3}]
    assert JobSpec(template="Name a colour.").request(seed_rows(2)[1].fields, "r").sampling.seed == 2
    with pytest.raises(ValueError):
        seed_rows(0)


def test_chorus_batch_run_takes_input_or_seeds_not_both(tmp_path, capsys):
    rows = tmp_path / "rows.csv"
    rows.write_text("x\n1\n", encoding="utf-8")
    both = chorus_in_process(capsys, tmp_path, "batch", "run", str(rows), "--seeds", "3", "--prompt", "Hi")
    assert both.returncode == 2 and "not both" in both.stderr
    none = chorus_in_process(capsys, tmp_path, "batch", "run", "--seeds", "0", "--prompt", "Hi")
    assert none.returncode == 2 and "--seeds must be at least 1" in none.stderr
    assert chorus_in_process(capsys, tmp_path, "batch", "list").stdout == ""  # no job was made


@pytest.mark.model
def test_chorus_batch_run_seeds_samples_each_item_with_its_own_seed(model_path, tmp_path, capsys):
    def run(out):
        said = chorus_in_process(capsys, tmp_path, "batch", "run", "--seeds", "4", "--prompt",
                                 "Write one unusual word.", "--temperature", "1.5", "--max-tokens", "12",
                                 "--model", str(model_path), "--out", str(out), "--json")
        assert said.returncode == 0, said.stderr
        assert json.loads(said.stdout.strip().splitlines()[-1])["done"] == 4
        return [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]

    first = run(tmp_path / "first.jsonl")
    assert [r["fields"] for r in first] == [{"@seed": s} for s in (1, 2, 3, 4)]
    answers = [r["answer"] for r in first]
    assert all(answers) and len(set(answers)) > 1  # four seeds at 1.5: not one answer four times
    again = run(tmp_path / "again.jsonl")  # the same seeds: the same draws
    assert [r["answer"] for r in again] == answers
