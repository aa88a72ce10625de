"""`chorus bench-agents`: N agent chats on one engine, each calling a tool that takes a while
(issue 24). Each agent runs the product's own tool loop (app/tools/agent.py) against a local
MCP server (agent_tool.py, a child process over stdio) for several rounds: a user question,
a forced call, the tool's answer after its delay, the model's text answer; then the next
question in the same chat.

What it measures:
- the follow-up turns (the model's turn after a tool result): the prompt tokens computed
  against the tokens the chat grew by since its previous turn ended (the call the model
  wrote is already in its KV; the result and the turn markers are new), so 1.0x means the
  turn computed only what is new;
- the engine's decode rate in decode-only steps while the agents run, against N plain chats
  that write as many tokens at once with the same prompts (before and after the agents, so
  a drift of the machine shows), and the tokens generated per step (the mean batch) of each;
  agents waiting on their tool leave the batch, so the batch is smaller than N: the same
  plain chats at the agents' mean batch size are the reference for the steps' own speed;
- the same against N paced plain chats: conversations of the agents' shape (per round a
  turn as long as their calls, a pause as long as the tool, a message as long as its
  result, a turn as long as their answers) without tools, grammars or MCP. They leave the
  batch while they pause just as the agents do, so the ratio is what the tools cost.
"""

from __future__ import annotations

import json
import statistics
import sys
import threading
import time
from dataclasses import dataclass, replace
from typing import Any

from app.bench.first_turns import first_turns_at_once
from app.tools import McpManager, ServerStatus, StdioServer, Toolbox, ToolLoop, TurnDone
from inference import ChatRequest, Engine, LoadSettings, RequestStats, SamplingParams

CITIES = ("Oslo", "Lima", "Cairo", "Hanoi", "Quito", "Perth", "Dakar", "Riga", "Porto", "Seoul", "Tunis", "Bern",
          "Accra", "Kyiv", "Doha", "Rome")


# The KV a tool of the bench's server takes in the prompt (SmolLM2's vocabulary: 40 tools,
# some 5,300 tokens), with room to spare for another vocabulary.
TOKENS_PER_TOOL = 200


@dataclass(frozen=True)
class AgentBenchOptions:
    agents: int = 8
    rounds: int = 3  # questions per agent, each a call and an answer
    tool_seconds: float = 0.5
    max_tokens: int = 48  # of each model turn
    tools: int = 1  # the tool server offers the weather tool and tools - 1 others (a long tool list)


@dataclass(frozen=True)
class Turn:
    agent: int
    follow_up: bool  # the turn after a tool result
    stats: RequestStats


def run_agents_bench(options: AgentBenchOptions, settings: LoadSettings) -> dict[str, Any]:
    # Each chat's turns, and the tool list once: the chats share its KV cells.
    n_ctx = max(4096, options.agents * (512 + options.rounds * 2 * (options.max_tokens + 96))
                + options.tools * TOKENS_PER_TOOL)
    settings = replace(settings, n_ctx=n_ctx, n_seq_max=options.agents + 2, n_batch=max(512, options.agents + 2))
    manager = McpManager()
    engine: Engine | None = None
    try:
        state, = manager.start_all([StdioServer("bench", sys.executable,
                                                ("-m", "app.bench.agent_tool", str(options.tool_seconds),
                                                 str(options.tools)))])
        if state.status is not ServerStatus.READY:
            raise RuntimeError(f"the bench's tool server did not start: {state.summary()}\n{state.stderr_tail}")
        toolbox = Toolbox(manager, timeout_s=options.tool_seconds + 30)
        engine = Engine.start(settings)
        first_prompts = [_first_prompt(engine, toolbox, i, options) for i in range(options.agents)]
        first_turns = first_turns_at_once(engine, first_prompts)  # cold: the tool list computed how often
        _plain(engine, first_prompts, options.max_tokens)  # untimed: the first batch after loading runs slow
        before = _plain(engine, first_prompts, options.max_tokens)
        agents = _agents(engine, toolbox, options)
        paced = _paced_plain(engine, _tools_system(engine, toolbox, options), options,
                             agents["call_tokens_mean"], agents["answer_tokens_mean"])
        after = _plain(engine, first_prompts, options.max_tokens)
        same = _plain(engine, first_prompts[:max(1, round(agents["tokens_per_step"]))], options.max_tokens)
    finally:
        if engine is not None:
            engine.shutdown()
        manager.shutdown()
    return {**_report(options, settings, before, agents, after, same, paced), "first_turns": first_turns}


def _question(agent: int, round_: int) -> str:
    city = CITIES[(agent + round_ * 5) % len(CITIES)]
    return f"What is the weather in {city} now? Use the weather tool." if round_ == 0 else f"And in {city}?"


def _loop(engine: Engine, toolbox: Toolbox, messages: list[dict], options: AgentBenchOptions) -> ToolLoop:
    # max_rounds 2: the forced call, then the answer (the last round offers no call).
    return ToolLoop(engine, toolbox, messages, SamplingParams.greedy(options.max_tokens), choice="required",
                    max_rounds=2)


