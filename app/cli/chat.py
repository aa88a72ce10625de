"""A terminal chat on one engine: streams replies, keeps the conversation's KV warm, and
saves every turn in the chat database (the same one the desktop app uses). With --server,
the replies come from a remote OpenAI-compatible server instead, saved the same way."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from app.chats.recorder import ReplyRecorder
from app.chats.store import open_chat_store
from app.cli.chat_tool_args import add_tool_args, configured_servers
from app.cli.command import add_command
from app.cli.engine_args import add_model_args, library_defaults, resolve_model, settings_from_args
from app.cli.images import NO_PROJECTOR, ImageError, read_images, split_files
from app.cli.remote_replies import add_remote_args, connect
from app.conversations import ConversationSession, PromptBuilder, reply_request
from app.conversations.prompt import Tokens
from app.documents import DocumentError, EngineTokens, TokenCounter, extract_document
from app.engines.remote import RemoteError
from app.engines.sources import ModelSource
from app.paths import kv_cache_dir
from app.tools import McpConfigError
from inference import (
    PRIORITY_VISIBLE_TAB,
    SAMPLING_FIELDS,
    Delta,
    EngineClient,
    ModelLoadError,
    RequestHandle,
    SamplingParams,
)
from storage import (
    ChatRepository,
    DiskFull,
    DocumentRepository,
    MessageStatus,
    NewDocument,
    NotFoundError,
)

if TYPE_CHECKING:  # chat_tools brings the MCP SDK: imported only when a chat has servers
    from app.cli.chat_tools import TerminalTools

HELP = "commands: /reset (new conversation), /system TEXT, /quit"
T = TypeVar("T")


class Conversation:
    """The conversation being typed into: its session once it is stored (the rows it writes
    and the prompts it builds are the window's: app/conversations/), and what its first
    message will carry.

    label: the model as a reply records it; model_ref: as the conversation records it (a
    remote server's source key, so that the app continues it on the same server)."""

    def __init__(self, repo: ChatRepository, label: str, model_ref: str | None = None) -> None:
        self.repo = repo
        self.model_name = label
        self.model_ref = model_ref or label
        self.session: ConversationSession | None = None
        self.system: str | None = None
        # --attach: the documents go with the next message, then stay in every prompt.
        self.to_attach: tuple[NewDocument, ...] = ()
        self.sees_images = False

    @property
    def id(self) -> int | None:
        return self.session.conversation_id if self.session is not None else None

    def start(self, system: str | None) -> None:
        self.session, self.system = None, system

    def attach(self, documents: list[NewDocument]) -> None:
        self.to_attach = (*self.to_attach, *documents)

    def load(self, conversation_id: int) -> None:
        path = self.repo.active_path(conversation_id)
        self.session = ConversationSession(self.repo, conversation_id, lambda _conv: self.model_name)
        self.system = next((m.content for m in path.messages if m.role == "system"), None)

    def message_count(self) -> int:
        """The messages of its branch a prompt carries (an errored reply is left out)."""
        if self.id is None:
            return 0
        return sum(1 for m in self.repo.active_path(self.id).messages
                   if m.status is not MessageStatus.ERROR and (m.content or m.tool_calls))

    @property
    def saved(self) -> ConversationSession:
        """Its session; there is one once a message was added."""
        if self.session is None:
            raise RuntimeError("the conversation has no message yet")
        return self.session

    def add_user(self, text: str) -> int:
        """Stores the message (and, first, the conversation and its system prompt, in one
        transaction). A write that fails (DiskFull) leaves what was stored stored and the
        rest to a second call with the same text."""
        if self.session is None:
            self.session, message = ConversationSession.open(self.repo, text, self.to_attach, self.system,
                                                             model=self.model_ref, label=self.model_name)
        else:
            message = self.session.ask(text, self.to_attach)
        self.to_attach = ()
        return message.id

    def prompts(self, tokens: Tokens) -> PromptBuilder:
        """Its prompts, built as the window builds them; tokens: the engine's counter and
        context, for its documents."""
        return PromptBuilder(DocumentRepository(self.repo.db), tokens, show_images=self.sees_images)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    chat = add_command(sub, "chat", run_chat, help="chat in the terminal, streaming")
    add_model_args(chat)
    add_remote_args(chat)
    chat.add_argument("--system", default=None, help="system prompt")
    add_sampling_args(chat)
    chat.add_argument("--conversation", type=int, default=None, help="continue a saved conversation")
    chat.add_argument("--attach", action="append", default=[], metavar="FILE",
                      help="a document for the chat (repeatable): text, Markdown, code, PDF, DOCX, ...; "
                           "or an image (PNG, JPEG, GIF, WebP, BMP), with --mmproj")
    add_tool_args(chat)


def add_sampling_args(parser: argparse.ArgumentParser) -> None:
    """An option for each sampling field the engine's table gives the terminal chat
    (--temperature, --top-k, --max-tokens, --seed...), with the engine's default."""
    for field in SAMPLING_FIELDS:
        if field.cli:
            kind: dict[str, Any] = {"action": argparse.BooleanOptionalAction} if field.kind is bool else \
                {"type": field.kind}
            parser.add_argument("--" + field.name.replace("_", "-"), default=field.default, help=field.tip, **kind)


def sampling_from_args(args: argparse.Namespace) -> SamplingParams:
    return SamplingParams(**{field.name: getattr(args, field.name) for field in SAMPLING_FIELDS if field.cli})


def run_chat(args: argparse.Namespace, data_dir: Path) -> int:
    problem = _image_problem(args)
    if problem is not None:
        print(f"chorus: {problem}", file=sys.stderr)
        return 2
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
    source = ModelSource.remote(remote.endpoint.base_url, remote.endpoint.model)
    return _run(args, data_dir, source.label, source.key, lambda: (remote, source.base_url))


def _image_problem(args: argparse.Namespace) -> str | None:
    """Why the --attach images cannot be shown (before any model is looked for); None: they can."""
    images = split_files(args.attach)[1]
    if images and args.server is not None:
        return None  # sent as image_url parts: the server says whether its model sees them
    if images and not args.mmproj:
        return NO_PROJECTOR.format(name=images[0])
    return None


def _run_local(args: argparse.Namespace, data_dir: Path) -> int:
    model = resolve_model(args, data_dir)

    def start() -> tuple[EngineClient, str]:
        from inference import Engine  # llama.cpp loads for this command alone, not at the CLI's start

        engine = Engine.start(settings_from_args(args, model, library_defaults(data_dir, model),
                                                 kv_cache_dir=kv_cache_dir(data_dir)))
        return engine, engine.info.description if engine.info is not None else "the engine"

    return _run(args, data_dir, model.name, model.name, start)


def _run(args: argparse.Namespace, data_dir: Path, label: str, model_ref: str,
         start: Callable[[], tuple[EngineClient, str]]) -> int:
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
        document_paths, image_paths = split_files(args.attach)
        conv.attach([*(extract_document(Path(p)) for p in document_paths), *read_images(image_paths)])
        conv.sees_images = args.server is not None or bool(args.mmproj)
        servers = configured_servers(args)
    except (NotFoundError, DocumentError, ImageError, McpConfigError) as exc:
        print(f"chorus: {exc}", file=sys.stderr)
        return 2
    tools = _start_tools(servers, args) if servers or args.tools else None  # before the model: their errors first
    try:
        engine, where = start()
    except ModelLoadError as exc:
        print(f"chorus: {exc}", file=sys.stderr)
        if tools is not None:
            tools.shutdown()
        return 2
    print(f"Chorus chat on {where} ({label}). {HELP}", file=sys.stderr)
    if conv.id is not None:
        print(f"continuing conversation {conv.id} ({conv.message_count()} messages)", file=sys.stderr)
    sampling = sampling_from_args(args)
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


def _loop(engine: EngineClient, conv: Conversation, sampling: SamplingParams, tools: TerminalTools | None) -> None:
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
        if _stream_reply(engine, conv, user_id, sampling) is None:
            return


def _start_tools(servers: list, args: argparse.Namespace) -> TerminalTools:
    from app.cli.chat_tools import TerminalTools

    return TerminalTools.start(servers, args)


def _tool_reply(engine: EngineClient, conv: Conversation, sampling: SamplingParams, tools: TerminalTools) -> bool:
    """The reply with tools; False when a part could not be saved and the user gave up."""
    session = conv.saved
    prompt = conv.prompts(partial(_counter, engine)).prompt_after(session.active_path(), sampling)
    added = tools.reply(engine, session, list(prompt.messages), sampling, _until_saved, _report)
    return added is not None


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


def _stream_reply(engine: EngineClient, conv: Conversation, user_id: int, sampling: SamplingParams) -> str | None:
    """The reply, streamed and saved; None when it could not be saved and the user gave up."""
    session = conv.saved
    started = _until_saved(lambda: session.reply_after(user_id), "your message's reply")
    if started is None:
        return None
    prompts = conv.prompts(partial(_counter, engine))  # it stores the excerpts it used as the reply's sources
    prompt = _until_saved(lambda: prompts.prompt(started.path, started.reply, sampling), "the reply's sources")
    if prompt is None:
        return None
    recorder = ReplyRecorder(conv.repo, started.reply.id, cite=prompt.cited_sources if prompt.sources else None)
    chat = reply_request(prompt, sampling, priority=PRIORITY_VISIBLE_TAB)
    handle = RequestHandle.open(engine, chat)
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


def _counter(engine: EngineClient) -> tuple[TokenCounter, int | None]:
    """The engine counts documents (a local one with its model's vocabulary; a server's guesses)."""
    return EngineTokens(engine), engine.info.n_ctx if engine.info is not None else None


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
