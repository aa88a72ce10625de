"""A batch input checked as OpenAI checks it while `validating` (app/server/batches/lines.py),
and a finished batch's lines in OpenAI's output format (output.py); no model, no server."""

from __future__ import annotations

import json

from app.server.batches.lines import MAX_ERRORS, Served, check_lines
from app.server.batches.output import jsonl, line_id, split_lines
from storage import ItemRecord

CHAT = "/v1/chat/completions"


def line(custom_id: str = "a", url: str = CHAT, method: str = "POST", **body) -> str:
    return json.dumps({"custom_id": custom_id, "method": method, "url": url,
                       "body": {"messages": [{"role": "user", "content": "Hi"}], **body}})


def test_good_lines_become_items_with_their_custom_ids_blank_lines_skipped():
    data = "\n".join([line("a", model="m"), "", "   ", line("b")]).encode() + b"\n"
    checked = check_lines(data, CHAT, "m")
    assert checked.errors == []
    assert [(i.custom_id, i.fields["messages"][0]["content"]) for i in checked.items] == [("a", "Hi"), ("b", "Hi")]


def pool_names() -> Served:
    """A server of two models (`chorus serve --models`), "smol" the default, "gem" an alias."""
    names = ("smol", "gemma")
    return Served("smol", lambda n: {"gem": "gemma"}.get(n, n) if {"gem": "gemma"}.get(n, n) in names else None,
                  names)


def test_on_several_models_a_batch_takes_the_model_its_lines_name_aliases_included():
    checked = check_lines("\n".join([line("a", model="gem"), line("b", model="gemma")]).encode(), CHAT, pool_names())
    assert checked.errors == [] and checked.model == "gemma" and len(checked.items) == 2
    unnamed = check_lines(line("a").encode(), CHAT, pool_names())
    assert unnamed.errors == [] and unnamed.model == "smol"  # the server's default


def test_lines_naming_two_models_fail_the_batch_naming_both_and_the_models_served():
    lines = [line("a", model="smol"), line("b", model="gemma"), line("c"), line("d", model="llama")]
    checked = check_lines("\n".join(lines).encode(), CHAT, pool_names())
    assert checked.items == []
    assert [(e["line"], e["code"], e["param"]) for e in checked.errors] == [
        (2, "mismatched_model", "body.model"), (4, "model_not_found", "body.model")]
    mixed, unknown = (e["message"] for e in checked.errors)
    assert "'gemma'" in mixed and "'smol'" in mixed and "served: smol, gemma" in mixed
    assert "'llama' is not served here; served: 'smol', 'gemma'" in unknown


def test_every_bad_line_is_listed_with_its_number_code_and_field_and_nothing_runs():
    lines = [line("a"), "{oops", "[1]", json.dumps({"custom_id": "x", "method": "POST", "url": CHAT}),
             line("a"), line("c", url="/v1/embeddings"), line("d", method="GET"), line("e", model="gpt-4o"),
             json.dumps({"custom_id": "f", "method": "POST", "url": CHAT, "body": "hi"}), line("")]
    checked = check_lines("\n".join(lines).encode(), CHAT, "smollm2")
    assert checked.items == []  # one bad line fails the batch: nothing half run
    got = [(e["line"], e["code"], e["param"]) for e in checked.errors]
    assert got == [(2, "invalid_json_line", None), (3, "invalid_json_line", None),
                   (4, "missing_required_parameter", "body"), (5, "duplicate_custom_id", "custom_id"),
                   (6, "mismatched_endpoint", "url"), (7, "invalid_value", "method"),
                   (8, "model_not_found", "body.model"), (9, "invalid_value", "body"),
                   (10, "invalid_value", "custom_id")]
    assert "also on line 1" in checked.errors[3]["message"]
    assert "'gpt-4o' is not served here; this server serves 'smollm2'" in checked.errors[6]["message"]


def test_an_empty_file_a_file_not_utf8_and_a_flood_of_errors_fail_whole():
    assert [e["code"] for e in check_lines(b"\n\n", CHAT, "m").errors] == ["empty_file"]
    assert [e["code"] for e in check_lines(b"\xff\xfe{", CHAT, "m").errors] == ["invalid_file_format"]
    many = check_lines(b"nope\n" * (MAX_ERRORS + 50), CHAT, "m")
    assert len(many.errors) == MAX_ERRORS and many.items == []


def item(seq: int, state: str, answer: dict | None = None, error: str | None = None) -> ItemRecord:
    return ItemRecord(id=seq + 1, job_id="batch_x", seq=seq, custom_id=f"c{seq}", fields={}, state=state,
                      answer=json.dumps(answer) if answer is not None else None, error=error)


def test_output_and_error_files_in_openai_format_in_input_order():
    ok = {"status_code": 200, "request_id": "r0", "body": {"object": "chat.completion", "choices": []}}
    bad = {"status_code": 400, "request_id": "r1", "body": {"error": {"message": "temperature must be <= 2"}}}
    items = [item(0, "done", ok), item(1, "failed", bad, "temperature must be <= 2"),
             item(2, "failed", None, "the engine stopped"), item(3, "pending"), item(4, "done", ok)]
    output, errors = split_lines(items)
    assert [(o["custom_id"], o["response"]["status_code"], o["error"]) for o in output] == [
        ("c0", 200, None), ("c4", 200, None)]
    assert output[0]["id"] == line_id("batch_x", 0) != line_id("batch_x", 4)
    assert errors[0] == {"id": line_id("batch_x", 1), "custom_id": "c1", "response": bad, "error": None}
    assert errors[1]["response"] is None and errors[1]["error"] == {"code": "request_failed",
                                                                    "message": "the engine stopped"}
    assert len(errors) == 2  # a pending request has no line while the batch is not cancelled
    _, cancelled_errors = split_lines(items, cancelled=True)
    assert cancelled_errors[-1]["custom_id"] == "c3" and cancelled_errors[-1]["error"]["code"] == "batch_cancelled"
    text = b"".join(jsonl(output)).decode()
    assert text.endswith("\n") and [json.loads(x)["custom_id"] for x in text.splitlines()] == ["c0", "c4"]