def _first_prompt(engine: Engine, toolbox: Toolbox, agent: int, options: AgentBenchOptions) -> list[int]:
    messages = [{"role": "user", "content": _question(agent, 0)}]
    return engine.inputs.chat_tokens(_loop(engine, toolbox, messages, options).prompt())


def _plain(engine: Engine, prompts: list[list[int]], max_tokens: int) -> dict[str, float]:
    """N plain chats at once, exactly max_tokens each: the engine's decode-only rate."""
    engine.reset_metrics()
    sampling = SamplingParams.greedy(max_tokens, ignore_eos=True)
    handles = [engine.submit(ChatRequest(prompt_tokens=tuple(p), sampling=sampling)) for p in prompts]
    for handle in handles:
        result = handle.result(timeout=1800)
        if result.error:
            raise RuntimeError(f"a plain chat failed: {result.error}")
    return _decode_figures(engine)


def _agents(engine: Engine, toolbox: Toolbox, options: AgentBenchOptions) -> dict[str, Any]:
    turns: list[Turn] = []
    errors: list[str] = []
    lock = threading.Lock()

    def agent(i: int) -> None:
        messages: list[dict] = []
        try:
            for round_ in range(options.rounds):
                messages.append({"role": "user", "content": _question(i, round_)})
                for event in _loop(engine, toolbox, messages, options).run():
                    if isinstance(event, TurnDone) and event.last.stats is not None:
                        with lock:
                            turns.append(Turn(i, follow_up=not event.calls, stats=event.last.stats))
            calls = sum(1 for m in messages if m.get("role") == "tool")
            if calls != options.rounds:
                raise RuntimeError(f"agent {i} made {calls} tool calls in {options.rounds} rounds (a forced call "
                                   f"longer than --max-tokens {options.max_tokens} is cut, and no call)")
        except Exception as exc:  # reported after the others end, not lost in a thread
            with lock:
                errors.append(f"agent {i}: {exc}")

    engine.reset_metrics()
    t0 = time.perf_counter()
    threads = [threading.Thread(target=agent, args=(i,), name=f"agent-{i}") for i in range(options.agents)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - t0
    if errors:
        raise RuntimeError("; ".join(errors))
    calls = [t.stats.generated_tokens for t in turns if not t.follow_up]
    answers = [t.stats.generated_tokens for t in turns if t.follow_up]
    return {"wall_s": wall, **_decode_figures(engine), **_follow_ups(turns),
            "call_tokens_mean": statistics.mean(calls) if calls else 0.0,
            "answer_tokens_mean": statistics.mean(answers) if answers else 0.0}


# What the paced chats read where the agents read their tool's answer: the same text as
# agent_tool.py's, as a user message (no tool, no call to answer).
TOOL_LIKE_RESULT = "{city}: 14 degrees Celsius, light rain, wind 12 km/h from the west, humidity 81 percent."


def _tools_system(engine: Engine, toolbox: Toolbox, options: AgentBenchOptions) -> list[dict]:
    """The system messages the agents' prompts begin with (the tools, in the generic format):
    the paced chats begin with them too, so their KV is as long."""
    prompt = _loop(engine, toolbox, [{"role": "user", "content": _question(0, 0)}], options).prompt()
    return [m for m in prompt if m.get("role") == "system"]


def _paced_plain(engine: Engine, system: list[dict], options: AgentBenchOptions, call_tokens: float,
                 answer_tokens: float) -> dict[str, float]:
    """N plain chats of the agents' shape, at once: after the agents' system messages, per
    round a turn of call_tokens, a pause of the tool's seconds, the tool's text as a message,
    a turn of answer_tokens (exactly those counts, greedy), then the next question. The
    engine's decode figures over them."""
    first = SamplingParams.greedy(max(1, round(call_tokens)), ignore_eos=True)
    second = SamplingParams.greedy(max(1, round(answer_tokens)), ignore_eos=True)
    errors: list[str] = []

    def chat(i: int) -> None:
        messages: list[dict] = list(system)
        for round_ in range(options.rounds):
            city = CITIES[(i + round_ * 5) % len(CITIES)]
            messages.append({"role": "user", "content": _question(i, round_)})
            for sampling, after in ((first, TOOL_LIKE_RESULT.format(city=city)), (second, None)):
                result = engine.submit(ChatRequest(messages=tuple(messages), sampling=sampling)).result(timeout=1800)
                if result.error:
                    errors.append(f"paced chat {i}: {result.error}")
                    return
                messages.append({"role": "assistant", "content": result.text})
                if after is not None:
                    time.sleep(options.tool_seconds)  # where the agent waits on its tool
                    messages.append({"role": "user", "content": after})

    engine.reset_metrics()
    threads = [threading.Thread(target=chat, args=(i,), name=f"paced-{i}") for i in range(options.agents)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise RuntimeError("; ".join(errors))
    return _decode_figures(engine)


def _follow_ups(turns: list[Turn]) -> dict[str, Any]:
    """Each follow-up turn's computed prompt tokens against what its chat grew by since the
    turn before it (that turn's prompt and the tokens it generated are in the KV)."""
    computed, grown = [], []
    by_agent: dict[int, list[Turn]] = {}
    for turn in sorted(turns, key=lambda t: (t.agent, t.stats.prompt_tokens)):
        previous = by_agent.setdefault(turn.agent, [])[-1:] or None
        by_agent[turn.agent].append(turn)
        if turn.follow_up and previous:
            before = previous[0].stats
            computed.append(turn.stats.prompt_tokens - turn.stats.cached_tokens)
            grown.append(turn.stats.prompt_tokens - before.prompt_tokens - before.generated_tokens)
    prompt = sum(t.stats.prompt_tokens for t in turns)
    cached = sum(t.stats.cached_tokens for t in turns)
    return {
        "turns": len(turns),
        "follow_up_turns": len(computed),
        "follow_up_computed_mean": statistics.mean(computed) if computed else 0.0,
        "follow_up_new_tokens_mean": statistics.mean(grown) if grown else 0.0,
        "follow_up_computed_vs_new": sum(computed) / sum(grown) if grown and sum(grown) else float("nan"),
        "prompt_tokens": prompt,
        "cached_tokens": cached,
    }


def _decode_figures(engine: Engine) -> dict[str, float]:
    m = engine.metrics(fresh=True)
    return {"decode_tok_s": m.decode_only_tokens / m.decode_only_s if m.decode_only_s else 0.0,
            "tokens_per_step": m.generated_tokens / m.steps if m.steps else 0.0,  # the mean batch
            "prompt_tokens_computed": m.prompt_tokens_computed,
            "generated_tokens": m.generated_tokens}


def _report(options: AgentBenchOptions, settings: LoadSettings, before: dict[str, float],
            agents: dict[str, Any], after: dict[str, float], same: dict[str, float],
            paced: dict[str, float]) -> dict[str, Any]:
    plain_rate = statistics.mean([before["decode_tok_s"], after["decode_tok_s"]])
    return {
        "config": {"model": settings.model_path.name, "agents": options.agents, "rounds": options.rounds,
                   "tool_seconds": options.tool_seconds, "max_tokens": options.max_tokens, "tools": options.tools,
                   "threads": settings.threads(), "n_ctx": settings.n_ctx},
        "plain_before": before, "agents": agents, "plain_after": after, "plain_same_batch": same,
        "plain_paced": paced,
        "ratio": {"decode_agents_vs_plain": _ratio(agents["decode_tok_s"], plain_rate),
                  "decode_agents_vs_plain_same_batch": _ratio(agents["decode_tok_s"], same["decode_tok_s"]),
                  "decode_agents_vs_plain_paced": _ratio(agents["decode_tok_s"], paced["decode_tok_s"])},
    }


def _first_turns_line(first: dict[str, Any]) -> str:
    return (f"  first turns at once, cold: {first['chats']} prompts sharing {first['shared_tokens']} tokens "
            f"(the system prompt and tools): computed {first['computed_tokens']} prompt tokens, "
            f"{first['computed_if_shared_once']} if the shared part is computed once "
            f"(computed {first['shared_computed_times']:.2f} times)")


def _ratio(a: float, b: float) -> float:
    return a / b if b else float("nan")


def render(report: dict[str, Any], as_json: bool) -> str:
    if as_json:
        return json.dumps(report, indent=2)
    c, a = report["config"], report["agents"]
    before, after = report["plain_before"], report["plain_after"]
    return "\n".join([
        f"{c['agents']} agents, {c['rounds']} rounds each (a forced call, a {c['tool_seconds']} s tool, an answer), "
        f"{c['max_tokens']} tokens a turn at most, {c['tools']} tools offered; wall {a['wall_s']:.1f} s",
        _first_turns_line(report["first_turns"]),
        f"  follow-up turns: {a['follow_up_turns']}, each computed {a['follow_up_computed_mean']:.1f} prompt tokens "
        f"for {a['follow_up_new_tokens_mean']:.1f} new ({a['follow_up_computed_vs_new']:.2f}x)",
        f"  prompt tokens {a['prompt_tokens']}, found cached {a['cached_tokens']}",
        f"  decode-only tok/s: agents {a['decode_tok_s']:.1f} ({a['tokens_per_step']:.1f} a step), "
        f"plain before {before['decode_tok_s']:.1f} ({before['tokens_per_step']:.1f}), "
        f"after {after['decode_tok_s']:.1f} ({after['tokens_per_step']:.1f})",
        f"  plain at the agents' batch ({report['plain_same_batch']['tokens_per_step']:.1f} a step): "
        f"{report['plain_same_batch']['decode_tok_s']:.1f}",
        f"  paced plain chats (the agents' turns and pauses, no tools): {report['plain_paced']['decode_tok_s']:.1f} "
        f"({report['plain_paced']['tokens_per_step']:.1f} a step)",
        f"  agents / plain {report['ratio']['decode_agents_vs_plain']:.3f}, "
        f"agents / plain at their batch {report['ratio']['decode_agents_vs_plain_same_batch']:.3f}, "
        f"agents / paced plain {report['ratio']['decode_agents_vs_plain_paced']:.3f}",
    ])
