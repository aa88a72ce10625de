"""`chorus bench-schemas`: JSONSchemaBench-style coverage of structured output (issue 38).

A sample of real-world schemas (a folder of folders of .json schemas, one folder a set, as
JSONSchemaBench's data/ holds them: `guidance-ai/jsonschemabench`, not part of this
repository) is asked for, one schema a request: the schema in the prompt, greedy, at most
max_tokens, output constrained by the schema's grammar. A schema is *covered* when its
grammar is accepted and the output validates (jsonschema, formats checked). Per set: covered,
refused, ran out of tokens, invalid. Also each grammar's check and compile time (p50/p95) and
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
OUTCOMES = ("covered", "refused", "out_of_tokens", "invalid", "error")
MAX_SCHEMA_CHARS = 16_000  # longer ones would not fit a prompt beside the answer


@dataclass(frozen=True)
class SchemaBenchOptions:
    data: Path  # JSONSchemaBench's data/ folder, or any folder of folders of .json schemas
    sets: tuple[str, ...] = ("Glaiveai2K", "Github_easy", "Github_medium", "Kubernetes", "Snowplow")
    per_set: int = 40
    max_tokens: int = 384
    concurrency: int = 8
    seed: int = 0
    peer: str | None = None  # a llama-server's base URL (http://127.0.0.1:8080)


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
        chorus, compile_ms, rates = _run_chorus(engine, cases, options, validator)
        plain_rates = _plain_rates(engine, cases, options)
    finally:
        engine.shutdown()
    report: dict[str, Any] = {
        "config": {"model": settings.model_path.name, "sets": list(options.sets), "per_set": options.per_set,
                   "max_tokens": options.max_tokens, "concurrency": options.concurrency, "seed": options.seed,
                   "schemas": len(cases), "data": str(options.data)},
        "chorus": _by_set(cases, chorus),
        "compile_ms": {"p50": _percentile(compile_ms, 50), "p95": _percentile(compile_ms, 95),
                       "max": max(compile_ms, default=0.0)},
        "decode_tok_s": {"grammar": _median(rates), "plain": _median(plain_rates)},
        "cases": [{"set": c.set_name, "name": c.name, "chorus": o} for c, o in zip(cases, chorus)],
    }
    report["decode_tok_s"]["ratio"] = report["decode_tok_s"]["grammar"] / (report["decode_tok_s"]["plain"] or 1)
    if options.peer is not None:
        peer = _run_peer(options.peer, cases, options, validator)
        report["peer"] = _by_set(cases, peer)
        for row, outcome in zip(report["cases"], peer):
            row["peer"] = outcome
    return report


def _run_chorus(engine: Engine, cases: list[Case], options: SchemaBenchOptions,
                validator: Callable[[Any, dict], bool]) -> tuple[list[str], list[float], list[float]]:
    compile_ms: list[float] = []
    rates: list[float] = []
    engine.compile_grammar(schema_grammar({"type": "object"}))  # llguidance's tokenizer is built once, untimed

    def one(case: Case) -> str:
        started = time.perf_counter()
        try:
            grammar = schema_grammar(case.schema)
            engine.compile_grammar(grammar)
        except RequestError:
            return "refused"
        compile_ms.append(1000 * (time.perf_counter() - started))
        result = _ask(engine, case, SamplingParams.greedy(options.max_tokens, grammar=grammar))
        if result.stats is not None and result.stats.decode_tok_s:
            rates.append(result.stats.decode_tok_s)
        return _outcome(result, case.schema, validator)

    with ThreadPoolExecutor(options.concurrency) as pool:
        outcomes = list(pool.map(one, cases))
    return outcomes, compile_ms, rates


def _plain_rates(engine: Engine, cases: list[Case], options: SchemaBenchOptions) -> list[float]:
    """The same prompts without a grammar: each request's decode rate."""
    def one(case: Case) -> float:
        result = _ask(engine, case, SamplingParams.greedy(options.max_tokens))
        return result.stats.decode_tok_s if result.stats is not None and result.stats.decode_tok_s else 0.0

    with ThreadPoolExecutor(options.concurrency) as pool:
        return [rate for rate in pool.map(one, cases) if rate]


