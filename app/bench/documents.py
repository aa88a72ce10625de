"""`chorus bench-documents`: one document asked about by N chats at once, against the same
questions one after another, and the first question after a restart with and without the
disk prompt cache, all measured side by side in one run.

The prompts are the app's own (app/documents: the document whole in the system message,
after the system prompt), so what is measured is what a tab asking about a file costs:
- prompt tokens computed against the ideal (the shared prefix once, then each question's
  own tokens);
- TTFT p50/p95 of N questions sent at once, and of the same questions sent one after another,
  each timed from when all were asked (what the last of N queued questions waits);
- TTFT of the first question on a fresh engine that finds the document's block saved in the
  disk prompt cache, against one that computes it.
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from app.bench.workload import SENTENCES, TOPICS
from app.documents import EngineTokens, build_prompt, extract_document, split_chunks
from inference import ChatRequest, Delta, Engine, LoadSettings, SamplingParams
from storage import DocumentRecord

QUESTION_TEMPLATES = (
    "What does the document say about {}?", "Summarize the part on {} in one sentence.",
    "Which numbers are given for {}?", "Is {} described as important?",
)


@dataclass(frozen=True)
class DocumentBenchOptions:
    document: Path | None = None  # None: a generated manual of about generated_tokens tokens
    chats: int = 8
    max_tokens: int = 32
    generated_tokens: int = 3000
    uncached: bool = False  # also the same questions one after another, each computing the document


def generated_document(tokens: int) -> str:
    """A Markdown manual of sections built from the bench's sentences (about 4 characters a token)."""
    parts: list[str] = []
    i = 0
    while sum(len(p) for p in parts) < tokens * 4:
        topic = TOPICS[i % len(TOPICS)]
        body = " ".join(SENTENCES[(i + k) % len(SENTENCES)] for k in range(5))
        parts.append(f"# {topic.capitalize()} ({i + 1})\n\n{body}\n")
        i += 1
    return "\n".join(parts)


def load_document(options: DocumentBenchOptions) -> DocumentRecord:
    now = datetime.now(timezone.utc)
    if options.document is not None:
        new = extract_document(options.document)
        return DocumentRecord(new.sha256, new.name, new.mime, new.size_bytes, new.text, new.pages, new.chunks, now)
    text = generated_document(options.generated_tokens)
    return DocumentRecord("0" * 64, "manual.md", "text/markdown", len(text), text, None, split_chunks(text), now)


def questions(n: int) -> list[str]:
    return [QUESTION_TEMPLATES[i % len(QUESTION_TEMPLATES)].format(TOPICS[i % len(TOPICS)]) for i in range(n)]


def prompts(engine: Engine, doc: DocumentRecord, asked: list[str], max_tokens: int) -> list[ChatRequest]:
    counter = EngineTokens(engine)
    out = []
    for q in asked:
        prompt = build_prompt(({"role": "user", "content": q},), [doc], counter, engine.inputs.n_ctx, max_tokens,
                              lambda shas, query, n: [])
        if prompt.retrieval:
            raise ValueError(f"{doc.name} does not fit whole in the context ({engine.inputs.n_ctx} tokens): use --ctx")
        out.append(engine.prepare(ChatRequest(messages=prompt.messages, sampling=SamplingParams.greedy(max_tokens))))
    return out


def ideal_tokens(chats: list[ChatRequest]) -> int:
    """The shared prefix once, then each chat's own tokens."""
    token_lists = [list(c.prompt_tokens or ()) for c in chats]
    common = token_lists[0]
    for tokens in token_lists[1:]:
        n = next((i for i, (a, b) in enumerate(zip(common, tokens)) if a != b), min(len(common), len(tokens)))
        common = common[:n]
    return len(common) + sum(len(t) - len(common) for t in token_lists)


class FirstToken:
    """When a request's first token came, stamped on the engine's thread as it is produced (a
    handle iterated after another's whole reply would read it late)."""

    def __init__(self, since: float) -> None:
        self.since = since
        self.at: float | None = None

    def __call__(self, delta: Delta) -> None:
        if self.at is None and delta.token_ids:
            self.at = time.perf_counter() - self.since

    @property
    def seconds(self) -> float:
        return self.at if self.at is not None else float("nan")


def run_at_once(engine: Engine, chats: list[ChatRequest]) -> tuple[list[float], int, float]:
    """Every chat submitted together: TTFTs from that moment, prompt tokens computed, wall time."""
    started = time.perf_counter()
    firsts = [FirstToken(started) for _ in chats]
    handles = [engine.submit(c, on_delta=f) for c, f in zip(chats, firsts)]
    computed = 0
    for h in handles:
        done = h.result(timeout=None)
        if done.stats is not None:
            computed += done.stats.prompt_tokens - done.stats.cached_tokens
    return [f.seconds for f in firsts], computed, time.perf_counter() - started


def run_one_after_another(engine: Engine, chats: list[ChatRequest]) -> tuple[list[float], float]:
    """Each chat after the previous one finished, TTFT from when all were asked."""
    started = time.perf_counter()
    firsts = [FirstToken(started) for _ in chats]
    for c, f in zip(chats, firsts):
        engine.submit(c, on_delta=f).result(timeout=None)
    return [f.seconds for f in firsts], time.perf_counter() - started


