"""The tool loop (app/tools/agent.py) on the real model and a real MCP server: a forced call
whose arguments validate against the tool's schema, the tool run, its result in the next
prompt, a text answer at the end; a denial given back to the model as the tool's result."""

from __future__ import annotations

import json

import pytest

from app.tools import (
    DENIED,
    Approval,
    CallFinished,
    CallStarted,
    Notice,
    TextDelta,
    Toolbox,
    ToolLoop,
    TurnDone,
)
from inference import SamplingParams

jsonschema = pytest.importorskip("jsonschema")
SAMPLING = SamplingParams(max_tokens=60, temperature=0.0)


class Recording:
    """The real engine, with the chats it was sent kept."""

    def __init__(self, engine) -> None:
        self.engine, self.sent = engine, []

    def stream(self, chat, sink):
        self.sent.append(chat)
        return self.engine.stream(chat, sink)

    def cancel(self, request_id):
        self.engine.cancel(request_id)


def _adder(manager, test_server) -> Toolbox:
    manager.start(test_server).result(30)
    return Toolbox(manager, [t for t in manager.tools() if t.name == "add"], timeout_s=20)


@pytest.mark.model
def test_a_required_call_runs_the_tool_and_the_model_answers_with_its_result(shared_engine, manager, test_server):
    toolbox = _adder(manager, test_server)
    engine = Recording(shared_engine)
    messages = [{"role": "user", "content": "What is 17 plus 25? Use the add tool."}]
    asked = []
    loop = ToolLoop(engine, toolbox, messages, SAMPLING, choice="required", max_rounds=3,
                    approve=lambda call, tool: asked.append(call.name) or Approval.ONCE)
    events = list(loop.run())

    started = [e for e in events if isinstance(e, CallStarted)]
    finished = [e for e in events if isinstance(e, CallFinished)]
    assert started and len(started) == len(finished) and asked == [e.call.name for e in started]
    first = finished[0]
    arguments = json.loads(first.call.arguments)
    jsonschema.validate(arguments, first.tool.input_schema)  # the grammar made it so
    assert first.result.text == str(arguments["a"] + arguments["b"]) and not first.result.is_error

    assert engine.sent[0].sampling.grammar is not None  # forced
    assert engine.sent[1].sampling.grammar is None
    follow_up = engine.sent[1].messages
    assert follow_up[:len(engine.sent[0].messages)] == engine.sent[0].messages  # the same prefix, the KV reused
    assert f"The result of add (call {first.call.id}):\n{first.result.text}" in follow_up[-1]["content"]

    turns = [e for e in events if isinstance(e, TurnDone)]
    assert turns[-1].calls == () and turns[-1].text.strip() and turns[-1].last.error is None
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == turns[-1].text
    assert messages[1]["tool_calls"][0]["id"] == first.call.id
    assert messages[2] == {"role": "tool", "tool_call_id": first.call.id, "content": first.result.text}
    assert messages[-1] == {"role": "assistant", "content": turns[-1].text}


@pytest.mark.model
def test_the_turn_after_a_call_shows_the_call_as_the_model_wrote_it(shared_engine, manager, test_server):
    """The call goes back into the prompt as the model wrote it, not as json.dumps writes it
    again (the grammar lets the model choose its spacing: `{ "name": "add", ... }`), so the
    follow-up's prompt holds the text the model's KV was computed for."""
    toolbox = _adder(manager, test_server)
    messages = [{"role": "user", "content": "What is 4 plus 9? Use the add tool."}]
    loop = ToolLoop(shared_engine, toolbox, messages, SAMPLING, choice="required", max_rounds=2)
    call, answer = [e for e in loop.run() if isinstance(e, TurnDone)]
    assert call.calls and call.written.strip().startswith("{") and call.text == ""
    assert messages[1]["written"] == call.written and loop.prompt()[-3]["content"] == call.written
    first, follow_up = call.last.stats, answer.last.stats
    assert first is not None and follow_up is not None
    assert follow_up.cached_tokens >= first.prompt_tokens  # its prompt at least; the call too where it tokenizes alike


