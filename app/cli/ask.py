"""`chorus ask FILE... -q QUESTION...`: every question about the same documents, each in a
chat of its own, all at once on one engine (decoded in the same batches, the documents'
prompt computed once), saved to the history like the app's chats."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

from app.chats.recorder import ReplyRecorder
from app.chats.store import open_chat_store
from app.chats.titles import stand_in_title
from app.cli.command import add_command
from app.cli.engine_args import add_model_args, library_defaults, resolve_model, settings_from_args
from app.documents import DocumentError, DocumentPrompt, VocabTokens, chat_prompt, extract_document, with_cited
from app.paths import kv_cache_dir
from inference import PRIORITY_VISIBLE_TAB, ChatRequest, Engine, ModelLoadError, RequestHandle, SamplingParams
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


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    ask = add_command(sub, "ask", run_ask, help="ask questions about files, each in its own chat, all at once")
    add_model_args(ask)
    ask.add_argument("files", nargs="+", metavar="FILE", help="documents: text, Markdown, code, PDF, DOCX, ...")
    ask.add_argument("-q", "--question", action="append", required=True, dest="questions",
                     help="a question (repeatable: each in its own chat)")
    ask.add_argument("--max-tokens", type=int, default=512)
    ask.add_argument("--json", action="store_true", help="print one JSON object with the answers and token counts")


def read_documents(paths: list[str]) -> list[NewDocument]:
    """Every file extracted before anything is stored: a bad one stops the command whole."""
    return [extract_document(Path(p)) for p in paths]


def run_ask(args: argparse.Namespace, data_dir: Path) -> int:
    try:
        documents = read_documents(args.files)
    except DocumentError as exc:
        print(f"chorus: {exc}", file=sys.stderr)
        return 2
    model = resolve_model(args, data_dir)
    db, repo = open_chat_store(data_dir)
    db.require_writable()
    try:
        engine = Engine.start(settings_from_args(args, model, library_defaults(data_dir, model),
                                                 kv_cache_dir=kv_cache_dir(data_dir)))
    except ModelLoadError as exc:
        db.close()
        print(f"chorus: {exc}", file=sys.stderr)
        return 2
    try:
        asked, pin_computed = _ask_all(engine, repo, model.name, documents, args.questions, args.max_tokens)
    finally:
        engine.shutdown()
        db.close()
    _print(asked, pin_computed, args.json)
    return 0


def _ask_all(engine: Engine, repo: ChatRepository, model: str, documents: list[NewDocument],
             questions: list[str], max_tokens: int) -> tuple[list[Asked], int]:
    docs = DocumentRepository(repo.db)
    counter = VocabTokens(engine.inputs)
    asked = [_start_chat(repo, docs, model, documents, q, counter, engine.inputs.n_ctx, max_tokens) for q in questions]
    pin_computed = 0
    block = asked[0].prompt.pinned_block
    if block is not None:  # computed once before the questions; kept in the disk prompt cache
        pinned = engine.pin_system_prompt(block).result(timeout=None)
        pin_computed = _computed(pinned.stats)
    sampling = SamplingParams(max_tokens=max_tokens)
    for a in asked:
        a.handle = engine.submit(ChatRequest(messages=a.prompt.messages, sampling=sampling,
                                             priority=PRIORITY_VISIBLE_TAB))
    for a in asked:
        recorder = ReplyRecorder(repo, a.reply_id)
        assert a.handle is not None
        for delta in a.handle:
            recorder.on_delta(delta)
            if delta.finished:
                a.computed = _computed(delta.stats)
        a.answer = recorder.text
    return asked, pin_computed


def _start_chat(repo: ChatRepository, docs: DocumentRepository, model: str, documents: list[NewDocument],
                question: str, counter: VocabTokens, n_ctx: int, max_tokens: int) -> Asked:
    conv = repo.create_conversation(title=stand_in_title(question), model_ref=model)
    user = repo.add_message(conv.id, "user", question, documents=tuple(documents))
    reply = repo.start_reply(conv.id, parent_id=user.id, model=model)
    path = repo.active_path(conv.id)
    before = path.messages[:-1]
    turns = tuple({"role": m.role, "content": m.content} for m in before)
    prompt = chat_prompt(turns, path, before, docs, counter, n_ctx, max_tokens)
    if prompt.sources:
        docs.set_sources(reply.id, prompt.sources)
    return Asked(question, conv.id, reply.id, prompt)


def _computed(stats) -> int:
    return max(0, stats.prompt_tokens - stats.cached_tokens) if stats is not None else 0


def _print(asked: list[Asked], pin_computed: int, as_json: bool) -> None:
    first = asked[0].prompt
    if as_json:
        out = {
            "answers": [{"question": a.question, "answer": a.answer, "conversation_id": a.conversation_id,
                         "citations": _citations(a)} for a in asked],
            "document_tokens": sum(d.tokens for d in first.documents),
            "prompt_tokens_computed": pin_computed + sum(a.computed for a in asked),
            "retrieval": any(a.prompt.retrieval for a in asked),
        }
        print(json.dumps(out, ensure_ascii=False, indent=2))
        return
    for a in asked:
        print(f"Q: {a.question}\nA: {a.answer.strip()}")
        for c in _citations(a):
            mark = "*" if c["cited"] else " "
            page = f", page {c['page']}" if c["page"] else ""
            print(f"  {mark}[{c['label']}] {c['document']}{page}")
        print(f"  (chat {a.conversation_id})\n")
    computed = pin_computed + sum(a.computed for a in asked)
    how = "excerpts retrieved" if any(a.prompt.retrieval for a in asked) else "whole"
    print(f"[{len(asked)} question(s), documents {how}, {computed} prompt tokens computed]", file=sys.stderr)


def _citations(a: Asked) -> list[dict]:
    return [{"label": s.label, "document": s.name, "page": s.page, "chunk": s.chunk_index, "cited": s.cited}
            for s in with_cited(a.prompt.sources, a.answer)]
