"""OpenAI's Responses API (/v1/responses; issue 25), driven by the official `openai` client's
`responses` over loopback on the real model, with the responses stored in a chat database.
The model is tiny: these check the mechanics (shapes, event order, usage, continuing a
stored response and its cache reuse, deleting), not the text."""

from __future__ import annotations

import json

import pytest

from tests.support.engine_checks import assert_nothing_else_generates
from tests.support.served import client, post_json, serving
from tests.support.waiting import wait_until

openai = pytest.importorskip("openai")
pytestmark = pytest.mark.model  # a server on a real engine

STORY = "Write a very long story about a lighthouse keeper and the sea."
STREAM_ORDER = ["response.created", "response.in_progress", "response.output_item.added",
                "response.content_part.added", "response.output_text.delta", "response.output_text.done",
                "response.content_part.done", "response.output_item.done"]


@pytest.fixture(scope="module")
def server(shared_engine, tmp_path_factory):
    with serving(shared_engine, responses_db=tmp_path_factory.mktemp("responses") / "chorus.db") as srv:
        yield srv


@pytest.fixture
def fresh(make_engine, tmp_path):
    """A server on an engine of its own, for tests that count its prefill."""
    engine = make_engine(n_ctx=2048, n_seq_max=2, reproducible=True)
    with serving(engine, responses_db=tmp_path / "chorus.db") as srv:
        yield srv, engine


def create(c, text=STORY, max_output_tokens=16, **kw):
    return c.responses.create(model="smollm2", input=text, max_output_tokens=max_output_tokens, temperature=0, **kw)


def test_a_response_has_a_message_with_output_text_and_consistent_usage(server):
    r = create(client(server), "Say hello.", max_output_tokens=24)
    assert r.id.startswith("resp_") and r.object == "response" and r.model == "smollm2"
    assert [item.type for item in r.output] == ["message"] and r.output[0].role == "assistant"
    assert [part.type for part in r.output[0].content] == ["output_text"]
    assert r.output_text == r.output[0].content[0].text and r.output_text
    u = r.usage
    assert u.input_tokens > 5 and 0 < u.output_tokens <= 24 and u.total_tokens == u.input_tokens + u.output_tokens
    assert r.status in ("completed", "incomplete") and r.max_output_tokens == 24 and r.temperature == 0


def test_max_output_tokens_makes_it_incomplete_with_the_reason(server):
    r = create(client(server), max_output_tokens=3, extra_body={"ignore_eos": True})
    assert r.status == "incomplete" and r.incomplete_details.reason == "max_output_tokens"
    assert r.usage.output_tokens == 3 and r.output[0].status == "incomplete"


