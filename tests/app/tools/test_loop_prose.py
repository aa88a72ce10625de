"""A Hermes-style reply (Qwen's) with prose before its <tool_call>: the loop's machine
(app/tools/machine.py) shows the prose as it comes and never any of the call, fed one
character at a time; the turn ends with both the prose and the calls. A malformed block
makes the whole reply text, shown whole. And the blocking driver (agent.ToolLoop) and the
terminal's reply (chat_tools) on a scripted engine. No model."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from app.tools.agent import ToolLoop
from app.tools.formats import HermesFormat
from app.tools.machine import CallStarted, StartTurn, TextDelta, ToolLoopMachine, TurnDone, always_allow
from app.tools.mcp_results import McpTool, ToolResult
from app.tools.rounds import ToolRound
from app.tools.types import Tool
from inference import Delta, FinishReason, SamplingParams
from tests.app.tools.test_loop_machine import Scripted

EMPTY = {"type": "object", "properties": {}}
TIME = McpTool("clock", "get_time", "The time now", EMPTY)
BLOCK = '<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>'
PROSE = "Let me look that up."
REPLY = f"{PROSE}\n{BLOCK}"


def _machine(messages: list[dict] | None = None) -> ToolLoopMachine:
    first = ToolRound.offer({"get_time": TIME}, [Tool("get_time", TIME.description, EMPTY)],
                            tool_format=HermesFormat())
    assert first is not None
    return ToolLoopMachine(first, messages=messages)


def _by_char(machine: ToolLoopMachine, text: str) -> tuple[list[str], list]:
    """text fed one character a delta, then ended: what each feed showed, and every event."""
    assert machine.steps() == [StartTurn(machine.round)]
    events, shown = machine.begin_turn(), []
    for char in text:
        fed = machine.feed(Delta("r", text=char, token_ids=(1,)))
        shown += [e.text for e in fed if isinstance(e, TextDelta)]
        events += fed
    return shown, events + machine.feed(Delta.finished_with("r", FinishReason.STOP))


def test_the_prose_before_a_call_streams_and_the_call_never_shows():
    messages: list[dict] = []
    machine = _machine(messages)
    shown, events = _by_char(machine, REPLY)
    assert not any("<" in piece for piece in shown), "no piece of the tag is shown, to be taken back"
    assert "".join(shown) == PROSE + "\n"
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == PROSE + "\n"
    [turn] = [e for e in events if isinstance(e, TurnDone)]
    assert turn.text == PROSE and [c.name for c in turn.calls] == ["get_time"] and turn.written == REPLY
    assert isinstance(events[-1], CallStarted)
    assert messages == [{"role": "assistant", "content": PROSE, "written": REPLY,
                         "tool_calls": [turn.calls[0].openai()]}]


def test_a_partial_tag_is_held_until_it_turns_out_to_be_text():
    machine = _machine()
    machine.begin_turn()
    assert machine.feed(Delta("r", text="Use the ")) == [TextDelta("Use the ")]
    assert machine.feed(Delta("r", text="<tool_")) == [] and machine.holding
    assert machine.feed(Delta("r", text="x> tag.")) == [TextDelta("<tool_x> tag.")] and not machine.holding
    assert machine.shown == len("Use the <tool_x> tag.")


def test_a_malformed_block_after_prose_is_text_shown_whole_at_the_end():
    broken = f'{PROSE}\n<tool_call>\n{{"name": "get_time", "arguments": {{}}\n</tool_call>'  # a brace short
    machine = _machine()
    shown, events = _by_char(machine, broken)
    assert "".join(shown) == PROSE + "\n"
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == broken
    [turn] = [e for e in events if isinstance(e, TurnDone)]
    assert (turn.text, turn.calls) == (broken, ())
    assert machine.messages[-1] == {"role": "assistant", "content": broken}


class Clock:
    by_name = {"get_time": TIME}

    def __bool__(self) -> bool:
        return True

    def specs(self) -> tuple[Tool, ...]:
        return (Tool("get_time", TIME.description, EMPTY),)

    def call(self, name: str, arguments: dict) -> ToolResult:
        return ToolResult("12:00")


def test_the_driver_yields_the_prose_then_the_call_and_the_next_prompt_has_both():
    engine = Scripted(REPLY, "It is noon.")
    messages = [{"role": "user", "content": "Time?"}]
    loop = ToolLoop(engine, Clock(), messages, SamplingParams.greedy(16), tool_format=HermesFormat())
    events = list(loop.run())
    first = next(i for i, e in enumerate(events) if isinstance(e, TurnDone))
    assert "".join(e.text for e in events[:first] if isinstance(e, TextDelta)) == PROSE + "\n"
    assert events[first].text == PROSE and isinstance(events[first + 1], CallStarted)
    call = engine.sent[1].messages[-2]  # the template's messages: the prose and the call, OpenAI's shape
    assert call["content"] == PROSE and call["tool_calls"][0]["function"]["name"] == "get_time"


QWEN = (Path(__file__).parents[2] / "fixtures" / "chat_templates" / "Qwen-Qwen2.5-7B-Instruct.jinja").read_text()


class QwenScripted(Scripted):
    info = SimpleNamespace(chat_template=QWEN)  # format_of_engine: Hermes


def test_the_terminal_prints_the_prose_then_the_call_and_stores_both(repo, capsys):
    """`chorus chat --mcp`'s reply (chat_tools.TerminalTools): the prose, the call's line under
    it, the answer; the turn stored as the prose with its call."""
    from app.cli.chat_tools import TerminalTools
    from app.conversations import ConversationSession

    tools = TerminalTools.__new__(TerminalTools)  # its servers stood in for by the Clock toolbox
    tools.toolbox, tools.choice, tools.max_rounds, tools.approve = Clock(), "auto", 5, always_allow
    conv = repo.create_conversation(title="Time")
    session = ConversationSession(repo, conv.id, lambda c: "qwen")
    repo.add_message(conv.id, "user", "Time?")
    messages = [{"role": "user", "content": "Time?"}]
    added = tools.reply(QwenScripted(f"{PROSE} {BLOCK}", "It is noon."), session, messages,
                        SamplingParams.greedy(16), lambda write, _what: write(), lambda _last: None)
    assert added is not None
    out = capsys.readouterr().out
    assert out.startswith(f"bot> {PROSE} \n[tool] get_time({{}})\n[get_time, "), out
    assert "<tool" not in out and out.endswith("bot> It is noon.")
    stored = session.active_path().messages
    assert [(m.role, m.content) for m in stored[1:3]] == [("assistant", PROSE), ("tool", "12:00")]
    assert [c.name for c in stored[1].tool_calls] == ["get_time"]
