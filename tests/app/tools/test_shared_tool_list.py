"""A long tool list shared by chats asking at once is computed once (issue 38): the engine
gives the prompt part they share to every chat and computes only each one's question. The
tools come from a real MCP server (app/bench/agent_tool.py, a child process over stdio) with
8 tools, about 1,100 tokens of the prompt; `chorus bench-agents --tools 40` counts the same
for a 40-tool server and 8 chats (docs/benchmarks.md)."""

from __future__ import annotations

import sys

import pytest

from app.bench.agents import CITIES
from app.bench.first_turns import first_turns_at_once, shared_prefix_length
from app.tools import McpManager, ServerStatus, StdioServer, Toolbox, ToolLoop
from inference import SamplingParams
from inference.sched.scheduler import MIN_SHARED_WAIT

pytestmark = pytest.mark.model

TOOLS, CHATS = 8, 6


@pytest.fixture
def toolbox():
    manager = McpManager()
    try:
        state, = manager.start_all([StdioServer("bench", sys.executable,
                                                ("-m", "app.bench.agent_tool", "0", str(TOOLS)))])
        assert state.status is ServerStatus.READY, state.summary()
        yield Toolbox(manager)
    finally:
        manager.shutdown()


def test_chats_asking_at_once_compute_their_shared_tool_list_once(shared_engine, toolbox):
    assert len(toolbox.specs()) == TOOLS
    prompts = []
    for city in CITIES[:CHATS]:
        messages = [{"role": "user", "content": f"Is it raining in {city}? Use a tool if you need one."}]
        loop = ToolLoop(shared_engine, toolbox, messages, SamplingParams.greedy(8))
        prompts.append(shared_engine.inputs.chat_tokens(loop.prompt()))
    shared = shared_prefix_length(prompts)
    assert shared > 800 and all(len(p) - shared < 40 for p in prompts)  # the tool list is most of each prompt

    counted = first_turns_at_once(shared_engine, prompts)

    # once: the shared part (at most: an earlier test may have left its first tokens cached)
    # and each chat's own question. A chat admitted when fewer than MIN_SHARED_WAIT of the
    # shared tokens are left to compute computes those itself rather than wait a step (the
    # step budget adapts to timing, so where the first prompt's chunks end varies by run).
    slack = (CHATS - 1) * (MIN_SHARED_WAIT - 1)
    assert counted["computed_tokens"] <= counted["computed_if_shared_once"] + slack
    assert counted["shared_computed_times"] <= 1.0 + slack / counted["shared_tokens"]
