"""`chorus bench-schemas`: JSONSchemaBench-style coverage of structured output (issue 38).

A sample of real-world schemas (a folder of folders of .json schemas, one folder a set, as
JSONSchemaBench's data/ holds them: `guidance-ai/jsonschemabench`, not part of this
repository) is asked for, one schema a request: the schema in the prompt, greedy, at most
max_tokens, output constrained by the schema's grammar. A schema is *covered* when its
grammar is accepted and the output validates (jsonschema, formats checked). Per set: covered,
closed (valid, but ended by max_tokens: Chorus steers a JSON reply to close in the last
tokens of its budget; counted in the coverage, and said apart), refused, ran out of tokens
(cut, not valid), invalid. Also each grammar's check and compile time (p50/p95) and
the decode rate of the constrained requests against the same prompts without a grammar. With
`peer`, the same requests to a llama.cpp `llama-server` (its own converter) in the same run.
"""

from __future__ import annotations

import json
import random
import statistics
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import httpx

from inference import (
    ChatRequest,
    Completion,
    Engine,
    FinishReason,
    LoadSettings,
    RequestError,
    SamplingParams,
    schema_grammar,
)

SYSTEM = "You answer with one JSON value and nothing else."
OUTCOMES = ("covered", "closed", "refused", "out_of_tokens", "invalid", "error")
VALID = ("covered", "closed")
MAX_SCHEMA_CHARS = 16_000  # longer ones would not fit a prompt beside the answer

# An outcome, and for any but covered what explains it: the refusal, or the answer and why
# it failed validation (the first error), so every miss can be looked at from --json.
Outcome = tuple[str, str | None]
# A validator: None for a value that validates against the schema, else the first error.
Validator = Callable[[Any, dict], str | None]


@dataclass(frozen=True)
class SchemaBenchOptions:
    data: Path  # JSONSchemaBench's data/ folder, or any folder of folders of .json schemas
    sets: tuple[str, ...] = ("Glaiveai2K", "Github_easy", "Github_medium", "Kubernetes", "Snowplow")
    per_set: int = 40
    max_tokens: int = 384
    concurrency: int = 8
    seed: int = 0
    peer: str | None = None  # a llama-server's base URL (http://127.0.0.1:8080)
    # Schemas of each set also asked without a grammar (for the decode rates; None: all).
    # Unconstrained, the small model mostly runs to max_tokens: the costliest part of a run.
    plain_per_set: int | None = None


@dataclass(frozen=True)
class Case:
    set_name: str
    name: str
    schema: dict

    def messages(self) -> tuple[dict, ...]:
        text = json.dumps(self.schema, ensure_ascii=False)
        return ({"role": "system", "content": SYSTEM},
                {"role": "user", "content": f"Write a JSON value that follows this JSON Schema:\n{text}"})


def sample_cases(options: SchemaBenchOptions) -> list[Case]:
    """per_set schemas of each set, the same ones for the same seed: the files sorted by name,
    a seeded sample of those that load as a JSON object and fit a prompt."""
    cases: list[Case] = []
    for set_name in options.sets:
        folder = options.data / set_name
        if not folder.is_dir():
            raise ValueError(f"no schema set {set_name!r} under {options.data}")
        usable = [c for c in (_case(set_name, path) for path in sorted(folder.glob("*.json"))) if c is not None]
        rng = random.Random(f"{options.seed}:{set_name}")
        cases += rng.sample(usable, min(options.per_set, len(usable)))
    return cases


def _case(set_name: str, path: Path) -> Case | None:
    try:
        schema = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(schema, dict) or len(json.dumps(schema)) > MAX_SCHEMA_CHARS:
        return None
    return Case(set_name, path.stem, schema)


