"""The input processor: chat -> checked prompt tokens, on any thread. Every door into the
engine (EngineCore.add_request, Engine.prepare off the engine thread, the engine process's
preparer, the app's server gateway) renders, tokenizes and checks a request here, so a
chat gets the same tokens whichever way it came.

Only the template's markup makes control tokens.

Tokenizing the rendered chat with llama.cpp's parse_special would turn a user's literal
"<|im_end|>" into the end-of-turn token, letting message text forge turns of other roles.
So the chat is rendered once with each message's content replaced by a sentinel; the
render splits at the sentinels into the template's markup and the contents; special-token
strings are looked for in the markup alone (llama.cpp's special partition: control,
user-defined and unknown tokens); and every run of plain text between them (markup text
and contents together) is tokenized without parse_special. For a chat whose contents hold
no special strings the tokens are exactly what tokenizing the whole render gives.

Needs only a Vocabulary: a vocab-only model file (worker/vocab_loader.py: no weights), or
the runner of a loaded model. Thread-safe: llama.cpp's vocabulary is read-only.
"""

from __future__ import annotations

import json
import logging
import re
import secrets
from dataclasses import replace

from inference.errors import RequestError
from inference.params import ChatRequest, ImageEmbedding, image_slot_row
from inference.tokenizer.chat_template import ChatTemplate, builtin_template
from inference.tokenizer.content_parts import ImageSource, has_parts, with_image_markers
from inference.tokenizer.overflow import DROP_OLDEST, OVERFLOW_POLICIES, STOP, Fitted, fit, reply_room
from inference.tokenizer.special_split import Piece, Special, SpecialMatcher, merge_runs
from inference.tokenizer.vocab import OwnedVocab, Vocabulary

log = logging.getLogger(__name__)

# Two first user messages for deriving a shared prefix: they differ at their first
# character and their first tokens differ in the tokenizers checked (SmolLM2's ChatML,
# Gemma 3), so the two renders part exactly where the user's text starts.
PREFIX_PROBES = ("A", "Z")


def template_for(vocab: Vocabulary, override: str | None = None) -> ChatTemplate:
    """The model's chat template: the override when given (LoadSettings.chat_template, a
    per-model default of the library), else the GGUF's own, else the builtin one of its
    architecture. The vocabulary's special tokens fill bos_token/eos_token either way."""
    return ChatTemplate(
        override or vocab.chat_template() or builtin_template(vocab.metadata("general.architecture")),
        bos_token=vocab.special_text(vocab.bos_token),
        eos_token=vocab.special_text(vocab.eos_token),
    )


