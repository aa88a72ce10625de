"""`chorus bench-images`: one image asked about by N chats at once, against the same questions
each encoding the image; the decode rate of text chats while images are prefilled beside
them; the first question about the image after a restart. All measured in one run.

The model needs its vision projector (LoadSettings.mmproj). The image is a generated 512x512
PNG (or --image FILE); each chat shows it, then asks its own question, so the prompt's shared
part is the template's head and the image.

- at once: N chats on one fresh engine, each prepared (the image encoded, on the asking
  thread, as the app and the server do) and submitted at the same moment; TTFT from then.
- encode each (the reference): the same chats one after another, each on a fresh engine (the
  engine's start left out of the clock), so each encodes the image and prefills its cells
  itself, as llama-server does per slot without a cache shared between requests.
- stall: 8 text chats decoding alone, against the same 8 while the N questions about the image
  are asked beside them (the image encoded and prefilled once), and while N chats each showing
  its own image are (N encodes and prefills): the text chats' tokens a second over the window
  from the images' submission to the last image chat's first token. For reference, the same
  questions about a text of about the image's tokens instead (the stall any prefill makes).
- restart: the first question about the image on a fresh engine that finds it in the disk
  prompt cache (the image's rows and the KV of a finished chat that showed it), against one
  without that cache.
"""

from __future__ import annotations

import base64
import io
import json
import math
import statistics
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from app.bench.documents import FirstToken, p95
from app.bench.workload import SENTENCES, TOPICS
from inference import ChatRequest, Delta, Engine, LoadSettings, SamplingParams

QUESTIONS = (
    "What is in this picture?", "Which colours does this image use most?", "Describe the shapes you see.",
    "Is there any text in the image?", "What could this picture be used for?", "Where is the brightest part?",
    "How many distinct objects are there?", "Give this image a short title.",
)
# The stall's reference: the same questions about a text of about an image's tokens (64 with
# the tests' tiny projector) instead of the image, prefilled beside the same text chats.
DESCRIPTION = " ".join(SENTENCES[:4])
TEXT_TOKENS = 96  # each text chat's reply in the stall runs (ignore_eos: all decode to the end)


@dataclass(frozen=True)
class ImageBenchOptions:
    image: Path | None = None  # None: a generated 512x512 PNG
    chats: int = 8
    max_tokens: int = 32
    text_chats: int = 8  # decoding in the stall runs
    text_tokens: int = TEXT_TOKENS


def generated_png(seed: int = 0, size: int = 512) -> bytes:
    """A 512x512 picture that is not flat (gradients, bands and boxes), different per seed."""
    from PIL import Image, ImageDraw

    image = Image.linear_gradient("L").resize((size, size)).convert("RGB")
    draw = ImageDraw.Draw(image)
    for i in range(6):
        k = seed * 7 + i
        x, y = (k * 83) % (size - 96), (k * 151) % (size - 96)
        draw.rectangle((x, y, x + 96, y + 64), fill=((k * 60) % 256, (k * 110) % 256, (200 - k * 30) % 256))
        draw.ellipse((y, x, y + 80, x + 80), outline=(255, (k * 40) % 256, 0), width=4)
    out = io.BytesIO()
    image.save(out, "PNG")
    return out.getvalue()


def image_chat(image: bytes, question: str, max_tokens: int) -> ChatRequest:
    """A user message showing the image, then asking: the image before the question, so
    chats about the same image share its cells."""
    url = f"data:image/png;base64,{base64.b64encode(image).decode()}"
    parts = [{"type": "image_url", "image_url": {"url": url}}, {"type": "text", "text": question}]
    return ChatRequest(messages=({"role": "user", "content": parts},),
                       sampling=SamplingParams.greedy(max_tokens))


def questions(n: int) -> list[str]:
    return [QUESTIONS[i % len(QUESTIONS)] + (f" ({i // len(QUESTIONS) + 1})" if i >= len(QUESTIONS) else "")
            for i in range(n)]


def run_at_once(engine: Engine, chats: list[ChatRequest]) -> tuple[list[float], float]:
    """Each chat prepared (its image encoded) and submitted on its own thread, all at once:
    TTFTs from that moment, wall time."""
    started = time.perf_counter()
    firsts = [FirstToken(started) for _ in chats]

    def ask(i: int) -> None:
        done = engine.submit(engine.prepare(chats[i]), on_delta=firsts[i]).result(timeout=None)
        if done.error:
            raise RuntimeError(done.error)

    with ThreadPoolExecutor(len(chats)) as pool:
        list(pool.map(ask, range(len(chats))))
    return [f.seconds for f in firsts], time.perf_counter() - started


