"""`chorus ask FILE... -q QUESTION...`: every question about the same documents and images,
each in a chat of its own, all at once on one engine (decoded in the same batches, the
documents' prompt computed once, each image encoded once), saved to the history like the
app's chats (an image attached as a document that keeps its bytes: app/cli/images.py)."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from app.chats.recorder import ReplyRecorder
from app.chats.store import open_chat_store
from app.cli.command import add_command
from app.cli.engine_args import add_model_args, library_defaults, resolve_model, settings_from_args
from app.cli.images import NO_PROJECTOR, ImageError, read_images, split_files
from app.conversations import ConversationSession, PromptBuilder, reply_request
from app.documents import DocumentError, DocumentPrompt, EngineTokens, extract_document
from app.paths import kv_cache_dir
from inference import PRIORITY_VISIBLE_TAB, EngineClient, ModelLoadError, RequestError, RequestHandle, SamplingParams

if TYPE_CHECKING:
    from inference import Engine
from storage import ChatRepository, DocumentRepository, NewDocument


@dataclass
class Asked:
    question: str
    conversation_id: int
    reply_id: int
    prompt: DocumentPrompt
    handle: RequestHandle | None = None
    answer: str = ""
    computed: int = 0  # prompt tokens this request computed (not found cached)
    image_tokens: int = 0  # the prompt's tokens that are images' rows
    error: str | None = None  # why the engine ended it (a prompt longer than the context...)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    ask = add_command(sub, "ask", run_ask, help="ask questions about files, each in its own chat, all at once")
    add_model_args(ask)
    ask.add_argument("files", nargs="+", metavar="FILE",
                     help="documents (text, Markdown, code, PDF, DOCX, ...) and images (PNG, JPEG, GIF, WebP, BMP: "
                          "with --mmproj)")
    ask.add_argument("-q", "--question", action="append", required=True, dest="questions",
                     help="a question (repeatable: each in its own chat)")
    ask.add_argument("--max-tokens", type=int, default=512)
    ask.add_argument("--json", action="store_true", help="print one JSON object with the answers and token counts")


def read_documents(paths: list[str]) -> list[NewDocument]:
    """Every file extracted before anything is stored: a bad one stops the command whole."""
    return [extract_document(Path(p)) for p in paths]


def run_ask(args: argparse.Namespace, data_dir: Path) -> int:
    document_paths, image_paths = split_files(args.files)
    if image_paths and not args.mmproj:
        print(f"chorus: {NO_PROJECTOR.format(name=image_paths[0])}", file=sys.stderr)
        return 2
    try:
        documents = read_documents(document_paths)
        images = read_images(image_paths)
    except (DocumentError, ImageError) as exc:
        print(f"chorus: {exc}", file=sys.stderr)
        return 2
    model = resolve_model(args, data_dir)
    db, repo = open_chat_store(data_dir)
    db.require_writable()
    try:
        from inference import Engine  # llama.cpp loads for this command alone, not at the CLI's start

        engine = Engine.start(settings_from_args(args, model, library_defaults(data_dir, model),
                                                 kv_cache_dir=kv_cache_dir(data_dir)))
    except ModelLoadError as exc:
        db.close()
        print(f"chorus: {exc}", file=sys.stderr)
        return 2
    try:
        asked, pin_computed = _ask_all(engine, repo, model.name, documents, images, args.questions,
                                       args.max_tokens)
        metrics = engine.metrics(fresh=True)
        counts = (metrics.images_encoded, metrics.images_loaded)
    finally:
        engine.shutdown()
        db.close()
    _print(asked, pin_computed, counts, args.json)
    return 1 if any(a.error for a in asked) else 0


def _ask_all(engine: Engine, repo: ChatRepository, model: str, documents: list[NewDocument],
             images: list[NewDocument], questions: list[str], max_tokens: int) -> tuple[list[Asked], int]:
    tokens = EngineTokens(engine), _n_ctx(engine)
    # Images are only read with a projector (run_ask refuses them without one).
    prompts = PromptBuilder(DocumentRepository(repo.db), lambda: tokens, show_images=True)
    sampling = SamplingParams(max_tokens=max_tokens)
    asked = [_start_chat(repo, prompts, model, [*documents, *images], q, sampling) for q in questions]
    pin_computed = 0
    block = asked[0].prompt.pinned_block
    if block is not None:  # computed once before the questions; kept in the disk prompt cache
        pinned = engine.pin_system_prompt(block).result(timeout=None)
        pin_computed = _computed(pinned.stats)
    for a in asked:
        chat = reply_request(a.prompt, sampling, priority=PRIORITY_VISIBLE_TAB)
        if images:  # encoded here (once: the projector's cache), the image rows counted
            try:
                chat = engine.prepare(chat)
            except RequestError:
                pass  # the engine ends the request with the same error, stored as its reply's
            a.image_tokens = sum(1 for t in chat.prompt_tokens or () if t < 0)
        a.handle = RequestHandle.open(engine, chat)
    for a in asked:
        recorder = ReplyRecorder(repo, a.reply_id, cite=a.prompt.cited_sources if a.prompt.sources else None)
        assert a.handle is not None
        for delta in a.handle:
            recorder.on_delta(delta)
            if delta.finished:
                a.computed = _computed(delta.stats)
                a.error = delta.error
        a.answer = recorder.text
    return asked, pin_computed


def _start_chat(repo: ChatRepository, prompts: PromptBuilder, model: str, documents: list[NewDocument],
                question: str, sampling: SamplingParams) -> Asked:
    session, started = ConversationSession.start(repo, question, documents, model=model)
    prompt = prompts.prompt(started.path, started.reply, sampling)  # the excerpts used stored as its sources
    return Asked(question, session.conversation_id, started.reply.id, prompt)


def _n_ctx(engine: EngineClient) -> int:
    return engine.info.n_ctx if engine.info is not None else 0


def _computed(stats) -> int:
    return max(0, stats.prompt_tokens - stats.cached_tokens) if stats is not None else 0


def _print(asked: list[Asked], pin_computed: int, images: tuple[int, int], as_json: bool) -> None:
    """images: how many images were encoded, and how many read from the disk cache instead."""
    first = asked[0].prompt
    if as_json:
        out = {
            "answers": [{"question": a.question, "answer": a.answer, "error": a.error,
                         "conversation_id": a.conversation_id, "citations": _citations(a)} for a in asked],
            "document_tokens": sum(d.tokens for d in first.documents),
            "prompt_tokens_computed": pin_computed + sum(a.computed for a in asked),
            "image_tokens": asked[0].image_tokens,  # in each question's prompt: the same images
            "images_encoded": images[0],
            "images_loaded": images[1],  # from the disk cache, an earlier run's encoding
            "retrieval": any(a.prompt.retrieval for a in asked),
        }
        print(json.dumps(out, ensure_ascii=False, indent=2))
        return
    for a in asked:
        print(f"Q: {a.question}\nA: {a.answer.strip()}" + (f"\n  (not answered: {a.error})" if a.error else ""))
        for c in _citations(a):
            mark = "*" if c["cited"] else " "
            page = f", page {c['page']}" if c["page"] else ""
            where = f", {c['where']}" if c["where"] else ""
            print(f"  {mark}[{c['label']}] {c['document']}{page}{where}")
        print(f"  (chat {a.conversation_id})\n")
    computed = pin_computed + sum(a.computed for a in asked)
    how = "excerpts retrieved" if any(a.prompt.retrieval for a in asked) else "whole"
    how = f"documents {how}, " if first.documents else ""  # images alone: no documents to speak of
    seen = (f", {asked[0].image_tokens} image tokens a prompt, {images[0]} image(s) encoded, "
            f"{images[1]} read from disk") if asked[0].image_tokens else ""
    print(f"[{len(asked)} question(s), {how}{computed} prompt tokens computed{seen}]", file=sys.stderr)


def _citations(a: Asked) -> list[dict]:
    return [{"label": s.label, "document": s.name, "page": s.page, "where": s.where, "chunk": s.chunk_index,
             "cited": s.cited, "text": text}
            for s, text in zip(a.prompt.cited_sources(a.answer), a.prompt.excerpt_texts)]
