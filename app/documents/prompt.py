"""Where a chat's attached documents go in the prompt, and how they read there.

A document that fits goes into the system message, after the system prompt, rendered the
same way every time (render_documents): every chat, compare pane or API request with the same
system prompt and the same documents then begins with the same tokens, so the engine's
prefix cache computes them once for all of them, and the block can be pinned and saved to the
disk prompt cache as one prefix. Documents keep the order they were first attached in.

Documents that do not fit (with the turns and room for the reply) are not put in whole: the
excerpts retrieved for the question (app/documents/retrieval.py) go before the last user
message instead, so the turns before it keep their cached KV while the excerpts change with
each question.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from app.documents.retrieval import Excerpt, pick_excerpts, render_excerpts
from app.documents.tokens import MAX_CHARS_PER_TOKEN, TokenCounter
from inference import reply_room
from storage import ChunkHit, DocumentRecord, SourceRecord

# The template's markup around each message, over-counted rather than under.
TOKENS_PER_TURN = 12


@dataclass(frozen=True, slots=True)
class DocumentUse:
    """One document of a chat's prompt, for the side panel and the chips."""

    sha256: str
    name: str
    tokens: int  # the whole document's tokens as rendered
    whole: bool  # False: it was too long, and excerpts of it were used


@dataclass(frozen=True, slots=True)
class DocumentPrompt:
    messages: tuple[dict, ...]
    documents: tuple[DocumentUse, ...] = ()
    # The system message holding the whole documents: the prefix to pin while the chat is open.
    pinned_block: str | None = None
    # Retrieval was used: these excerpts, labelled as in the prompt, and their texts (in order).
    sources: tuple[SourceRecord, ...] = ()
    excerpt_texts: tuple[str, ...] = ()
    document_tokens: int = 0  # tokens of document text in this prompt (whole or excerpts)
    # Whole documents: the system message's tokens before them (its prompt and intro), so a
    # reply's cached prompt tokens say how much of the documents was found cached.
    documents_start: int = 0

    def cited_sources(self, reply: str) -> tuple[SourceRecord, ...]:
        """The sources as the reply left them: cited where it names or quotes them."""
        return with_cited(self.sources, reply, self.excerpt_texts)

    def documents_cached(self, cached_tokens: int) -> int:
        """Of the documents' tokens, those a reply found in the cache (the prompt's first
        cached_tokens were reused). Excerpts change with each question: counted as computed."""
        if self.retrieval:
            return 0
        return max(0, min(self.document_tokens, cached_tokens - self.documents_start))

    @property
    def retrieval(self) -> bool:
        return any(not d.whole for d in self.documents)


ChunkSearch = Callable[[Sequence[str], str, int], list[ChunkHit]]


def render_document(name: str, text: str, pages: int | None) -> str:
    """One document as the model reads it; the same bytes for the same document, always."""
    pages_attr = f' pages="{pages}"' if pages else ""
    return f'<document name="{_attr(name)}"{pages_attr}>\n{text.strip()}\n</document>'


def render_documents(documents: Sequence[DocumentRecord]) -> str:
    return "\n\n".join(render_document(d.name, d.text, d.pages) for d in documents)


def system_block(system_prompt: str, documents: str) -> str:
    """The system message with documents: the prompt first (a preset's pinned prefix stays
    a prefix of it), then the documents."""
    intro = "The user attached these documents; answer from them."
    head = f"{system_prompt.rstrip()}\n\n" if system_prompt.strip() else ""
    return f"{head}{intro}\n\n{documents}"


def build_prompt(turns: Sequence[dict], documents: Sequence[DocumentRecord], counter: TokenCounter,
                 n_ctx: int | None, reply_tokens: int | None, search: ChunkSearch) -> DocumentPrompt:
    """The engine's messages for turns ({"role", "content"}, the system prompt first if any)
    with documents (distinct, in the order attached). n_ctx: the tokens a request may hold
    (None: unknown, documents go in whole and the engine says if they do not fit)."""
    turns = tuple(turns)
    # An image is stored as a document with no text: it reaches the model as an image part
    # (app/cli/images.py) or not at all, never as an empty document here.
    documents = [d for d in documents if not d.is_image]
    if not documents:
        return DocumentPrompt(messages=turns)
    rendered = render_documents(documents)
    budget = _document_budget(turns, counter, n_ctx, reply_tokens)
    if budget is not None and len(rendered) > budget * MAX_CHARS_PER_TOKEN:  # too long, uncounted
        return _retrieved(turns, documents, counter, budget, search)
    whole_tokens = counter.count(rendered)
    if budget is None or whole_tokens <= budget:
        return _whole(turns, documents, rendered, whole_tokens, counter)
    return _retrieved(turns, documents, counter, budget, search)


def _document_budget(turns: tuple[dict, ...], counter: TokenCounter, n_ctx: int | None,
                     reply_tokens: int | None) -> int | None:
    """The tokens left for documents: the context less the turns and the reply's room, by
    the engine's own rule (reply_room), so documents sized to fit here are never what the
    engine cuts or refuses for want of the reply's room."""
    if n_ctx is None:
        return None
    reserve = reply_room(n_ctx, reply_tokens or 0)
    used = sum(counter.count(str(t.get("content") or "")) + TOKENS_PER_TURN for t in turns)
    return max(0, n_ctx - reserve - used - TOKENS_PER_TURN)


