"""A terminal chat on one engine: streams replies, keeps the conversation's KV warm."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from app.engine_settings import settings_from_args
from inference import ChatRequest, ModelLoadError, SamplingParams
from inference.engine import Engine

HELP = "commands: /reset (new conversation), /system TEXT, /quit"


def run_chat(args: argparse.Namespace, model: Path) -> int:
    try:
        engine = Engine.start(settings_from_args(args, model))
    except ModelLoadError as exc:
        print(f"chorus: {exc}", file=sys.stderr)
        return 2
    print(f"Chorus chat on {engine.info.description} ({model.name}). {HELP}", file=sys.stderr)
    system = args.system
    messages: list[dict] = _fresh(system)
    sampling = SamplingParams(max_tokens=args.max_tokens, temperature=args.temperature, seed=args.seed)
    try:
        while True:
            try:
                line = input("you> ")
            except EOFError:
                break
            text = line.strip()
            if not text:
                continue
            if text in ("/quit", "/exit"):
                break
            if text == "/reset":
                messages = _fresh(system)
                continue
            if text.startswith("/system"):
                system = text[len("/system"):].strip() or None
                messages = _fresh(system)
                continue
            messages.append({"role": "user", "content": text})
            reply = _stream_reply(engine, messages, sampling)
            messages.append({"role": "assistant", "content": reply})
    except KeyboardInterrupt:
        pass
    finally:
        engine.shutdown()
    return 0


def _fresh(system: str | None) -> list[dict]:
    return [{"role": "system", "content": system}] if system else []


def _stream_reply(engine: Engine, messages: list[dict], sampling: SamplingParams) -> str:
    handle = engine.submit(ChatRequest(messages=tuple(messages), sampling=sampling, priority=1))
    parts: list[str] = []
    sys.stdout.write("bot> ")
    try:
        for delta in handle:
            if delta.text:
                parts.append(delta.text)
                sys.stdout.write(delta.text)
                sys.stdout.flush()
            if delta.finished:
                _report(delta)
    except KeyboardInterrupt:
        handle.cancel()
        handle.result(timeout=10)
        print("\n[stopped]", file=sys.stderr)
    return "".join(parts)


def _report(delta) -> None:
    print()
    if delta.error:
        print(f"[error: {delta.error}]", file=sys.stderr)
        return
    s = delta.stats
    if s is None:
        return
    rate = f"{s.decode_tok_s:.0f} tok/s" if s.decode_tok_s else "-"
    ttft = f"{s.ttft_s:.2f}s" if s.ttft_s is not None else "-"
    print(
        f"[{s.generated_tokens} tokens, first after {ttft}, {rate}, "
        f"{s.cached_tokens}/{s.prompt_tokens} prompt tokens cached, {delta.finish_reason.value}]",
        file=sys.stderr,
    )
