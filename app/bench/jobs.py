"""`chorus bench-jobs`: a background job (issue 37) on one engine, against the engine's own
batched rate on the same prompts, and beside a chat being typed in the focused tab.

In one run on one engine of `width` sequences, each phase on an empty KV cache:
- engine: the job's N prompts submitted to the engine at once (as `chorus bench` does), the
  same sampling: the engine's own batched rate, items/s;
- job: the same N rows as a CSV, run by the real job runner (app/jobs, what `chorus batch
  run` uses) into a real SQLite file: items/s, every item written exactly once, and how many
  times the shared prefix (system prompt, template header, instructions) was computed;
- job + chat: the same job again, and a conversation at the focused tab's priority whose
  turns come in pairs, in turn order ABBA: one turn typed while the job runs (a turn every
  few seconds, the job filling the engine between them), one alone, with the job paused and
  its idle KV dropped. Each pair's TTFT and decode ratios (beside / alone; the medians are the
  figures), and the job's generated tokens per second over the periods it shared with the
  chat against its rate alone. Paired, the two sides meet the same machine: measured apart,
  minutes away from each other, a chat alone decoded 48 tok/s before the job phases and 61
  after them in one run. One conversation, as one user types: the job's window leaves one
  idle sequence for the chat's KV, and a second conversation lost its own to the job.

The engine and job phases alternate over `rounds` (ABBA: engine, job, then job, engine, ...),
and job / engine is the ratio of their mean rates: a machine whose speed drifts through the
run (a neighbour's load rising) then weighs on both sides alike, where a fixed order gave
the drift to whichever side ran second.

Every request is greedy with exactly max_tokens (end-of-generation ignored), so each side
does the same work. run_jobs_bench() returns the report; render() is its text or JSON.
"""

from __future__ import annotations

import csv
import json
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from app.bench.workload import SENTENCES, TOPICS, common_prefix
from app.jobs import JobRunner, JobSpec, default_window, new_job, read_rows
from inference import PRIORITY_VISIBLE_TAB, ChatRequest, Delta, Engine, LoadSettings, RequestStats, SamplingParams
from storage import ItemResult, JobsRepository, open_database

INSTRUCTIONS = ("Read the question below and answer it in one short sentence, plainly, "
                "without a preamble. If it cannot be answered, say so.")
TEMPLATE = INSTRUCTIONS + "\n\nQuestion: $question"
CHAT_QUESTIONS = ("What is a good name for a cat?", "And for a dog?", "Which of the two is older as a pet?",
                  "Say that again in French.", "Now in one word.", "Thanks. What should I cook tonight?")
# What the chat's history holds for each earlier answer: fixed text, so the conversation's
# prompts are the same whether its turns ran alone or beside the job.
CHAT_ANSWER = "Here is a short answer to that, in a few words."


@dataclass(frozen=True)
class JobsBenchOptions:
    items: int = 1000
    width: int = 8  # engine sequences: the batch's width, for the engine and the job alike
    max_tokens: int = 16  # of each item
    system_words: int = 120  # the job's system prompt, about this many words
    # The runner's items in flight; None: its defaults, as `chorus batch run` alone (the engine
    # is the job's) and as the desktop beside the chat (the engine is shared)
    window: int | None = None
    chat_turns: int = 8  # each side's: beside the job, and alone
    chat_every_s: float = 5.0
    chat_max_tokens: int = 32
    rounds: int = 2  # engine and job phases each, alternating: ABBA...


class _CountingJobs(JobsRepository):
    """The job's store, counting each item's written results and when each was written."""

    def __init__(self, db) -> None:
        super().__init__(db)
        self.writes: dict[int, int] = {}
        self.times: list[float] = []
        self._lock = threading.Lock()

    def finish(self, item_id: int, result: ItemResult) -> bool:
        wrote = super().finish(item_id, result)
        with self._lock:
            if wrote:
                self.writes[item_id] = self.writes.get(item_id, 0) + 1
                self.times.append(time.perf_counter())
        return wrote