def run_encode_each(settings: LoadSettings, chats: list[ChatRequest]) -> tuple[list[float], float, int]:
    """One after another, each on a fresh engine: each encodes the image and prefills its cells
    (nothing shared between requests). TTFTs from when all were asked, engine starts left out;
    the images the engines encoded, together."""
    ttfts, spent, encoded = [], 0.0, 0
    for chat in chats:
        engine = warm_engine(settings)
        try:
            started = time.perf_counter()
            first = FirstToken(started)
            engine.submit(engine.prepare(chat), on_delta=first).result(timeout=None)
            ttfts.append(spent + first.seconds)
            spent += time.perf_counter() - started
            encoded += engine.metrics(fresh=True).images_encoded
        finally:
            engine.shutdown()
    return ttfts, spent, encoded


def warm_engine(settings: LoadSettings) -> Engine:
    """A fresh engine that has run one short text request: a context's first decode costs
    seconds here (llama.cpp sets up its buffers), part of starting an engine, not of any
    question. The warm-up is too short to be saved in the disk prompt cache."""
    engine = Engine.start(settings)
    try:
        done = engine.submit(ChatRequest(messages=({"role": "user", "content": "Hi"},),
                                         sampling=SamplingParams.greedy(1))).result(timeout=None)
    except BaseException:
        engine.shutdown()
        raise
    if done.error:
        engine.shutdown()
        raise RuntimeError(done.error)
    return engine


class TokenTimes:
    """When each token of a request came (stamped on the engine thread)."""

    def __init__(self) -> None:
        self.at: list[float] = []
        self.first = threading.Event()

    def __call__(self, delta: Delta) -> None:
        if delta.token_ids:
            now = time.perf_counter()
            self.at.extend([now] * len(delta.token_ids))
            self.first.set()


def text_chats(n: int, max_tokens: int) -> list[ChatRequest]:
    return [ChatRequest(messages=({"role": "user", "content": f"Explain {TOPICS[i % len(TOPICS)]} in detail."},),
                        sampling=SamplingParams.greedy(max_tokens, ignore_eos=True)) for i in range(n)]


def decode_run(settings: LoadSettings, texts: list[ChatRequest], beside: list[ChatRequest]) -> dict[str, Any]:
    """The text chats on a fresh engine; once all decode, the `beside` chats (prepared and
    submitted on their own threads) if any. The text chats' rate over the window: from the
    images' submission to the last one's first token (or to the first text chat's end, if that
    came first: images_prefilled_in_window false); alone, from all decoding to the first text
    chat's end."""
    engine = warm_engine(settings)
    try:
        times = [TokenTimes() for _ in texts]
        handles = [engine.submit(c, on_delta=t) for c, t in zip(texts, times)]
        for t in times:
            t.first.wait()
        start = time.perf_counter()
        end = math.inf
        if beside:
            firsts = [FirstToken(start) for _ in beside]
            with ThreadPoolExecutor(len(beside)) as pool:
                list(pool.map(lambda i: engine.submit(engine.prepare(beside[i]), on_delta=firsts[i]).result(None),
                              range(len(beside))))
            end = start + max(f.seconds for f in firsts)
        for h in handles:
            h.result(timeout=None)
        encoded = engine.metrics(fresh=True).images_encoded
    finally:
        engine.shutdown()
    text_end = min(t.at[-1] for t in times)
    covered = not beside or text_end >= end  # every image prefilled while all text chats decoded
    end = end if beside and covered else text_end  # else the rate over the part they shared
    tokens = sum(sum(1 for a in t.at if start < a <= end) for t in times)
    return {"tok_s": tokens / (end - start), "window_s": end - start, "tokens": tokens, "images_encoded": encoded,
            "images_prefilled_in_window": covered}


def first_question(settings: LoadSettings, chat: ChatRequest) -> dict[str, Any]:
    """A fresh engine's first question: TTFT from asking (the image's encode or load
    included), what the engine encoded or read from disk."""
    engine = warm_engine(settings)
    try:
        first = FirstToken(time.perf_counter())
        done = engine.submit(engine.prepare(chat), on_delta=first).result(timeout=None)
        snap = engine.metrics(fresh=True)
    finally:
        engine.shutdown()  # writes the prompt cache files under way
    if done.error:
        raise RuntimeError(done.error)
    cached = done.stats.cached_tokens if done.stats is not None else 0
    return {"ttft_s": first.seconds, "images_encoded": snap.images_encoded, "images_loaded": snap.images_loaded,
            "tokens_restored": snap.prompt_tokens_restored, "cached_tokens": cached}


