"""`chorus bench-grammar`: whether grammar-constrained rows slow the others (issue 24).

N chats under a shared, pinned system prompt, greedy, exactly T tokens each, run three ways
in alternation for several rounds on one engine: all plain; the first G with a grammar (the
rest plain); the plain ones alone. The figure is each plain chat's own decode rate
(RequestStats.decode_tok_s, after its first token), averaged over the plain chats: mixed
against all plain (the same batch size) and against alone (a smaller batch, so faster).

The grammar never lets the reply end (its closing string is one a model does not write
greedily), so every row runs to T tokens and the batch stays whole; its rows are masked
per step like any grammar's, then sampled with the plain rows.
"""

from __future__ import annotations

import json
import statistics
from typing import Any

from app.bench.engine import EngineBenchOptions, sized_settings
from app.bench.workload import Workload, build_workload
from inference import ChatRequest, Engine, LoadSettings, SamplingParams, gbnf_grammar

ENDLESS_GBNF = r'root ::= [^~]+ "~~~~~~~~~~~~~~~~"'
MODES = ("all_plain", "mixed", "plain_alone")


def run_grammar_bench(settings: LoadSettings, chats: int, grammar_chats: int, max_tokens: int,
                      system_tokens: int, rounds: int) -> dict[str, Any]:
    options = EngineBenchOptions(chats=chats, system_tokens=system_tokens, max_tokens=max_tokens)
    settings = sized_settings(options, settings)
    engine = Engine.start(settings)
    try:
        work = build_workload(engine, chats, system_tokens, max_tokens)
        engine.pin_system_prompt(work.system_prompt).result(timeout=600)
        _run(engine, work, "mixed", grammar_chats)  # untimed: the first batch after loading runs slow
        runs: dict[str, list[dict[str, float]]] = {mode: [] for mode in MODES}
        for _ in range(rounds):
            for mode in MODES:
                runs[mode].append(_run(engine, work, mode, grammar_chats))
    finally:
        engine.shutdown()
    plain = {mode: statistics.median(r["plain_tok_s"] for r in runs[mode]) for mode in MODES}
    return {
        "config": {"model": settings.model_path.name, "chats": chats, "grammar_chats": grammar_chats,
                   "max_tokens": max_tokens, "system_tokens": system_tokens, "rounds": rounds,
                   "threads": settings.threads(), "grammar": ENDLESS_GBNF},
        "runs": runs,
        "plain_tok_s_median": plain,
        "grammar_tok_s_median": statistics.median(r["grammar_tok_s"] for r in runs["mixed"]),
        "ratio": {"mixed_vs_all_plain": plain["mixed"] / plain["all_plain"],
                  "mixed_vs_plain_alone": plain["mixed"] / plain["plain_alone"]},
    }


def _run(engine: Engine, work: Workload, mode: str, grammar_chats: int) -> dict[str, float]:
    """One batch: each chat's decode rate, the plain ones' mean apart from the grammar ones'."""
    plain = SamplingParams.greedy(work.max_tokens, ignore_eos=True)
    # a grammar decides the end itself
    constrained = SamplingParams.greedy(work.max_tokens, grammar=gbnf_grammar(ENDLESS_GBNF))
    kinds = [mode == "mixed" and i < grammar_chats for i in range(len(work.prompts))]
    if mode == "plain_alone":
        chosen = [(p, False) for i, p in enumerate(work.prompts) if i >= grammar_chats]
    else:
        chosen = list(zip(work.prompts, kinds))
    handles = [engine.submit(ChatRequest(prompt_tokens=tuple(p), sampling=constrained if g else plain))
               for p, g in chosen]
    results = [h.result(timeout=1800) for h in handles]
    for r in results:
        if r.error or r.stats is None or r.stats.generated_tokens != work.max_tokens:
            raise RuntimeError(f"a chat did not produce {work.max_tokens} tokens: {r}")
    rates = [(g, r.stats.decode_tok_s or 0.0) for (_, g), r in zip(chosen, results) if r.stats is not None]
    grammar = [v for g, v in rates if g]
    return {"plain_tok_s": statistics.mean(v for g, v in rates if not g),
            "grammar_tok_s": statistics.mean(grammar) if grammar else 0.0}


def render(report: dict[str, Any], as_json: bool) -> str:
    if as_json:
        return json.dumps(report, indent=2)
    c, p, r = report["config"], report["plain_tok_s_median"], report["ratio"]
    lines = [f"{c['chats']} chats, {c['grammar_chats']} with a grammar, {c['max_tokens']} tokens each, "
             f"median of {c['rounds']} rounds (each plain chat's decode tok/s):",
             f"  all plain      {p['all_plain']:8.1f}",
             f"  mixed          {p['mixed']:8.1f}   (grammar rows {report['grammar_tok_s_median']:.1f})",
             f"  plain alone    {p['plain_alone']:8.1f}",
             f"  mixed / all plain {r['mixed_vs_all_plain']:.3f}, mixed / plain alone {r['mixed_vs_plain_alone']:.3f}"]
    return "\n".join(lines)