def run_each_computing(settings: LoadSettings, chats: list[ChatRequest]) -> tuple[list[float], float]:
    """One after another as an app without a cache shared between chats does it: each question
    on a fresh engine computes the whole document. Times from when all were asked, engine
    starts left out (only the requests' own time is counted)."""
    ttfts, spent = [], 0.0
    for c in chats:
        engine = Engine.start(settings)
        try:
            started = time.perf_counter()
            first = FirstToken(started)
            engine.submit(c, on_delta=first).result(timeout=None)
            ttfts.append(spent + first.seconds)
            spent += time.perf_counter() - started
        finally:
            engine.shutdown()
    return ttfts, spent


def first_question_ttft(settings: LoadSettings, chat: ChatRequest) -> float:
    engine = Engine.start(settings)
    try:
        first = FirstToken(time.perf_counter())
        engine.submit(chat, on_delta=first).result(timeout=None)
        return first.seconds
    finally:
        engine.shutdown()


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def run_documents_bench(options: DocumentBenchOptions, settings: LoadSettings) -> dict[str, Any]:
    doc = load_document(options)
    asked = questions(options.chats)
    with tempfile.TemporaryDirectory(prefix="chorus-bench-documents-") as scratch:
        base = replace(settings, n_seq_max=max(settings.n_seq_max, options.chats + 1), kv_cache_dir=None)
        engine = Engine.start(base)
        try:
            chats = prompts(engine, doc, asked, options.max_tokens)
            document_tokens = EngineTokens(engine).count(doc.text)
        finally:
            engine.shutdown()
        together = Engine.start(base)  # fresh: nothing cached
        try:
            at_once, computed, wall_at_once = run_at_once(together, chats)
        finally:
            together.shutdown()
        apart = Engine.start(base)
        try:
            sequential, wall_sequential = run_one_after_another(apart, chats)
        finally:
            apart.shutdown()
        uncached, wall_uncached = run_each_computing(base, chats) if options.uncached else ([], 0.0)
        cached = replace(base, kv_cache_dir=Path(scratch))
        saver = Engine.start(cached)  # the app pins the block while a chat uses it: saved to disk
        try:
            block = chats[0].messages[0]["content"]
            saver.pin_system_prompt(block).result(timeout=None)
        finally:
            saver.shutdown()
        restored = first_question_ttft(cached, chats[0])
        recomputed = first_question_ttft(base, chats[0])
    ideal = ideal_tokens(chats)
    return {
        "config": {"model": settings.model_path.name, "document": doc.name, "document_chars": len(doc.text),
                   "document_tokens": document_tokens, "chats": options.chats, "max_tokens": options.max_tokens,
                   "n_ctx": base.n_ctx, "threads": base.threads()},
        "prompt_tokens_computed": computed,
        "prompt_tokens_ideal": ideal,
        "prompt_tokens_without_sharing": sum(len(c.prompt_tokens or ()) for c in chats),
        "computed_vs_ideal": computed / ideal,
        "at_once": {"ttft_p50_s": statistics.median(at_once), "ttft_p95_s": p95(at_once), "wall_s": wall_at_once},
        "one_after_another": {"ttft_p50_s": statistics.median(sequential), "ttft_p95_s": p95(sequential),
                              "wall_s": wall_sequential},
        "ttft_p95_ratio": p95(at_once) / p95(sequential),
        "one_after_another_uncached": ({"ttft_p50_s": statistics.median(uncached), "ttft_p95_s": p95(uncached),
                                        "wall_s": wall_uncached} if uncached else None),
        "restart": {"ttft_restored_s": restored, "ttft_recompute_s": recomputed, "ratio": restored / recomputed},
    }


def render(report: dict[str, Any], as_json: bool) -> str:
    if as_json:
        return json.dumps(report, indent=2)
    c, once, seq, rs = report["config"], report["at_once"], report["one_after_another"], report["restart"]
    return "\n".join([
        f"model {c['model']}, {c['document']} ({c['document_tokens']} tokens), {c['chats']} questions, "
        f"{c['max_tokens']} tokens each",
        f"prompt tokens computed {report['prompt_tokens_computed']} / ideal {report['prompt_tokens_ideal']} "
        f"= {report['computed_vs_ideal']:.2f}x (without sharing: {report['prompt_tokens_without_sharing']})",
        f"at once:           {_timings(once)}",
        f"one after another: {_timings(seq)}",
        f"TTFT p95 at once / one after another: {report['ttft_p95_ratio']:.2f}x",
        *_uncached_lines(report),
        f"after a restart: TTFT {rs['ttft_restored_s']:.2f} s from the disk cache, {rs['ttft_recompute_s']:.2f} s "
        f"computed = {rs['ratio']:.2f}x",
    ])


def _timings(run: dict[str, float]) -> str:
    return f"TTFT p50 {run['ttft_p50_s']:.2f} s, p95 {run['ttft_p95_s']:.2f} s, wall {run['wall_s']:.1f} s"


def _uncached_lines(report: dict[str, Any]) -> list[str]:
    apart = report.get("one_after_another_uncached")
    if not apart:
        return []
    ratio = report["at_once"]["ttft_p95_s"] / apart["ttft_p95_s"]
    return [f"one after another, each computing the document: {_timings(apart)}",
            f"TTFT p95 at once / that: {ratio:.2f}x"]