def run_images_bench(options: ImageBenchOptions, settings: LoadSettings) -> dict[str, Any]:
    if settings.mmproj is None:
        raise ValueError("bench-images needs the model's vision projector: --mmproj FILE")
    image = options.image.read_bytes() if options.image is not None else generated_png()
    chats = [image_chat(image, q, options.max_tokens) for q in questions(options.chats)]
    n_seq = max(options.chats, options.text_chats + options.chats) + 1
    with tempfile.TemporaryDirectory(prefix="chorus-bench-images-") as scratch:
        base = replace(settings, n_seq_max=max(settings.n_seq_max, n_seq), kv_cache_dir=None)
        together = warm_engine(base)  # fresh: nothing encoded, nothing cached
        try:
            at_once, wall_at_once = run_at_once(together, chats)
            encoded_at_once = together.metrics(fresh=True).images_encoded
            prompt = together.prepare(chats[0]).prompt_tokens or ()  # after the run: the image is cached
            image_tokens = sum(1 for t in prompt if t < 0)
        finally:
            together.shutdown()
        each, wall_each, encoded_each = run_encode_each(base, chats)
        texts = text_chats(options.text_chats, options.text_tokens)
        same = [image_chat(image, q, 1) for q in questions(options.chats)]
        others = [image_chat(generated_png(seed=1 + i), q, 1) for i, q in enumerate(questions(options.chats))]
        described = [ChatRequest(messages=({"role": "user", "content": f"{DESCRIPTION}\n\n{q}"},),
                                 sampling=SamplingParams.greedy(1)) for q in questions(options.chats)]
        alone = decode_run(base, texts, [])
        beside_text = decode_run(base, texts, described)
        beside = decode_run(base, texts, same)
        beside_distinct = decode_run(base, texts, others)
        cached = replace(base, kv_cache_dir=Path(scratch))
        seen = first_question(cached, chats[0])  # encodes the image; its rows and the chat are saved
        restored = first_question(cached, chats[1 % len(chats)])
        cold = first_question(base, chats[1 % len(chats)])
    return {
        "config": {"model": settings.model_path.name, "projector": Path(settings.mmproj).name,
                   "image": options.image.name if options.image else "generated 512x512 PNG",
                   "image_tokens": image_tokens, "prompt_tokens": len(prompt), "chats": options.chats,
                   "max_tokens": options.max_tokens, "text_chats": options.text_chats,
                   "text_tokens": options.text_tokens, "threads": base.threads()},
        "images_encoded": {"at_once": encoded_at_once, "encode_each": encoded_each},
        "at_once": {"ttft_p50_s": statistics.median(at_once), "ttft_p95_s": p95(at_once), "wall_s": wall_at_once},
        "encode_each": {"ttft_p50_s": statistics.median(each), "ttft_p95_s": p95(each), "wall_s": wall_each},
        "ttft_p95_ratio": p95(at_once) / p95(each),
        "decode_alone": alone,
        "decode_beside_images": beside,
        "decode_ratio": beside["tok_s"] / alone["tok_s"],
        "decode_beside_text": beside_text,
        "decode_ratio_text": beside_text["tok_s"] / alone["tok_s"],
        "decode_beside_distinct_images": beside_distinct,
        "decode_ratio_distinct": beside_distinct["tok_s"] / alone["tok_s"],
        "restart": {"first_seen": seen, "restored": restored, "cold": cold,
                    "ratio": restored["ttft_s"] / cold["ttft_s"]},
    }


def render(report: dict[str, Any], as_json: bool) -> str:
    if as_json:
        return json.dumps(report, indent=2)
    c, enc, rs = report["config"], report["images_encoded"], report["restart"]
    alone, beside = report["decode_alone"], report["decode_beside_images"]
    return "\n".join([
        f"model {c['model']} with {c['projector']}, {c['image']} ({c['image_tokens']} image tokens of "
        f"{c['prompt_tokens']}), {c['chats']} questions, {c['max_tokens']} tokens each",
        f"images encoded: at once {enc['at_once']}, encode each {enc['encode_each']} (goal: 1)",
        f"at once:     {_timings(report['at_once'])}",
        f"encode each: {_timings(report['encode_each'])}",
        f"TTFT p95 at once / encode each: {report['ttft_p95_ratio']:.2f}x (goal <= 0.3)",
        f"{c['text_chats']} text chats decoding: alone {alone['tok_s']:.1f} tok/s, beside {c['chats']} images "
        f"being prefilled {beside['tok_s']:.1f} tok/s over {beside['window_s']:.2f} s = "
        f"{report['decode_ratio']:.2f}x (goal >= 0.9)",
        f"  beside the same questions about a text instead of the image "
        f"{report['decode_beside_text']['tok_s']:.1f} tok/s = {report['decode_ratio_text']:.2f}x",
        f"  beside {c['chats']} distinct images (each encoded and prefilled) "
        f"{report['decode_beside_distinct_images']['tok_s']:.1f} tok/s over "
        f"{report['decode_beside_distinct_images']['window_s']:.2f} s = {report['decode_ratio_distinct']:.2f}x",
        f"after a restart: TTFT {rs['restored']['ttft_s']:.3f} s from the disk cache "
        f"({rs['restored']['tokens_restored']} tokens restored, {rs['restored']['images_loaded']} image loaded), "
        f"{rs['cold']['ttft_s']:.3f} s cold = {rs['ratio']:.2f}x (goal <= 0.2)",
    ])


def _timings(run: dict[str, float]) -> str:
    return f"TTFT p50 {run['ttft_p50_s']:.2f} s, p95 {run['ttft_p95_s']:.2f} s, wall {run['wall_s']:.1f} s"