@pytest.mark.model
def test_a_denied_call_goes_back_to_the_model_as_its_result(shared_engine, manager, test_server):
    toolbox = _adder(manager, test_server)
    engine = Recording(shared_engine)
    messages = [{"role": "user", "content": "Add 2 and 3 with the add tool."}]
    loop = ToolLoop(engine, toolbox, messages, SAMPLING, choice="required", max_rounds=2,
                    approve=lambda call, tool: Approval.DENY)
    events = list(loop.run())
    finished = [e for e in events if isinstance(e, CallFinished)]
    assert finished and all(e.denied and e.result.text == DENIED and e.result.duration_s == 0 for e in finished)
    assert messages[2]["content"] == DENIED
    assert DENIED in engine.sent[1].messages[-1]["content"]
    assert isinstance(events[-1], TurnDone) and events[-1].calls == ()  # the last round answers in text


@pytest.mark.model
def test_always_asks_once_per_tool_and_none_offers_no_tools(shared_engine, manager, test_server):
    toolbox = _adder(manager, test_server)
    engine = Recording(shared_engine)
    asked = []
    loop = ToolLoop(engine, toolbox, [{"role": "user", "content": "Add 1 and 2, then 3 and 4, with add."}],
                    SAMPLING, choice="required", max_rounds=2,
                    approve=lambda call, tool: asked.append(call.id) or Approval.ALWAYS)
    calls = [e for e in loop.run() if isinstance(e, CallFinished)]
    assert calls and len(asked) == 1 and loop.allowed == {"add"}

    plain = Recording(shared_engine)
    events = list(ToolLoop(plain, toolbox, [{"role": "user", "content": "Hi"}], SAMPLING, choice="none").run())
    assert not any(isinstance(e, CallStarted) for e in events)
    assert "add" not in json.dumps(plain.sent[0].messages) and plain.sent[0].sampling.grammar is None


@pytest.mark.model
def test_a_required_call_the_grammar_cannot_hold_is_asked_for_not_forced(shared_engine, manager, test_server):
    manager.start(test_server).result(30)
    toolbox = Toolbox(manager, [t for t in manager.tools() if t.name == "wait"])
    engine = Recording(shared_engine)
    events = list(ToolLoop(engine, toolbox, [{"role": "user", "content": "Wait 2 seconds."}], SAMPLING,
                           choice="required", max_rounds=1).run())
    assert isinstance(events[0], Notice) and "'not'" in events[0].text
    assert engine.sent[0].sampling.grammar is None and '"wait"' in engine.sent[0].messages[0]["content"]
    assert isinstance(events[-1], TurnDone)


def test_one_tool_the_grammar_cannot_hold_leaves_the_others_forced():
    """The test server's wait tool (a `not` in its schema) unforced every tool of its server, so a
    required call to its add tool came back as text (CI, 2026-12-02)."""
    from app.tools.agent import forced_grammar
    from app.tools.types import Tool, ToolUse

    add = Tool("add", "Add two numbers", {"type": "object", "properties": {"a": {"type": "integer"},
                                                                            "b": {"type": "integer"}},
                                           "required": ["a", "b"]})
    wait = Tool("wait", "Wait", {"type": "object", "properties": {"seconds": {"type": "number", "not": {"const": 0}}},
                                 "required": ["seconds"]})
    grammar, note = forced_grammar(ToolUse((add, wait)))
    assert grammar is not None and "add" in grammar and "wait" not in grammar
    assert note is not None and "1 of 2 tools" in note and "'not'" in note
    none_forced, why = forced_grammar(ToolUse((wait,)))
    assert none_forced is None and why is not None and "not forced" in why
    whole, nothing = forced_grammar(ToolUse((add,)))
    assert whole is not None and nothing is None