def run_schema_bench(options: SchemaBenchOptions, settings: LoadSettings) -> dict[str, Any]:
    validator = _validator()
    cases = sample_cases(options)
    settings = replace(settings, n_seq_max=options.concurrency + 1,
                       n_ctx=max(settings.n_ctx, (MAX_SCHEMA_CHARS // 3 + options.max_tokens) * options.concurrency))
    engine = Engine.start(settings)
    try:
        runs = _run_chorus(engine, cases, options, validator)
        plain = _plain_rates(engine, cases, options)
    finally:
        engine.shutdown()
    chorus = [outcome for outcome, _, _ in runs]
    compile_ms = [ms for _, ms, _ in runs if ms is not None]
    # The decode rates of the schemas asked both ways, so the ratio compares the same prompts.
    paired = [(rate, plain_rate) for (_, _, rate), plain_rate in zip(runs, plain) if rate and plain_rate]
    rates = [rate for rate, _ in paired]
    plain_rates = [plain_rate for _, plain_rate in paired]
    report: dict[str, Any] = {
        "config": {"model": settings.model_path.name, "sets": list(options.sets), "per_set": options.per_set,
                   "max_tokens": options.max_tokens, "concurrency": options.concurrency, "seed": options.seed,
                   "schemas": len(cases), "data": str(options.data), "plain_per_set": options.plain_per_set},
        "chorus": _by_set(cases, chorus),
        "compile_ms": {"p50": _percentile(compile_ms, 50), "p95": _percentile(compile_ms, 95),
                       "max": max(compile_ms, default=0.0)},
        "decode_tok_s": {"grammar": _median(rates), "plain": _median(plain_rates), "schemas": len(paired)},
        "cases": [{"set": c.set_name, "name": c.name, **_result("chorus", outcome), "compile_ms": ms,
                   "tok_s": rate, "plain_tok_s": plain_rate}
                  for c, (outcome, ms, rate), plain_rate in zip(cases, runs, plain)],
    }
    report["decode_tok_s"]["ratio"] = report["decode_tok_s"]["grammar"] / (report["decode_tok_s"]["plain"] or 1)
    if options.peer is not None:
        peer = _run_peer(options.peer, cases, options, validator)
        report["peer"] = _by_set(cases, peer)
        for row, outcome in zip(report["cases"], peer):
            row.update(_result("peer", outcome))
    return report


def _result(side: str, outcome: Outcome) -> dict[str, str]:
    kind, detail = outcome
    return {side: kind} | ({f"{side}_detail": detail} if detail else {})


def _run_chorus(engine: Engine, cases: list[Case], options: SchemaBenchOptions,
                validator: Validator) -> list[tuple[Outcome, float | None, float | None]]:
    """Each case's outcome, grammar check and compile time (ms) and decode rate (tok/s)."""
    engine.compile_grammar(schema_grammar({"type": "object"}))  # llguidance's tokenizer is built once, untimed

    def one(case: Case) -> tuple[Outcome, float | None, float | None]:
        started = time.perf_counter()
        try:
            grammar = schema_grammar(case.schema)
            engine.compile_grammar(grammar)
        except RequestError as exc:
            return ("refused", str(exc)), None, None
        compile_ms = 1000 * (time.perf_counter() - started)
        result = _ask(engine, case, SamplingParams.greedy(options.max_tokens, grammar=grammar))
        rate = result.stats.decode_tok_s if result.stats is not None else None
        return _outcome(result, case.schema, validator), compile_ms, rate

    with ThreadPoolExecutor(options.concurrency) as pool:
        return list(pool.map(one, cases))


def _plain_rates(engine: Engine, cases: list[Case], options: SchemaBenchOptions) -> list[float | None]:
    """The same prompts without a grammar: each request's decode rate (None for the schemas
    past plain_per_set in their set)."""
    asked = {id(case) for set_name in options.sets
             for case in [c for c in cases if c.set_name == set_name][:options.plain_per_set]}

    def one(case: Case) -> float | None:
        if id(case) not in asked:
            return None
        result = _ask(engine, case, SamplingParams.greedy(options.max_tokens))
        return result.stats.decode_tok_s if result.stats is not None else None

    with ThreadPoolExecutor(options.concurrency) as pool:
        return list(pool.map(one, cases))


def _ask(engine: Engine, case: Case, sampling: SamplingParams) -> Completion:
    return engine.submit(ChatRequest(messages=case.messages(), sampling=sampling)).result(1800)


def _outcome(result: Completion, schema: dict, validator: Validator) -> Outcome:
    if result.finish_reason is FinishReason.LENGTH:
        return _ended_by_length(result.text, schema, validator)
    if result.error is not None:
        return "error", str(result.error)
    return _judged(result.text, schema, validator)


def _ended_by_length(text: str, schema: dict, validator: Validator) -> Outcome:
    """A reply max_tokens ended: closed when it is valid all the same, else out of tokens."""
    return ("closed", None) if _judged(text, schema, validator)[0] == "covered" else ("out_of_tokens", text[-200:])


def _judged(text: str, schema: dict, validator: Validator) -> Outcome:
    try:
        value = json.loads(text)
    except ValueError as exc:
        return "invalid", f"not JSON ({exc}): {text[:2000]}"
    error = validator(value, schema)
    return ("covered", None) if error is None else ("invalid", f"{error}: {text[:2000]}")


def _run_peer(base: str, cases: list[Case], options: SchemaBenchOptions,
              validator: Validator) -> list[Outcome]:
    client = httpx.Client(base_url=base.rstrip("/"), timeout=1800)

    def one(case: Case) -> Outcome:
        body = {"messages": list(case.messages()), "temperature": 0, "max_tokens": options.max_tokens,
                "response_format": {"type": "json_schema", "json_schema": {"name": "s", "schema": case.schema}}}
        try:
            reply = client.post("/v1/chat/completions", json=body)
        except httpx.HTTPError as exc:
            return "error", str(exc)
        if reply.status_code in (400, 422):
            return "refused", reply.text[:500]
        if reply.status_code != 200:
            return "error", f"{reply.status_code}: {reply.text[:500]}"
        choice = reply.json()["choices"][0]
        if choice.get("finish_reason") == "length":
            return _ended_by_length(choice["message"].get("content") or "", case.schema, validator)
        return _judged(choice["message"].get("content") or "", case.schema, validator)

    with client, ThreadPoolExecutor(options.concurrency) as pool:
        return list(pool.map(one, cases))


def _by_set(cases: list[Case], outcomes: list[Outcome]) -> dict[str, dict[str, Any]]:
    table: dict[str, dict[str, Any]] = {}
    for case, (outcome, _) in zip(cases, outcomes):
        row = table.setdefault(case.set_name, {k: 0 for k in OUTCOMES} | {"schemas": 0})
        row[outcome] += 1
        row["schemas"] += 1
    total = {k: sum(row[k] for row in table.values()) for k in (*OUTCOMES, "schemas")}
    table["all"] = total
    for row in table.values():
        row["coverage"] = sum(row[k] for k in VALID) / row["schemas"] if row["schemas"] else 0.0
    return table


def _validator() -> Validator:
    try:
        import jsonschema  # type: ignore[import-untyped]  # a test extra; no stubs installed
    except ImportError:
        raise ValueError("bench-schemas validates answers with jsonschema: pip install jsonschema") from None

    def first_error(value: Any, schema: dict) -> str | None:
        try:
            cls = jsonschema.validators.validator_for(schema)
            cls(schema, format_checker=cls.FORMAT_CHECKER).validate(value)
        except jsonschema.exceptions.ValidationError as exc:
            return f"{exc.message[:300]} at {exc.json_path}"
        except (jsonschema.exceptions.SchemaError, jsonschema.exceptions.RefResolutionError, RecursionError) as exc:
            return f"jsonschema cannot use the schema: {type(exc).__name__}"  # no answer counts
        return None

    return first_error


def _percentile(values: list[float], p: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else 0.0


def render(report: dict[str, Any], as_json: bool) -> str:
    if as_json:
        return json.dumps(report, indent=2)
    c = report["config"]
    lines = [f"{c['schemas']} schemas ({c['per_set']} a set, seed {c['seed']}), greedy, max_tokens {c['max_tokens']}, "
             f"{c['model']}: coverage (covered / closed at max_tokens / refused / out of tokens / invalid / "
             "error)"]
    for set_name, row in report["chorus"].items():
        line = f"  {set_name:16} chorus {_row(row)}"
        if "peer" in report:
            line += f"   llama-server {_row(report['peer'][set_name])}"
        lines.append(line)
    ms, rate = report["compile_ms"], report["decode_tok_s"]
    lines.append(f"  grammar check + compile: p50 {ms['p50']:.1f} ms, p95 {ms['p95']:.1f} ms, max {ms['max']:.1f} ms")
    lines.append(f"  decode tok/s with a grammar {rate['grammar']:.1f}, without {rate['plain']:.1f} "
                 f"({rate['ratio']:.2f}x; the {rate['schemas']} schemas asked both ways)")
    return "\n".join(lines)


def _row(row: dict[str, Any]) -> str:
    return f"{row['coverage']:.2f} ({'/'.join(str(row[k]) for k in OUTCOMES)})"
