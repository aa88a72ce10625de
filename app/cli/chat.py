"""A terminal chat on one engine: streams replies, keeps the conversation's KV warm, and
saves every turn in the chat database (the same one the desktop app uses). With --server,
the replies come from a remote OpenAI-compatible server instead, saved the same way."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeVar

from app.chats.reasoning import strip_reasoning
from app.chats.recorder import ReplyRecorder
from app.chats.store import open_chat_store
from app.cli.chat_tool_args import add_tool_args, configured_servers
from app.cli.command import add_command
from app.cli.engine_args import add_model_args, library_defaults, resolve_model, settings_from_args
from app.cli.remote_replies import add_remote_args, connect
from app.documents import DocumentError, GuessedTokens, TokenCounter, VocabTokens, build_prompt, extract_document
from app.engines.remote import RemoteError
from app.paths import kv_cache_dir
from app.tools import McpConfigError, chat_message, plain_turns
from inference import PRIORITY_VISIBLE_TAB, ChatRequest, Delta, Engine, ModelLoadError, SamplingParams
from storage import (
    ChatRepository,
    DiskFull,
    DocumentRecord,
    DocumentRepository,
    MessageStatus,
    NewDocument,
    NotFoundError,
)

if TYPE_CHECKING:  # chat_tools brings the MCP SDK: imported only when a chat has servers
    from app.cli.chat_tools import TerminalTools

HELP = "commands: /reset (new conversation), /system TEXT, /quit"
TITLE_CHARS = 60
T = TypeVar("T")


class Conversation:
    """The conversation being typed into: its id in storage and its messages so far.

    label: the model as a reply records it; model_ref: as the conversation records it (a
    remote server's source key, so that the app continues it on the same server)."""

    def __init__(self, repo: ChatRepository, label: str, model_ref: str | None = None) -> None:
        self.repo = repo
        self.model_name = label
        self.model_ref = model_ref or label
        self.id: int | None = None
        self.messages: list[dict] = []
        self.system: str | None = None
        # --attach: the documents go with the first message, then stay in every prompt.
        self.documents: list[DocumentRecord] = []
        self.to_attach: tuple[NewDocument, ...] = ()

    def start(self, system: str | None) -> None:
        self.id, self.messages, self.system, self.documents = None, [], system, []

    def attach(self, documents: list[NewDocument]) -> None:
        self.to_attach = (*self.to_attach, *documents)

    def load(self, conversation_id: int) -> None:
        path = self.repo.active_path(conversation_id)
        self.id = conversation_id
        self.messages = [  # a reply's reasoning is stored, not sent again (app/chats/reasoning.py)
            chat_message(m, strip_reasoning(m.content) if m.role == "assistant" else m.content)
            for m in path.messages
            if m.status is not MessageStatus.ERROR and (m.content or m.tool_calls)
        ]
        self.system = next((m["content"] for m in self.messages if m["role"] == "system"), None)
        docs = DocumentRepository(self.repo.db)
        self.documents = [docs.document(a.sha256) for a in docs.conversation_documents(conversation_id)]

    @property
    def saved_id(self) -> int:
        """Its id in storage; there is one once a message was added."""
        if self.id is None:
            raise RuntimeError("the conversation has no message yet")
        return self.id

    def add_user(self, text: str) -> int:
        """Stores the message (and, first, the conversation and its system prompt), then
        holds it. A write that fails (DiskFull) leaves what was stored stored and the rest
        to a second call with the same text."""
        if self.id is None:
            self.id = self.repo.create_conversation(title=text[:TITLE_CHARS], model_ref=self.model_ref).id
        if self.system and not self.messages:
            self.repo.add_message(self.id, "system", self.system)
            self.messages.append({"role": "system", "content": self.system})
        message_id = self.repo.add_message(self.id, "user", text, documents=self.to_attach).id
        if self.to_attach:
            docs = DocumentRepository(self.repo.db)
            self.documents += [docs.document(d.sha256) for d in self.to_attach
                               if all(d.sha256 != have.sha256 for have in self.documents)]
            self.to_attach = ()
        self.messages.append({"role": "user", "content": text})
        return message_id

    def prompt(self, counter: TokenCounter, n_ctx: int | None, reply_tokens: int | None) -> tuple[dict, ...]:
        """The engine's messages: the turns (tool calls and results as text), with the attached
        documents whole or as excerpts."""
        turns = plain_turns(self.messages)
        if not self.documents:
            return tuple(turns)
        search = DocumentRepository(self.repo.db).best_chunks
        return build_prompt(turns, self.documents, counter, n_ctx, reply_tokens, search).messages


class ReplyHandle(Protocol):
    """A reply streaming in: a local engine's RequestHandle or a remote server's reply."""

    def __iter__(self) -> Iterator[Delta]: ...

    def cancel(self) -> None: ...


class Replies(Protocol):
    def submit(self, chat: ChatRequest) -> ReplyHandle: ...

    def shutdown(self) -> None: ...


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    chat = add_command(sub, "chat", run_chat, help="chat in the terminal, streaming")
    add_model_args(chat)
    add_remote_args(chat)
    chat.add_argument("--system", default=None, help="system prompt")
    chat.add_argument("--max-tokens", type=int, default=512)
    chat.add_argument("--temperature", type=float, default=0.7)
    chat.add_argument("--seed", type=int, default=None)
    chat.add_argument("--conversation", type=int, default=None, help="continue a saved conversation")
    chat.add_argument("--attach", action="append", default=[], metavar="FILE",
                      help="a document for the chat (repeatable): text, Markdown, code, PDF, DOCX, ...")
    add_tool_args(chat)


def run_chat(args: argparse.Namespace, data_dir: Path) -> int:
    if args.server is None:
        if args.api_key or args.remote_model:
            print("chorus: --api-key and --remote-model go with --server URL", file=sys.stderr)
            return 2
        return _run_local(args, data_dir)
    try:
        remote = connect(args)
    except (ValueError, RemoteError) as exc:
        print(f"chorus: {exc}", file=sys.stderr)
        return 2
    source = remote.source
    return _run(args, data_dir, source.label, source.key, lambda: (remote, source.base_url))


def _run_local(args: argparse.Namespace, data_dir: Path) -> int:
    model = resolve_model(args, data_dir)

    def start() -> tuple[Replies, str]:
        engine = Engine.start(settings_from_args(args, model, library_defaults(data_dir, model),
                                                 kv_cache_dir=kv_cache_dir(data_dir)))
        return engine, engine.info.description if engine.info is not None else "the engine"

    return _run(args, data_dir, model.name, model.name, start)


def _run(args: argparse.Namespace, data_dir: Path, label: str, model_ref: str,
         start: Callable[[], tuple[Replies, str]]) -> int:
    """The chat, once the model is known: the conversation is opened before the engine
    starts, so a wrong --conversation costs no model load."""
    db, repo = open_chat_store(data_dir)
    db.require_writable()  # read-only: one line (main's), before the model loads
    conv = Conversation(repo, label, model_ref)
    try:
        if args.conversation is not None:
            conv.load(args.conversation)
        else:
            conv.start(args.system)
        conv.attach([extract_document(Path(p)) for p in args.attach])
        servers = configured_servers(args)
    except (NotFoundError, DocumentError, McpConfigError) as exc:
        print(f"chorus: {exc}", file=sys.stderr)
        return 2
    tools = _start_tools(servers, args) if servers else None  # before the model: their errors first
    try:
        engine, where = start()
    except ModelLoadError as exc:
        print(f"chorus: {exc}", file=sys.stderr)
        if tools is not None:
            tools.shutdown()
        return 2
    print(f"Chorus chat on {where} ({label}). {HELP}", file=sys.stderr)
    if conv.id is not None:
        print(f"continuing conversation {conv.id} ({len(conv.messages)} messages)", file=sys.stderr)
    sampling = SamplingParams(max_tokens=args.max_tokens, temperature=args.temperature, seed=args.seed)
    try:
        _loop(engine, conv, sampling, tools)
    finally:
        engine.shutdown()
        if tools is not None:
            tools.shutdown()
        db.close()
    if conv.id is not None:
        again = f" --server {args.server}" if args.server else ""
        print(f"saved as conversation {conv.id}; continue with: chorus chat{again} --conversation {conv.id}",
              file=sys.stderr)
    return 0


def _loop(engine: Replies, conv: Conversation, sampling: SamplingParams, tools: TerminalTools | None) -> None:
    while True:
        try:
            line = input("you> ")
        except (EOFError, KeyboardInterrupt):
            return
        text = line.strip()
        if not text:
            continue
        if text in ("/quit", "/exit"):
            return
        if text == "/reset":
            conv.start(conv.system)
            continue
        if text.startswith("/system"):
            conv.start(text[len("/system"):].strip() or None)
            continue
        user_id = _until_saved(partial(conv.add_user, text), "your message")
        if user_id is None:
            return
        if tools is not None:
            if not _tool_reply(engine, conv, sampling, tools):
                return
            continue
        reply = _stream_reply(engine, conv, user_id, sampling)
        if reply is None:
            return
        conv.messages.append({"role": "assistant", "content": strip_reasoning(reply)})


def _start_tools(servers: list, args: argparse.Namespace) -> TerminalTools:
    from app.cli.chat_tools import TerminalTools

    return TerminalTools.start(servers, args)


def _tool_reply(engine: Replies, conv: Conversation, sampling: SamplingParams, tools: TerminalTools) -> bool:
    """The reply with tools; False when a part could not be saved and the user gave up."""
    counter, n_ctx = _counter(engine)
    added = tools.reply(engine, conv.repo, conv.saved_id, conv.model_name, list(conv.prompt(counter, n_ctx,
                        sampling.max_tokens)), sampling, _until_saved, _report)
    if added is None:
        return False
    conv.messages += [{**m, "content": strip_reasoning(m["content"])} if m["role"] == "assistant" else m
                      for m in added]
    return True


def _until_saved(write: Callable[[], T], what: str) -> T | None:
    """write(), and on a full disk the same write again each time the user presses Enter,
    with what it saves kept in memory meanwhile; None when they give up (/quit, end of
    input): the chat ends and says what was not saved."""
    while True:
        try:
            return write()
        except DiskFull as exc:
            print(f"chorus: {exc} ({what} is kept in memory): press Enter to try again, /quit to give up",
                  file=sys.stderr)
        try:
            answer = input("").strip()
        except (EOFError, KeyboardInterrupt):
            answer = "/quit"
        if answer in ("/quit", "/exit"):
            print(f"chorus: {what} was not saved", file=sys.stderr)
            return None


def _stream_reply(engine: Replies, conv: Conversation, user_id: int, sampling: SamplingParams) -> str | None:
    """The reply, streamed and saved; None when it could not be saved and the user gave up."""
    record = _until_saved(lambda: conv.repo.start_reply(conv.saved_id, parent_id=user_id, model=conv.model_name),
                          "your message's reply")
    if record is None:
        return None
    recorder = ReplyRecorder(conv.repo, record.id)
    counter, n_ctx = _counter(engine)
    messages = conv.prompt(counter, n_ctx, sampling.max_tokens)
    handle = engine.submit(ChatRequest(messages=messages, sampling=sampling, priority=PRIORITY_VISIBLE_TAB))
    sys.stdout.write("bot> ")
    try:
        for delta in handle:
            _show(recorder, delta)
            if delta.finished:
                _report(delta)
    except KeyboardInterrupt:
        handle.cancel()
        if not recorder.finished:
            for delta in handle:  # what was still on its way, up to the cancelled end
                _show(recorder, delta)
        print("\n[stopped]", file=sys.stderr)
    if recorder.end_unsaved and _until_saved(recorder.save_end_again, "the reply") is None:
        return None
    return recorder.text


def _counter(engine: Replies) -> tuple[TokenCounter, int | None]:
    """A local engine counts documents with its model's vocabulary; a server's are guessed."""
    if isinstance(engine, Engine):
        return VocabTokens(engine.inputs), engine.inputs.n_ctx
    return GuessedTokens(), None


def _show(recorder: ReplyRecorder, delta: Delta) -> None:
    """Saved and shown alike: what the person saw is what the history keeps. The end of a
    reply on a full disk stays in the recorder, to be saved again after it is shown."""
    try:
        recorder.on_delta(delta)
    except DiskFull:
        if not recorder.end_unsaved:
            raise
    if delta.text:
        sys.stdout.write(delta.text)
        sys.stdout.flush()


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
    # A remote server that sends no usage leaves the prompt uncounted (0): not worth a line.
    cached = f"{s.cached_tokens}/{s.prompt_tokens} prompt tokens cached, " if s.prompt_tokens else ""
    print(f"[{s.generated_tokens} tokens, first after {ttft}, {rate}, {cached}{delta.finish_reason.value}]",
          file=sys.stderr)