class InputProcessor:
    """Renders chats with the model's template, tokenizes and checks them (any thread)."""

    def __init__(self, vocab: Vocabulary, n_ctx: int, template: ChatTemplate | None = None,
                 images: ImageSource | None = None) -> None:
        self.vocab = vocab
        self.images = images  # the model's vision projector, if it has one
        self.n_ctx = n_ctx
        self.template = template or template_for(vocab)
        self._matcher = SpecialMatcher(vocab.special_tokens())
        self._nonce = _new_nonce()

    @classmethod
    def for_vocab(cls, vocab: Vocabulary, n_ctx: int, chat_template: str | None = None,
                  images: ImageSource | None = None) -> InputProcessor:
        """With the model's own template, or chat_template instead (see template_for)."""
        return cls(vocab, n_ctx, template_for(vocab, chat_template), images)

    def close(self) -> None:
        if isinstance(self.vocab, OwnedVocab):
            self.vocab.close()

    # ----- what callers use ------------------------------------------------------------

    def prepare(self, chat: ChatRequest) -> ChatRequest:
        """The chat with prompt_tokens set: rendered and tokenized here, on the caller's
        thread, or, when they came set (prepared earlier, or given by the caller), checked.
        Raises RequestError for a chat the engine would refuse."""
        chat.sampling.validate()
        if chat.overflow not in OVERFLOW_POLICIES:
            raise RequestError(f"overflow must be one of {', '.join(OVERFLOW_POLICIES)}, not {chat.overflow!r}")
        if chat.prompt_tokens is not None:
            self.check_prompt(list(chat.prompt_tokens), chat.images)
            return chat
        images: dict[int, ImageEmbedding] = {}
        fitted = self.fitted(chat, images)
        shown = _shown_images(fitted.tokens, images) if images else ()
        return replace(chat, prompt_tokens=tuple(fitted.tokens), dropped=fitted.dropped, images=shown)

    def prepare_text(self, text: str, parse_special: bool = True) -> list[int]:
        """A raw prompt's tokens (/v1/completions), checked: RequestError for text that
        cannot fit in the context (refused without tokenizing it)."""
        tokens = self.text_tokens(text, parse_special)
        self.check_prompt(tokens)
        return tokens

    def prompt_tokens(self, chat: ChatRequest) -> list[int]:
        """The prompt of a chat request: fitted to the context as its overflow says, checked."""
        return self.fitted(chat).tokens

    def fitted(self, chat: ChatRequest, images: dict[int, ImageEmbedding] | None = None) -> Fitted:
        """The chat's prompt under its overflow policy and which messages it left out, checked.
        images: filled with the encoded images the messages show, by marker number (a chat
        with images needs it)."""
        messages = list(chat.messages)
        tools = list(chat.tools) if chat.tools is not None else None
        embedded = images if images is not None else {}
        if has_parts(messages):
            if chat.pin:
                raise RequestError("a pinned prefix cannot hold images yet")
            messages = self._embed_images(messages, embedded)
        if chat.pin:
            fitted = Fitted(self.shared_prefix_tokens(messages))
        elif chat.overflow == STOP:
            fitted = Fitted(self.chat_tokens(messages, continue_final=chat.continue_final, limit=self.n_ctx,
                                             tools=tools, images=embedded))
        else:
            fitted = self.fit_messages(messages, chat.sampling.max_tokens, chat.overflow, chat.continue_final, tools,
                                       embedded)
        self.check_prompt(fitted.tokens, tuple(embedded.values()))
        return fitted

    def _embed_images(self, messages: list[dict], embedded: dict[int, ImageEmbedding]) -> list[dict]:
        """Messages with list contents made text, each image a marker; the images encoded
        (or found in the projector's cache) into embedded, by marker number."""
        marked, datas = with_image_markers(messages, f"\ue000{self._nonce}:img{{}}\ue001")
        if datas and self.images is None:
            raise RequestError("this model cannot see images: it was loaded without a vision projector (mmproj)")
        for k, data in enumerate(datas):
            assert self.images is not None
            embedded[k] = self.images.embed(data)
        return marked

    def system_prefix_tokens(self, system_prompt: str) -> list[int]:
        """The tokens every chat with this system prompt starts with (what pinning caches)."""
        return self.shared_prefix_tokens([{"role": "system", "content": system_prompt}])

    def shared_prefix_tokens(self, messages: list[dict]) -> list[int]:
        """The tokens every chat that starts with these messages and goes on with a user
        message begins with, for any template: the common prefix of two such renders.
        Rendering the messages alone is not it: a template without a system role (Gemma)
        puts the system text in the first user turn, so a system-only render is just BOS;
        a template with one adds the next turn's opening markup too."""
        first, second = (
            self.chat_tokens([*messages, {"role": "user", "content": probe}], limit=self.n_ctx)
            for probe in PREFIX_PROBES
        )
        return first[:common_prefix_len(first, second)]

    def fit_messages(self, messages: list[dict], max_tokens: int, policy: str = DROP_OLDEST,
                     continue_final: bool = False, tools: list[dict] | None = None,
                     images: dict[int, ImageEmbedding] | None = None) -> Fitted:
        """The chat cut to fit the context with room for the reply, as policy says (see
        tokenizer/overflow.py); not yet checked."""
        self.check_size(sum(len(m["content"]) for m in messages[-1:]
                            if isinstance(m, dict) and isinstance(m.get("content"), str)))
        return fit(messages, lambda kept: self._chat_tokens(kept, True, continue_final, tools=tools, images=images),
                   self.n_ctx, reply_room(self.n_ctx, max_tokens), policy)

    def chat_tokens(self, messages: list[dict], add_generation_prompt: bool = True,
                    continue_final: bool = False, limit: int | None = None,
                    tools: list[dict] | None = None, images: dict[int, ImageEmbedding] | None = None) -> list[int]:
        """The prompt of a chat; text longer than the context is refused untokenized.
        With a limit, a prompt of that many tokens or more is refused as soon as
        tokenizing reaches it (a chat of 32,000 messages costs no more than the context)."""
        self.check_size(sum(len(m["content"]) for m in messages
                            if isinstance(m, dict) and isinstance(m.get("content"), str)))
        return self._chat_tokens(messages, add_generation_prompt, continue_final, limit, tools, images)

    def _chat_tokens(self, messages: list[dict], add_generation_prompt: bool, continue_final: bool,
                     limit: int | None = None, tools: list[dict] | None = None,
                     images: dict[int, ImageEmbedding] | None = None) -> list[int]:
        tail: list[Piece] = []
        if continue_final:
            if not messages or messages[-1].get("role") != "assistant":
                raise RequestError("continuing a reply needs an assistant message last")
            partial = messages[-1].get("content")
            if not isinstance(partial, str):
                raise RequestError("the reply to continue needs text content")
            messages, add_generation_prompt, tail = messages[:-1], True, [partial]
        pieces = self._render_pieces(messages, add_generation_prompt, tools) + tail
        return self._tokenize_pieces(pieces, limit, images)

    def text_tokens(self, text: str, parse_special: bool = True) -> list[int]:
        """A raw prompt (/v1/completions): its control-token strings count when parse_special."""
        self.check_size(len(text))
        bos = self.template.bos_token
        add_bos = self.vocab.adds_bos and not (bos and parse_special and text.startswith(bos))
        return self.vocab.tokenize(text, add_special=add_bos, parse_special=parse_special)

    def check_size(self, n_chars: int) -> None:
        """Refuse, without tokenizing, text too long for any tokenization to fit: no token
        stands for more than max_piece_bytes bytes, and a character is at least one."""
        limit = self.n_ctx * self.vocab.max_piece_bytes
        if n_chars > limit:
            raise RequestError(
                f"the prompt is longer than the context: {n_chars} characters cannot fit in "
                f"{self.n_ctx} tokens; shorten it or load the model with a larger context"
            )

    def check_prompt(self, tokens: list[int], images: tuple[ImageEmbedding, ...] = ()) -> None:
        """Refuse a prompt the engine cannot run."""
        check_prompt(tokens, self.n_ctx, self.vocab.n_vocab, images)

    # ----- rendering -----------------------------------------------------------------

    def _render_pieces(self, messages: list[dict], add_generation_prompt: bool,
                       tools: list[dict] | None = None) -> list[Piece]:
        real = self.template.render(messages, add_generation_prompt, tools)  # validates the messages too
        self._check_tool_markup(messages, tools)
        # Only text contents are marked: an assistant turn of tool calls has none (None or
        # ""), and a sentinel there would change what the template writes (Qwen adds "\n").
        # The calls' arguments and the tools are the template's markup: written by the
        # template, as llama.cpp renders them.
        contents = [c if isinstance(c := m.get("content"), str) else "" for m in messages]
        marks = {i for i, c in enumerate(contents) if c or not messages[i].get("tool_calls")}
        nonce = self._nonce
        while any(nonce in c for c in contents):  # a content could not name it but be sure
            nonce = _new_nonce()
        marked = [{**m, "content": f"\ue000{nonce}:{i}\ue001"} if i in marks else m for i, m in enumerate(messages)]
        parts = re.split(f"\ue000{nonce}:(\\d+)\ue001", self.template.render(marked, add_generation_prompt, tools))
        markup, slots = parts[0::2], [int(i) for i in parts[1::2]]
        used = self._contents_as_rendered(real, markup, slots, contents, marks)
        if used is None:
            log.warning("the chat template hides message contents from the prompt tokenizer; "
                        "control tokens in message text are not escaped for this model")
            return self._matcher.split(real)
        pieces: list[Piece] = []
        for i, text in enumerate(markup):
            pieces += self._matcher.split(text)
            if i < len(slots):
                pieces.append(used[i])
        return pieces

    def _check_tool_markup(self, messages: list[dict], tools: list[dict] | None) -> None:
        """The tools and the calls' arguments go into the markup, where control-token strings
        count: one there (a "<|im_end|>" in an argument) could forge turns, so it is refused."""
        calls = [m["tool_calls"] for m in messages if m.get("tool_calls")]
        if tools is None and not calls:
            return
        text = json.dumps([tools, calls], ensure_ascii=False)
        if any(isinstance(piece, Special) for piece in self._matcher.split(text)):
            raise RequestError("a tool or a tool call holds a control token's text, which would end the turn")

    @staticmethod
    def _contents_as_rendered(real: str, markup: list[str], slots: list[int],
                              contents: list[str], marks: set[int]) -> list[str] | None:
        """Each slot's content as the template shows it. A template may transform some
        (Gemma trims the turns' text but not the system prompt): each slot takes its raw or
        its trimmed content, whichever the real render has there. When neither reproduces
        the render, the raw contents go in the template's structure (the turns stay right,
        the text is the user's). None when the render lost some content's place."""
        shown = _match_render(real, markup, [contents[i] for i in slots])
        if shown is not None:
            return shown
        if set(slots) != marks:
            return None
        log.debug("the chat template transforms message contents; tokenizing them as given")
        return [contents[i] for i in slots]

    def _tokenize_pieces(self, pieces: list[Piece], limit: int | None = None,
                         images: dict[int, ImageEmbedding] | None = None) -> list[int]:
        runs = merge_runs(pieces)
        first = runs[0] if runs else ""
        bos = self.template.bos_token
        starts_with_bos = isinstance(first, Special) and first.token == self.vocab.bos_token and bool(bos)
        tokens = [self.vocab.bos_token] if self.vocab.adds_bos and not starts_with_bos else []
        for run in runs:
            if isinstance(run, Special):
                tokens.append(run.token)
            elif run and images:
                tokens += self._text_and_images(run, images)
            elif run:
                tokens += self.vocab.tokenize(run, add_special=False, parse_special=False)
            if limit is not None and len(tokens) >= limit:
                raise RequestError(
                    f"the prompt is at least {len(tokens)} tokens but the context holds {self.n_ctx}; "
                    "shorten the conversation or load the model with a larger context"
                )
        return tokens


    def _text_and_images(self, run: str, images: dict[int, ImageEmbedding]) -> list[int]:
        """A run of text holding image markers: its text tokenized around them, each marker
        its image's tokens."""
        parts = re.split(f"\ue000{self._nonce}:img(\\d+)\ue001", run)
        tokens: list[int] = []
        for i, part in enumerate(parts):
            if i % 2:
                tokens += images[int(part)].token_ids
            elif part:
                tokens += self.vocab.tokenize(part, add_special=False, parse_special=False)
        return tokens