class _CachedTap:
    """The engine as the job runner sees it, recording how many prompt tokens each of the
    job's requests found cached (its last admission's, from the finishing delta's stats)."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self.cached: list[int] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._engine, name)

    def stream(self, chat: ChatRequest, sink: Callable[[Delta], None]) -> str:
        def tapped(delta: Delta) -> None:
            if delta.finished and delta.stats is not None:
                self.cached.append(delta.stats.cached_tokens)
            sink(delta)

        return self._engine.stream(chat, tapped)


def run_jobs_bench(options: JobsBenchOptions, settings: LoadSettings) -> dict[str, Any]:
    settings = sized_settings(options, settings)
    engine = Engine.start(settings)
    try:
        with tempfile.TemporaryDirectory(prefix="chorus-bench-jobs-") as folder:
            return _run(engine, options, settings, Path(folder))
    finally:
        engine.shutdown()


def sized_settings(options: JobsBenchOptions, settings: LoadSettings) -> LoadSettings:
    """Room for the shared prefix once and every sequence's own tokens, with the reserve."""
    need = 4 * options.system_words + (options.width + 1) * (96 + 64 + max(options.max_tokens, options.chat_max_tokens))
    need += 2 * 64 * options.chat_turns + 512  # both sides' turns, in one conversation
    n_ctx = max(4096, 256 * ((need + 255) // 256))
    return replace(settings, n_ctx=n_ctx, n_seq_max=options.width, n_batch=max(512, options.width))


def _run(engine: Engine, options: JobsBenchOptions, settings: LoadSettings, folder: Path) -> dict[str, Any]:
    system = _system_prompt(options.system_words)
    rows = [{"question": f"Question {i + 1}: what is {TOPICS[i % len(TOPICS)]}?"} for i in range(options.items)]
    csv_path = folder / "questions.csv"
    with csv_path.open("w", encoding="utf-8", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=["question"])
        writer.writeheader()
        writer.writerows(rows)
    spec = JobSpec(template=TEMPLATE, system_prompt=system,
                   sampling={"max_tokens": options.max_tokens, "temperature": 0.0, "repeat_penalty": 1.0,
                             "ignore_eos": True})
    prompts = [engine.inputs.chat_tokens([{"role": "system", "content": system},
                                          {"role": "user", "content": spec.prompt(row)}]) for row in rows]
    db = open_database(folder / "chorus.db")
    try:
        jobs = _CountingJobs(db)
        _warm_up(engine, options)
        batched: list[dict[str, Any]] = []
        alone: list[dict[str, Any]] = []
        for round_ in range(max(1, options.rounds)):
            for phase in (("engine", "job") if round_ % 2 == 0 else ("job", "engine")):
                if phase == "engine":
                    batched.append(_engine_phase(engine, prompts, SamplingParams(**spec.sampling)))
                else:
                    alone.append(_job_phase(engine, jobs, csv_path, spec, options, prompts))
                _clear(engine)
        beside = _job_with_chat(engine, jobs, csv_path, spec, options)
    finally:
        db.close()
    return _report(options, settings, system, prompts, batched, alone, beside.pop("chat_alone"), beside)


def _system_prompt(words: int) -> str:
    parts: list[str] = []
    i = 0
    while sum(len(p.split()) for p in parts) < words:
        parts.append(f"Rule {i + 1}: {SENTENCES[i % len(SENTENCES)]}")
        i += 1
    return " ".join(parts)


def _clear(engine: Engine) -> None:
    """An empty KV cache: each phase computes the shared prefix itself."""
    engine.call(lambda core: core.kv.clear())


def _warm_up(engine: Engine, options: JobsBenchOptions) -> None:
    """Untimed: the first batch after loading runs slow. Other text, then an empty cache."""
    sampling = SamplingParams.greedy(options.max_tokens, ignore_eos=True)
    handles = [engine.submit(ChatRequest(messages=({"role": "user", "content": f"Count to {i + 3}."},),
                                         sampling=sampling)) for i in range(options.width)]
    for handle in handles:
        handle.result(timeout=600)
    _clear(engine)


def _engine_phase(engine: Engine, prompts: list[list[int]], sampling: SamplingParams) -> dict[str, Any]:
    """The N prompts at once, straight to the engine (`chorus bench`'s way)."""
    engine.reset_metrics()
    t0 = time.perf_counter()
    handles = [engine.submit(ChatRequest(prompt_tokens=tuple(p), sampling=sampling)) for p in prompts]
    results = [h.result(timeout=7200) for h in handles]
    wall = time.perf_counter() - t0
    failed = [r.error for r in results if r.error]
    if failed:
        raise RuntimeError(f"{len(failed)} engine requests failed: {failed[:3]}")
    generated = sum(r.stats.generated_tokens for r in results if r.stats is not None)
    return {"wall_s": wall, "items_per_s": len(prompts) / wall, "generated_tokens": generated,
            "cached_per_request": [r.stats.cached_tokens for r in results if r.stats is not None],
            **_engine_figures(engine)}


def _job_phase(engine: Engine, jobs: _CountingJobs, csv_path: Path, spec: JobSpec, options: JobsBenchOptions,
               prompts: list[list[int]]) -> dict[str, Any]:
    job_id = new_job(jobs, read_rows(csv_path), spec, source=csv_path.name).id
    engine.reset_metrics()
    t0 = time.perf_counter()
    tap = _CachedTap(engine)
    runner = JobRunner(jobs, tap, job_id, window=options.window or default_window(engine, own_engine=True))
    status = runner.run()
    wall = time.perf_counter() - t0
    return {"job": job_id, "window": runner.window, "status": status, "wall_s": wall,
            "items_per_s": options.items / wall, "job_tok_s": options.items * options.max_tokens / wall,
            "cached_per_request": tap.cached, **_job_items(jobs, job_id, options), **_engine_figures(engine)}


def _job_with_chat(engine: Engine, jobs: _CountingJobs, csv_path: Path, spec: JobSpec,
                   options: JobsBenchOptions) -> dict[str, Any]:
    """The job, and the chat's turns in pairs: one beside the running job, one alone with
    the job paused, the pair's order alternating; then the job runs to its end. Stops
    pairing early if the job ends first (job_outlasted_chat: False)."""
    job_id = new_job(jobs, read_rows(csv_path), spec, source=csv_path.name).id
    engine.reset_metrics()
    window = options.window or default_window(engine)
    chat = _Conversation()
    beside: list[RequestStats] = []
    alone: list[RequestStats] = []
    shared_s = job_tokens = 0.0
    t0 = time.perf_counter()
    outlasted = True
    for pair in range(options.chat_turns):
        turns: dict[str, RequestStats] = {}
        for side in (("beside", "alone") if pair % 2 == 0 else ("alone", "beside")):
            if side == "alone":
                engine.call(lambda core: core.kv.drop_idle_below(0))  # the job's idle items: a chat alone's KV
                turns[side] = chat.turn(engine, options)
                continue
            period = _turn_beside_job(engine, jobs, job_id, window, chat, options)
            if period is None:
                outlasted = False
                break
            turns[side], seconds, tokens = period
            shared_s += seconds
            job_tokens += tokens
        if not outlasted:
            break
        beside.append(turns["beside"])
        alone.append(turns["alone"])
    runner = JobRunner(jobs, engine, job_id, window=window)
    status = runner.run()
    wall = time.perf_counter() - t0
    return {"job": job_id, "window": runner.window, "status": status, "wall_s": wall,
            "chat": _turn_figures(beside), "chat_alone": _turn_figures(alone), "pairs": _pair_ratios(beside, alone),
            "chat_window_s": shared_s, "job_tokens_during_chat": job_tokens,
            "job_tok_s_during_chat": job_tokens / shared_s if shared_s else float("nan"),
            "job_outlasted_chat": outlasted, **_job_items(jobs, job_id, options), **_engine_figures(engine)}


def _turn_beside_job(engine: Engine, jobs: _CountingJobs, job_id: str, window: int, chat: _Conversation,
                     options: JobsBenchOptions) -> tuple[RequestStats, float, float] | None:
    """The job resumed on a thread until it has written a window's worth of items (it fills
    the engine), then one chat turn and the rest of its typing period; the job paused after.
    The turn's stats, the period's seconds and the job's generated tokens in it; None when
    the job ended before the turn could start."""
    runner = JobRunner(jobs, engine, job_id, window=window)
    thread = threading.Thread(target=runner.run, name="bench-job")
    written = len(jobs.times)
    thread.start()
    deadline = time.monotonic() + 600
    while len(jobs.times) - written < min(window, options.width) and thread.is_alive():
        if time.monotonic() > deadline:
            raise RuntimeError("the job wrote no results in 10 minutes")
        time.sleep(0.05)
    if not thread.is_alive():
        return None
    began, generated = time.perf_counter(), engine.metrics(fresh=True).generated_tokens
    stats = chat.turn(engine, options)
    time.sleep(max(0.0, options.chat_every_s - (time.perf_counter() - began)))
    seconds = time.perf_counter() - began
    job_tokens = engine.metrics(fresh=True).generated_tokens - generated - stats.generated_tokens
    runner.pause()
    thread.join()
    return stats, seconds, job_tokens


class _Conversation:
    """A chat at the focused tab's priority whose history holds a fixed answer for each
    earlier turn: its prompts are the same whichever side each turn ran on."""

    def __init__(self) -> None:
        self.messages: list[dict] = []  # a question and its answer a turn

    def turn(self, engine: Engine, options: JobsBenchOptions) -> RequestStats:
        asked = len(self.messages) // 2
        self.messages.append({"role": "user", "content": CHAT_QUESTIONS[asked % len(CHAT_QUESTIONS)]})
        result = engine.submit(ChatRequest(messages=tuple(self.messages),
                                           sampling=SamplingParams.greedy(options.chat_max_tokens, ignore_eos=True),
                                           priority=PRIORITY_VISIBLE_TAB)).result(timeout=600)
        if result.error or result.stats is None:
            raise RuntimeError(f"a chat turn failed: {result.error}")
        self.messages.append({"role": "assistant", "content": CHAT_ANSWER})
        return result.stats


def _pair_ratios(beside: list[RequestStats], alone: list[RequestStats]) -> dict[str, Any]:
    """Each pair's beside / alone: TTFT and decode rate, and their medians."""
    ttft = [b.ttft_s / a.ttft_s for b, a in zip(beside, alone) if b.ttft_s and a.ttft_s]
    decode = [b.decode_tok_s / a.decode_tok_s for b, a in zip(beside, alone) if b.decode_tok_s and a.decode_tok_s]
    return {"ttft": ttft, "decode": decode,
            "ttft_median": statistics.median(ttft) if ttft else float("nan"),
            "decode_median": statistics.median(decode) if decode else float("nan")}


def _turn_figures(stats: list[RequestStats]) -> dict[str, Any]:
    ttfts = [s.ttft_s for s in stats if s.ttft_s is not None]
    decodes = [s.decode_tok_s for s in stats if s.decode_tok_s is not None]
    return {"turns": len(stats), "generated_tokens": sum(s.generated_tokens for s in stats), "ttft_s": ttfts,
            "decode_tok_s": decodes,
            "ttft_median_s": statistics.median(ttfts) if ttfts else float("nan"),
            "decode_median_tok_s": statistics.median(decodes) if decodes else float("nan")}


def _job_items(jobs: _CountingJobs, job_id: str, options: JobsBenchOptions) -> dict[str, Any]:
    """The job's rows as stored: each item's state, its tokens, how often it was written."""
    items = jobs.items(job_id)
    writes = [jobs.writes.get(item.id, 0) for item in items]
    return {"items": len(items), "done": sum(item.state == "done" for item in items),
            "failed": sum(item.state == "failed" for item in items),
            "written_once": sum(w == 1 for w in writes), "written_twice_or_more": sum(w > 1 for w in writes),
            "items_with_max_tokens": sum(item.completion_tokens == options.max_tokens for item in items)}


def _engine_figures(engine: Engine) -> dict[str, Any]:
    m = engine.metrics(fresh=True)
    return {"prompt_tokens_computed": m.prompt_tokens_computed, "prompt_tokens_saved": m.prompt_tokens_saved,
            "generated_tokens_engine": m.generated_tokens, "max_batch_seqs": m.max_step_seqs,
            "tokens_per_step": m.generated_tokens / m.steps if m.steps else 0.0,
            "decode_only_tok_s": m.decode_only_tok_s, "preemptions": m.preemptions,
            "decode_step_ms_mean": None if m.step_s_mean is None else m.step_s_mean * 1000.0}


def distinct_prefix_tokens(prompts: list[list[int]]) -> int:
    """The prompt tokens a perfect prefix cache computes: each distinct prefix once (the
    nodes of the prompts' token trie). The questions share more than the template (the
    numbers' first digits, the topics), so this is less than shared + each one's own part."""
    ordered = sorted(prompts)
    total = 0
    for before, prompt in zip([[], *ordered], ordered):
        total += len(prompt) - next((i for i, (a, b) in enumerate(zip(before, prompt)) if a != b),
                                    min(len(before), len(prompt)))
    return total


def shared_prefix_computed(cached_per_request: list[int], shared: int) -> float:
    """How many times the requests computed the prompts' shared prefix, counted request by
    request from the tokens each found cached: 1.0 when the first computed it and every
    other found it whole. What prefix_computations reads from the totals is this plus
    whatever else a perfect cache would have kept (the questions' shared digits and topics),
    which over 1,000 prompts adds up to half a prefix of tokens computed elsewhere."""
    if not shared:
        return float("nan")
    return sum(shared - min(cached, shared) for cached in cached_per_request) / shared


def _prefix_computations(computed: int, ideal: int, shared: int) -> float:
    """How many times a phase computed the shared prefix: once, plus what it computed beyond
    the ideal in shared prefixes (1.0: once; what it recomputed of anything counts)."""
    return 1.0 + (computed - ideal) / shared if shared else float("nan")


def _report(options: JobsBenchOptions, settings: LoadSettings, system: str, prompts: list[list[int]],
            batched_runs: list[dict[str, Any]], alone_runs: list[dict[str, Any]], chat_alone: dict[str, Any],
            beside: dict[str, Any]) -> dict[str, Any]:
    shared = common_prefix(prompts)
    ideal = distinct_prefix_tokens(prompts)
    for phase in (*batched_runs, *alone_runs):
        phase["prefix_computations"] = _prefix_computations(phase["prompt_tokens_computed"], ideal, shared)
    for phase in (*batched_runs, *alone_runs):
        phase["shared_prefix_computed"] = shared_prefix_computed(phase.pop("cached_per_request"), shared)
    batched, alone = _mean_run(batched_runs), _mean_run(alone_runs)
    ratio: dict[str, Any] = {
        "job_vs_engine": _ratio(alone["items_per_s"], batched["items_per_s"]),
        "job_vs_engine_by_round": [_ratio(j["items_per_s"], e["items_per_s"])
                                   for e, j in zip(batched_runs, alone_runs)],
        "chat_ttft_beside_job_vs_alone": beside["pairs"]["ttft_median"],  # the pairs' medians
        "chat_decode_beside_job_vs_alone": beside["pairs"]["decode_median"],
        "job_during_chat_vs_alone": _ratio(beside["job_tok_s_during_chat"], alone["job_tok_s"]),
    }
    goals = {
        "job_at_least_0.9x_engine": ratio["job_vs_engine"] >= 0.9,
        "prefix_computed_once": all(j["shared_prefix_computed"] < 1.5 for j in alone_runs),  # twice: 2.0
        "chat_ttft_at_most_1.2x": ratio["chat_ttft_beside_job_vs_alone"] <= 1.2,
        "chat_decode_at_least_0.95x": ratio["chat_decode_beside_job_vs_alone"] >= 0.95,
        "job_keeps_0.5x_during_chat": ratio["job_during_chat_vs_alone"] >= 0.5,
        "every_item_exactly_once": all(p["done"] == p["items"] == p["written_once"] == options.items
                                       for p in (*alone_runs, beside)),
    }
    return {
        "config": {"model": settings.model_path.name, "items": options.items, "width": options.width,
                   "max_tokens": options.max_tokens, "window": options.window, "threads": settings.threads(),
                   "n_ctx": settings.n_ctx, "system_words": len(system.split()), "shared_prefix_tokens": shared,
                   "prompt_tokens_ideal": ideal,
                   "prompt_tokens_mean": statistics.mean(len(p) for p in prompts), "chat_turns": options.chat_turns,
                   "chat_every_s": options.chat_every_s, "chat_max_tokens": options.chat_max_tokens,
                   "rounds": len(alone_runs)},
        "engine": batched, "job": alone, "engine_runs": batched_runs, "job_runs": alone_runs,
        "chat_alone": chat_alone, "job_with_chat": beside,
        "ratio": ratio, "goals": goals,
    }


def _mean_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The first run's figures with the runs' mean rates (what the ratios compare) and the
    worst prefix and exactly-once counts among them."""
    mean = dict(runs[0])
    for key in ("items_per_s", "wall_s", "job_tok_s", "decode_only_tok_s", "tokens_per_step", "decode_step_ms_mean"):
        values = [r[key] for r in runs if r.get(key) is not None]
        if values:
            mean[key] = statistics.mean(values)
    mean["prefix_computations"] = max(r["prefix_computations"] for r in runs)
    if all("shared_prefix_computed" in r for r in runs):
        mean["shared_prefix_computed"] = max(r["shared_prefix_computed"] for r in runs)
    for key in ("done", "written_once"):
        if key in mean:
            mean[key] = min(r[key] for r in runs)
    if "written_twice_or_more" in mean:
        mean["written_twice_or_more"] = max(r["written_twice_or_more"] for r in runs)
    return mean


def _ratio(a: float, b: float) -> float:
    return a / b if b else float("nan")


def render(report: dict[str, Any], as_json: bool) -> str:
    if as_json:
        return json.dumps(report, indent=2)
    c, e, j, w = report["config"], report["engine"], report["job"], report["job_with_chat"]
    alone, beside, r = report["chat_alone"], w["chat"], report["ratio"]
    return "\n".join([
        f"{c['items']} items ({c['prompt_tokens_mean']:.0f} prompt tokens each, {c['shared_prefix_tokens']} shared), "
        f"{c['max_tokens']} tokens each, width {c['width']}, {c['threads']} threads, model {c['model']}; "
        f"the runner's window {j['window']} alone, {w['window']} beside the chat",
        f"  engine, all at once:   {e['items_per_s']:.2f} items/s ({e['wall_s']:.1f} s; means of {c['rounds']} runs, "
        f"alternating with the job's), "
        f"shared prefix computed {e['shared_prefix_computed']:.2f}x (totals against a perfect cache: "
        f"{e['prefix_computations']:.2f})",
        f"  job (chorus batch):    {j['items_per_s']:.2f} items/s ({j['wall_s']:.1f} s), "
        f"shared prefix computed {j['shared_prefix_computed']:.2f}x (totals: {j['prefix_computations']:.2f}); "
        f"{j['done']}/{j['items']} done, "
        f"{j['written_once']} written once, {j['written_twice_or_more']} more than once",
        f"  chat alone:            TTFT {alone['ttft_median_s'] * 1000:.0f} ms, "
        f"decode {alone['decode_median_tok_s']:.1f} tok/s (medians of {alone['turns']} turns, each paired with one "
        f"beside the job, the job paused and its idle KV dropped; the ratios below are the pairs' medians)",
        f"  chat beside the job:   TTFT {beside['ttft_median_s'] * 1000:.0f} ms, "
        f"decode {beside['decode_median_tok_s']:.1f} tok/s ({beside['turns']} turns); the job meanwhile "
        f"{w['job_tok_s_during_chat']:.1f} tok/s against {j['job_tok_s']:.1f} alone, over {w['chat_window_s']:.1f} s "
        f"({w['done']}/{w['items']} done in {w['wall_s']:.1f} s)",
        f"  job / engine {r['job_vs_engine']:.3f} (by round: "
        f"{', '.join(f'{x:.3f}' for x in r['job_vs_engine_by_round'])}); "
        f"chat TTFT beside / alone {r['chat_ttft_beside_job_vs_alone']:.3f}; "
        f"chat decode beside / alone {r['chat_decode_beside_job_vs_alone']:.3f}; "
        f"job during chat / alone {r['job_during_chat_vs_alone']:.3f}",
        "  goals: " + ", ".join(f"{k} {'yes' if v else 'NO'}" for k, v in report["goals"].items()),
        *([] if w["job_outlasted_chat"] else
          ["  the job ended before the chat's turns did: give it more items for the chat's figures"]),
    ])