def _whole(turns: tuple[dict, ...], documents: Sequence[DocumentRecord], rendered: str, tokens: int,
           counter: TokenCounter) -> DocumentPrompt:
    system, rest = _split_system(turns)
    block = system_block(system, rendered)
    uses = tuple(DocumentUse(d.sha256, d.name, counter.count(render_document(d.name, d.text, d.pages)), True)
                 for d in documents)
    start = counter.count(block[:block.index("<document")])
    return DocumentPrompt(messages=({"role": "system", "content": block}, *rest), documents=uses,
                          pinned_block=block, document_tokens=tokens, documents_start=start)


def _retrieved(turns: tuple[dict, ...], documents: Sequence[DocumentRecord], counter: TokenCounter,
               budget: int, search: ChunkSearch) -> DocumentPrompt:
    question_at = _last_user(turns)
    question = str(turns[question_at].get("content") or "") if question_at is not None else ""
    excerpts = pick_excerpts(documents, question, counter, budget, search)
    uses = tuple(DocumentUse(d.sha256, d.name, counter.count(render_document(d.name, d.text, d.pages)), False)
                 for d in documents)
    sources = tuple(_source(e) for e in excerpts)
    block = render_excerpts(excerpts)
    spent = counter.count(block) if excerpts else 0
    texts = tuple(e.text for e in excerpts)
    if question_at is None or not excerpts:
        return DocumentPrompt(messages=turns, documents=uses, sources=sources, excerpt_texts=texts,
                              document_tokens=spent)
    asked = turns[question_at]
    with_excerpts = {**asked, "content": f"{block}\n\n{question}"}
    messages = (*turns[:question_at], with_excerpts, *turns[question_at + 1:])
    return DocumentPrompt(messages=messages, documents=uses, sources=sources, excerpt_texts=texts,
                          document_tokens=spent)


def _source(excerpt: Excerpt) -> SourceRecord:
    return SourceRecord(label=excerpt.label, sha256=excerpt.sha256, name=excerpt.name,
                        chunk_index=excerpt.chunk_index, page=excerpt.chunk.page, cited=False,
                        where=excerpt.chunk.heading)


def _split_system(turns: tuple[dict, ...]) -> tuple[str, tuple[dict, ...]]:
    if turns and turns[0].get("role") == "system":
        return str(turns[0].get("content") or ""), turns[1:]
    return "", turns


def _last_user(turns: tuple[dict, ...]) -> int | None:
    return next((i for i in range(len(turns) - 1, -1, -1) if turns[i].get("role") == "user"), None)


def _attr(value: str) -> str:
    return value.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;")


# A reply quotes an excerpt when this many of its words in a row are the excerpt's (case and
# punctuation aside): a name or a common phrase is shorter, a sentence taken from it longer.
QUOTE_WORDS = 6
_WORD = re.compile(r"\w+")


def with_cited(sources: Sequence[SourceRecord], reply: str, texts: Sequence[str] = ()) -> tuple[SourceRecord, ...]:
    """The sources with cited set where the reply names their label ("[2]", "[1, 3]") or
    quotes their excerpt (texts: the excerpts' texts, in the sources' order)."""
    named = cited_labels(reply)
    quoted = _word_runs(reply)
    return tuple(replace(s, cited=s.label in named or (i < len(texts) and bool(_word_runs(texts[i]) & quoted)))
                 for i, s in enumerate(sources))


def _word_runs(text: str) -> set[tuple[str, ...]]:
    words = [w.casefold() for w in _WORD.findall(text)]
    return {tuple(words[i:i + QUOTE_WORDS]) for i in range(len(words) - QUOTE_WORDS + 1)}


def cited_labels(reply: str) -> set[int]:
    labels: set[int] = set()
    for group in re.findall(r"\[(\d+(?:\s*,\s*\d+)*)\]", reply):
        labels.update(int(n) for n in re.split(r"\s*,\s*", group))
    return labels


def fit_text(name: str, text: str, pages: int | None, counter: TokenCounter, n_ctx: int | None) -> str:
    """What an attachment costs, for its chip: "2,210 tokens · fits whole", or "... · too long:
    excerpts" when it alone leaves less than a reply's room in the context (reply_room for a
    reply until the model stops: the chat's own limit is not known here; with other turns
    and documents, build_prompt decides per reply). Guessed counts (no vocabulary) say "≈"."""
    tokens = counter.count(render_document(name, text, pages))
    about = "" if counter.exact else "≈"
    counted = f"{about}{tokens:,} tokens"
    if n_ctx is None:
        return counted
    fits = tokens <= n_ctx - reply_room(n_ctx, 0) - 2 * TOKENS_PER_TURN
    return f"{counted} · {'fits whole' if fits else 'too long: excerpts'}"