def test_message_items_with_instructions_and_parts_are_one_chat(server):
    """The same conversation as items with input_text/output_text parts and a developer
    message, or with a system message of plain strings, is the same prompt (same count)."""
    c = client(server)
    items = [{"role": "developer", "content": "Be brief."},
             {"role": "user", "content": [{"type": "input_text", "text": "Hi"}]},
             {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Hello!"}]},
             {"role": "user", "content": "Name a colour."}]
    plain = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
             {"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "Name a colour."}]
    a, b = create(c, items, max_output_tokens=4), create(c, plain, max_output_tokens=4)
    assert a.usage.input_tokens == b.usage.input_tokens and a.output_text and b.output_text
    with_instructions = create(c, plain[1:], max_output_tokens=4, instructions="Be brief.")
    assert with_instructions.usage.input_tokens == a.usage.input_tokens
    assert with_instructions.instructions == "Be brief."


def test_the_sdk_stream_gives_the_events_in_order_and_the_same_response(fresh):
    """On a reproducible engine of its own: the SDK's helper has a final response only for a
    reply the model ended, and on the module's shared engine the stream, whose prompt is
    found cached there, may write another greeting than the plain call (in CI: "I'm here"
    against "I'sure to", and once one that ran past 200 tokens: no response.completed).
    Reproducible, a cached prompt gives the logits a fresh one does, so the stream ends as
    the plain call did."""
    srv, _ = fresh
    c = client(srv)
    plain = create(c, "Say hello.", max_output_tokens=200)
    assert plain.status == "completed"  # the model ends its greeting itself
    with c.responses.stream(model="smollm2", input="Say hello.", max_output_tokens=200, temperature=0) as stream:
        events = list(stream)
        final = stream.get_final_response()
    kinds = [e.type for e in events]
    assert [k for i, k in enumerate(kinds) if i == 0 or k != kinds[i - 1]] == [*STREAM_ORDER, "response.completed"]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert deltas == final.output_text and deltas
    assert final.id == events[0].response.id and 0 < final.usage.output_tokens <= 200
    assert final.usage.input_tokens == plain.usage.input_tokens  # the same prompt


def test_a_stream_cut_at_max_output_tokens_ends_with_response_incomplete(server):
    stream = client(server).responses.create(model="smollm2", input=STORY, max_output_tokens=4, temperature=0,
                                             stream=True, extra_body={"ignore_eos": True})
    events = list(stream)
    kinds = [e.type for e in events]
    assert kinds[:4] == STREAM_ORDER[:4] and kinds.count("response.output_text.delta") >= 1
    assert kinds[-4:] == [*STREAM_ORDER[-3:], "response.incomplete"]
    end = events[-1].response
    assert end.status == "incomplete" and end.usage.output_tokens == 4
    assert events[-4].text == end.output_text  # output_text.done holds the whole text


def test_a_stored_response_is_retrieved_then_deleted_and_then_404(server):
    c = client(server)
    r = create(c, max_output_tokens=8, extra_body={"ignore_eos": True})
    assert r.store is True and r.status == "incomplete"
    got = c.responses.retrieve(r.id)
    assert (got.id, got.output_text, got.status, got.usage.output_tokens, got.incomplete_details.reason) == (
        r.id, r.output_text, "incomplete", 8, "max_output_tokens")
    assert (got.output[0].id, got.output[0].status) == (r.output[0].id, "incomplete")
    assert got.created_at == r.created_at  # the moment it was answered with, whatever the local time zone
    c.responses.delete(r.id)
    with pytest.raises(openai.NotFoundError):
        c.responses.retrieve(r.id)
    with pytest.raises(openai.NotFoundError):
        c.responses.delete(r.id)
    with pytest.raises(openai.NotFoundError):  # nothing to continue
        create(c, "And again?", previous_response_id=r.id)


def test_store_false_keeps_nothing(server):
    c = client(server)
    r = create(c, "Say hello.", max_output_tokens=4, store=False)
    assert r.store is False
    with pytest.raises(openai.NotFoundError):
        c.responses.retrieve(r.id)


def test_previous_response_id_continues_the_conversation_from_the_cache(fresh):
    """The second request sends only its new turn: its prompt holds the first's input and
    output (more input tokens than it sent), and the engine computes only what is new, the
    first prompt's tokens coming from the prefix cache."""
    srv, engine = fresh
    c = client(srv)
    first = create(c, "My name is Ada. Remember it.", max_output_tokens=12)
    alone = create(c, "What is my name?", max_output_tokens=4, store=False)
    before = engine.metrics(fresh=True).prompt_tokens_computed
    second = create(c, "What is my name?", max_output_tokens=4, previous_response_id=first.id)
    computed = engine.metrics(fresh=True).prompt_tokens_computed - before
    assert second.previous_response_id == first.id
    assert second.usage.input_tokens > first.usage.input_tokens + alone.usage.input_tokens // 2
    cached = second.usage.input_tokens_details.cached_tokens
    assert cached >= first.usage.input_tokens - 16  # the first prompt, up to a cache block
    assert computed == second.usage.input_tokens - cached < second.usage.input_tokens // 2
    third = create(c, "And again?", max_output_tokens=4, previous_response_id=second.id, stream=False)
    assert third.usage.input_tokens > second.usage.input_tokens + second.usage.output_tokens


def test_responses_are_a_conversation_in_the_chat_database_branching_where_two_continue_one(fresh, tmp_path):
    """Stored through the conversations room: the first response opens a conversation of the
    chat database (kept out of the window's list), the ones continuing it are its branches."""
    from storage import ChatRepository, ResponsesRepository, open_database

    srv, _ = fresh
    c = client(srv)
    first = create(c, "My name is Ada.", max_output_tokens=4)
    left = create(c, "What is my name?", max_output_tokens=4, previous_response_id=first.id)
    right = create(c, "Where am I?", max_output_tokens=4, previous_response_id=first.id)
    db = open_database(tmp_path / "chorus.db")
    try:
        with db.begin() as s:
            from sqlalchemy import text

            assert s.execute(text("SELECT origin, title FROM conversations")).all() == [("api", "My name is Ada.")]
            replies = s.execute(text("SELECT response_id, id FROM messages WHERE role = 'assistant' "
                                     "ORDER BY id")).all()
            users = dict(s.execute(text("SELECT content, parent_id FROM messages WHERE role = 'user'")).all())
        assert [r[0] for r in replies] == [first.id, left.id, right.id]
        assert users["What is my name?"] == users["Where am I?"] == replies[0][1]  # both under the first reply
        assert ChatRepository(db).list_conversations() == []
        assert [t["content"] for t in ResponsesRepository(db).conversation(right.id) or []] == [
            "My name is Ada.", first.output_text, "Where am I?", right.output_text]
    finally:
        db.close()


def test_a_streamed_response_is_stored_before_it_completes(server):
    """A client that continues on response.completed finds the response stored."""
    c = client(server)
    stream = c.responses.create(model="smollm2", input="Say hello.", max_output_tokens=6, temperature=0, stream=True)
    for event in stream:
        if event.type == "response.completed" or event.type == "response.incomplete":
            assert c.responses.retrieve(event.response.id).output_text == event.response.output_text


def test_bad_bodies_are_400s_naming_the_field(server):
    cases = [({"input": []}, "input"), ({"input": [{"role": "robot", "content": "x"}]}, "input[0].role"),
             ({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]},
              "input[0].content[0].image_url"),
             ({"input": [{"role": "user", "content": [{"type": "input_file", "file_id": "x"}]}]},
              "input[0].content[0].type"),
             ({"input": [{"type": "function_call_output", "output": "x"}]}, "input[0].type"),
             ({"input": "hi", "max_output_tokens": 0}, "max_output_tokens"),
             ({"input": "hi", "previous_response_id": "nope"}, "previous_response_id"),
             ({"input": "hi", "tools": [{"type": "function", "name": "f"}]}, "tools"),
             ({"input": "hi \ud800"}, "input")]
    for body, param in cases:
        status, _headers, raw = post_json(server, "/v1/responses", {"model": "m", **body})
        assert status == 400, (body, raw)
        assert openai_param(raw) == param, (body, raw)


def openai_param(raw: bytes) -> str:
    return json.loads(raw)["error"]["param"]


def test_a_server_without_a_database_refuses_previous_response_id(shared_engine):
    with serving(shared_engine) as srv:
        c = client(srv)
        r = create(c, "Say hello.", max_output_tokens=4)  # answered, not kept, and it says so
        assert r.output_text and r.store is False
        with pytest.raises(openai.NotFoundError):
            c.responses.retrieve(r.id)
        with pytest.raises(openai.BadRequestError, match="keeps no responses"):
            create(c, "Again", previous_response_id=r.id)


def test_a_client_leaving_mid_stream_frees_its_engine_request(make_engine, tmp_path):
    engine = make_engine(n_ctx=1024, n_seq_max=2)
    with serving(engine, responses_db=tmp_path / "chorus.db") as srv:
        stream = client(srv).responses.create(model="m", input=STORY, max_output_tokens=600, stream=True,
                                              extra_body={"ignore_eos": True})
        for event in stream:
            if event.type == "response.output_text.delta":
                break
        assert engine.metrics(fresh=True).running == 1  # still writing when the client leaves
        stream.close()
        wait_until(lambda: engine.metrics(fresh=True).running == 0, timeout=15)
        assert_nothing_else_generates(engine)
