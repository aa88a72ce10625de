"""`chorus bench-agents` (app/bench/agents.py): the follow-up arithmetic on recorded turns,
and one small run on the real model with its real local MCP tool server (every agent must
call the tool each round, or the run raises)."""

from __future__ import annotations

import pytest

from app.bench import agents
from app.bench.agents import Turn, _follow_ups
from inference import LoadSettings, RequestStats


def _stats(prompt: int, cached: int, generated: int) -> RequestStats:
    return RequestStats(prompt_tokens=prompt, cached_tokens=cached, generated_tokens=generated, queue_s=0.0,
                        ttft_s=0.1, decode_tok_s=50.0, itl_p50_s=None, itl_p95_s=None, total_s=1.0)


def test_a_follow_up_is_measured_against_what_its_chat_grew_by():
    turns = [  # agent 0: a call of 20 tokens, then its follow-up; agent 1 recomputes its call
        Turn(0, False, _stats(164, 0, 20)), Turn(0, True, _stats(250, 184, 31)),
        Turn(1, True, _stats(252, 164, 30)), Turn(1, False, _stats(166, 160, 20)),
    ]
    figures = _follow_ups(turns)
    assert figures["follow_up_turns"] == 2
    assert figures["follow_up_computed_mean"] == (66 + 88) / 2  # 250 - 184, 252 - 164
    assert figures["follow_up_new_tokens_mean"] == (66 + 66) / 2  # 250 - 164 - 20, 252 - 166 - 20
    assert figures["follow_up_computed_vs_new"] == pytest.approx(154 / 132)
    assert figures["cached_tokens"] == 184 + 164 + 160


@pytest.mark.model
def test_the_agents_bench_runs_every_round_on_the_real_model(model_path):
    options = agents.AgentBenchOptions(agents=2, rounds=2, tool_seconds=0.1, max_tokens=24, tools=3)
    report = agents.run_agents_bench(options, LoadSettings(model_path=model_path))
    first = report["first_turns"]  # cold, at once: the three tools' list computed once
    assert first["chats"] == 2 and first["shared_tokens"] > 200
    assert first["computed_tokens"] <= first["computed_if_shared_once"]
    assert "first turns at once, cold: 2 prompts" in agents.render(report, as_json=False)
    run = report["agents"]
    assert run["turns"] == 2 * 2 * 2 and run["follow_up_turns"] == 2 * 2
    assert run["cached_tokens"] > run["prompt_tokens"] / 2  # each turn found its chat's earlier turns
    assert report["plain_before"]["decode_tok_s"] > 0 and run["decode_tok_s"] > 0
    assert "follow-up turns: 4" in agents.render(report, as_json=False)
    paced = report["plain_paced"]  # the same turns and pauses without tools: as many tokens
    expected = 2 * 2 * (round(run["call_tokens_mean"]) + round(run["answer_tokens_mean"]))
    assert paced["generated_tokens"] == expected and paced["decode_tok_s"] > 0
    assert report["ratio"]["decode_agents_vs_plain_paced"] == pytest.approx(run["decode_tok_s"] / paced["decode_tok_s"])
