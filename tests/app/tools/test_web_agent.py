"""A forced call of the built-in fetch on the real model: the tool loop runs it on the
stand-in web and its Markdown reaches the next turn's prompt."""

from __future__ import annotations

import pytest

from app.tools import Approval, CallFinished, Toolbox, ToolLoop, TurnDone
from app.tools.web import BUILT_IN, FETCH, WebSettings, WebTools
from inference import SamplingParams
from tests.support.web_stand_in import stand_in_web


class Recording:
    """The real engine, with the chats it was sent kept."""

    def __init__(self, engine) -> None:
        self.engine, self.sent = engine, []

    def __getattr__(self, name):
        return getattr(self.engine, name)

    def stream(self, chat, on_delta):
        self.sent.append(chat)
        return self.engine.stream(chat, on_delta)


@pytest.mark.model
def test_a_forced_fetch_runs_on_the_stand_in_and_its_page_reaches_the_next_turn(shared_engine, manager):
    with stand_in_web() as base:
        toolbox = Toolbox(manager, (), web=WebTools(WebSettings(allow_private=True, timeout_s=10), (FETCH,)))
        engine = Recording(shared_engine)
        url = f"{base}/page"
        messages = [{"role": "user", "content": f"What is the heading of the page at {url} ?"}]
        approved = []
        # 160 tokens: the stand-in's port changes the prompt every run, and with it the URL the
        # model writes (the URL's pattern bounds its shape, not its length)
        loop = ToolLoop(engine, toolbox, messages, SamplingParams(max_tokens=160, temperature=0.0),
                        choice="required", max_rounds=2,
                        approve=lambda call, tool: approved.append(tool) or Approval.ONCE)
        events = list(loop.run())

    forced = [e for e in events if isinstance(e, TurnDone)][0]
    assert forced.calls, f"the forced turn ended {forced.last.finish_reason}: {forced.written or forced.text!r}"
    [first, *_] = [e for e in events if isinstance(e, CallFinished)]
    assert first.call.name == FETCH and first.tool.server == BUILT_IN and approved[0].server == BUILT_IN
    # The model wrote the URL (the grammar forces the shape, not the value): when it copied
    # it right the page came back; either way the result went into the next prompt.
    if url in first.call.arguments:
        assert "# Hello web" in first.result.text and not first.result.is_error
    assert engine.sent[0].sampling.grammar is not None
    assert any(first.result.text in str(m.get("content")) for m in engine.sent[1].messages)
    assert [e for e in events if isinstance(e, TurnDone)][-1].calls == ()