def _ask(engine: Engine, case: Case, sampling: SamplingParams) -> Completion:
    return engine.submit(ChatRequest(messages=case.messages(), sampling=sampling)).result(1800)


def _outcome(result: Completion, schema: dict, validator: Callable[[Any, dict], bool]) -> str:
    if result.finish_reason is FinishReason.LENGTH:
        return "out_of_tokens"
    if result.error is not None:
        return "error"
    return _judged(result.text, schema, validator)


def _judged(text: str, schema: dict, validator: Callable[[Any, dict], bool]) -> str:
    try:
        value = json.loads(text)
    except ValueError:
        return "invalid"
    return "covered" if validator(value, schema) else "invalid"


def _run_peer(base: str, cases: list[Case], options: SchemaBenchOptions,
              validator: Callable[[Any, dict], bool]) -> list[str]:
    client = httpx.Client(base_url=base.rstrip("/"), timeout=1800)

    def one(case: Case) -> str:
        body = {"messages": list(case.messages()), "temperature": 0, "max_tokens": options.max_tokens,
                "response_format": {"type": "json_schema", "json_schema": {"name": "s", "schema": case.schema}}}
        try:
            reply = client.post("/v1/chat/completions", json=body)
        except httpx.HTTPError:
            return "error"
        if reply.status_code in (400, 422):
            return "refused"
        if reply.status_code != 200:
            return "error"
        choice = reply.json()["choices"][0]
        if choice.get("finish_reason") == "length":
            return "out_of_tokens"
        return _judged(choice["message"].get("content") or "", case.schema, validator)

    with client, ThreadPoolExecutor(options.concurrency) as pool:
        return list(pool.map(one, cases))


def _by_set(cases: list[Case], outcomes: list[str]) -> dict[str, dict[str, Any]]:
    table: dict[str, dict[str, Any]] = {}
    for case, outcome in zip(cases, outcomes):
        row = table.setdefault(case.set_name, {k: 0 for k in OUTCOMES} | {"schemas": 0})
        row[outcome] += 1
        row["schemas"] += 1
    total = {k: sum(row[k] for row in table.values()) for k in (*OUTCOMES, "schemas")}
    table["all"] = total
    for row in table.values():
        row["coverage"] = row["covered"] / row["schemas"] if row["schemas"] else 0.0
    return table


def _validator() -> Callable[[Any, dict], bool]:
    try:
        import jsonschema  # type: ignore[import-untyped]  # a test extra; no stubs installed
    except ImportError:
        raise ValueError("bench-schemas validates answers with jsonschema: pip install jsonschema") from None

    def valid(value: Any, schema: dict) -> bool:
        try:
            cls = jsonschema.validators.validator_for(schema)
            cls(schema, format_checker=cls.FORMAT_CHECKER).validate(value)
        except jsonschema.exceptions.ValidationError:
            return False
        except (jsonschema.exceptions.SchemaError, jsonschema.exceptions.RefResolutionError, RecursionError):
            return False  # a schema jsonschema itself cannot use: no answer counts
        return True

    return valid


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
             f"{c['model']}: coverage (covered / refused / out of tokens / invalid / error)"]
    for set_name, row in report["chorus"].items():
        line = f"  {set_name:16} chorus {_row(row)}"
        if "peer" in report:
            line += f"   llama-server {_row(report['peer'][set_name])}"
        lines.append(line)
    ms, rate = report["compile_ms"], report["decode_tok_s"]
    lines.append(f"  grammar check + compile: p50 {ms['p50']:.1f} ms, p95 {ms['p95']:.1f} ms, max {ms['max']:.1f} ms")
    lines.append(f"  decode tok/s with a grammar {rate['grammar']:.1f}, without {rate['plain']:.1f} "
                 f"({rate['ratio']:.2f}x)")
    return "\n".join(lines)


def _row(row: dict[str, Any]) -> str:
    return (f"{row['coverage']:.2f} ({row['covered']}/{row['refused']}/{row['out_of_tokens']}/{row['invalid']}/"
            f"{row['error']})")