def _shown_images(tokens: list[int], images: dict[int, ImageEmbedding]) -> tuple[ImageEmbedding, ...]:
    """The images whose rows are in the prompt (overflow may have left some messages out)."""
    slots = {image_slot_row(t)[0] for t in tokens if t < 0}
    return tuple({e.slot: e for e in images.values() if e.slot in slots}.values())


def _match_render(real: str, markup: list[str], contents: list[str]) -> list[str] | None:
    """The contents, raw or trimmed each, that interleaved with markup give real; or None."""
    shown: list[str] = []
    pos = 0
    for i, text in enumerate(markup):
        if not real.startswith(text, pos):
            return None
        pos += len(text)
        if i == len(contents):
            break
        after = markup[i + 1]
        for candidate in (contents[i], contents[i].strip()):
            if real.startswith(candidate, pos) and real.startswith(after, pos + len(candidate)):
                shown.append(candidate)
                pos += len(candidate)
                break
        else:
            return None
    return shown if pos == len(real) else None


def common_prefix_len(a: list[int], b: list[int]) -> int:
    """How many tokens a and b share from the start."""
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def _new_nonce() -> str:
    """Digits only: they survive a template's case filters."""
    return str(secrets.randbelow(10**16)).zfill(16)


def check_prompt(tokens: list[int], n_ctx: int, n_vocab: int, images: tuple[ImageEmbedding, ...] = ()) -> None:
    """Refuse a prompt the engine cannot run (reads only sizes). Negative ids are rows of
    the images given."""
    if not tokens:
        raise RequestError("the prompt is empty")
    if len(tokens) >= n_ctx:
        raise RequestError(
            f"the prompt is {len(tokens)} tokens but the context holds {n_ctx}; "
            "shorten the conversation or load the model with a larger context"
        )
    bad = [t for t in tokens if not 0 <= t < n_vocab]
    if bad and images:
        rows = {e.slot: e.n_tokens for e in images}
        bad = [t for t in bad if t >= 0 or image_slot_row(t)[1] >= rows.get(image_slot_row(t)[0], 0)]
        if tokens[-1] < 0:
            raise RequestError("the prompt cannot end with an image: the model must read something after it")
    if bad:
        raise RequestError(f"token id {bad[0]} is outside the vocabulary")
