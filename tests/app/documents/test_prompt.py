"""Where attached documents go in a chat's prompt: whole and byte-stable in the system
message, or the excerpts bm25 retrieves for the question when they do not fit (a real
SQLite file, the chunker the app uses; tokens counted as words, a stand-in for the
vocabulary, which the model tests use)."""

from __future__ import annotations

import hashlib

import pytest

from app.documents import (
    GuessedTokens,
    attached_shas,
    build_prompt,
    chat_prompt,
    cited_labels,
    fit_text,
    split_chunks,
    with_cited,
)
from inference import reply_room
from storage import DocumentRepository, NewDocument, SourceRecord


class WordTokens:
    """One token a word: enough to make budgets exact in a test."""

    exact = True

    def count(self, text: str) -> int:
        return len(text.split())


def document(name: str, text: str) -> NewDocument:
    return NewDocument(sha256=hashlib.sha256(text.encode()).hexdigest(), name=name, mime="text/markdown",
                       size_bytes=len(text.encode()), text=text, pages=None, chunks=split_chunks(text, (), 300))


def manual() -> str:
    sections = {
        "Installing": "Unpack the archive and run the installer. " * 20,
        "Cooling": "The pump keeps the coolant moving; the radiator fan turns at 1200 rpm. " * 8,
        "Warranty": "The warranty lasts two years from the date of purchase. " * 10,
    }
    return "\n\n".join(f"# {head}\n\n{body.strip()}" for head, body in sections.items())


def stored(repo, docs: list[NewDocument], question: str, system: str | None = None):
    conv = repo.create_conversation(title="t")
    if system:
        repo.add_message(conv.id, "system", system)
    user = repo.add_message(conv.id, "user", question, documents=tuple(docs))
    repo.start_reply(conv.id, parent_id=user.id)
    path = repo.active_path(conv.id)
    before = path.messages[:-1]
    return path, before, tuple({"role": m.role, "content": m.content} for m in before)


def test_a_document_that_fits_goes_whole_into_the_system_message_after_the_system_prompt(repo, db):
    doc = document("manual.md", manual())
    path, before, turns = stored(repo, [doc], "How fast does the fan turn?", system="Be brief.")
    prompt = chat_prompt(turns, path, before, DocumentRepository(db), WordTokens(), 8192, 256)
    system = prompt.messages[0]
    assert system["role"] == "system"
    assert system["content"].startswith("Be brief.\n\n")
    assert '<document name="manual.md">' in system["content"] and "1200 rpm" in system["content"]
    assert prompt.messages[1] == {"role": "user", "content": "How fast does the fan turn?"}
    assert prompt.pinned_block == system["content"]
    assert not prompt.retrieval and prompt.sources == ()
    assert prompt.documents[0].whole and prompt.documents[0].tokens > 200


def test_two_chats_with_the_same_document_begin_with_the_same_system_block(repo, db):
    """What lets the prefix cache compute the document once for every chat asking about it."""
    doc = document("manual.md", manual())
    docs = DocumentRepository(db)
    blocks = []
    for question in ("How long is the warranty?", "What does the pump do?"):
        path, before, turns = stored(repo, [doc], question)
        blocks.append(chat_prompt(turns, path, before, docs, WordTokens(), 8192, 256).messages[0]["content"])
    assert blocks[0] == blocks[1]


def test_a_document_too_long_for_the_context_gets_the_excerpts_that_match_the_question(repo, db):
    doc = document("manual.md", manual())
    path, before, turns = stored(repo, [doc], "How long does the warranty last?")
    prompt = chat_prompt(turns, path, before, DocumentRepository(db), WordTokens(), 500, 256)
    assert prompt.retrieval and prompt.pinned_block is None
    question = prompt.messages[-1]
    assert question["role"] == "user" and question["content"].endswith("How long does the warranty last?")
    assert "[1] manual.md" in question["content"] and "warranty lasts two years" in question["content"]
    assert "Unpack the archive" not in question["content"]  # the installer section did not match
    assert prompt.sources and all(s.name == "manual.md" for s in prompt.sources)
    assert prompt.document_tokens <= 500 - 256


def test_excerpts_stay_within_the_budget_and_in_document_order(repo, db):
    doc = document("manual.md", manual())
    path, before, turns = stored(repo, [doc], "warranty pump coolant installer archive")
    prompt = chat_prompt(turns, path, before, DocumentRepository(db), WordTokens(), 560, 256)
    labels = [s.label for s in prompt.sources]
    assert labels == list(range(1, len(labels) + 1))
    chunks = [s.chunk_index for s in prompt.sources]
    assert chunks == sorted(chunks)
    used = WordTokens().count(prompt.messages[-1]["content"])
    assert used <= 560 - 256


def test_a_question_that_matches_nothing_gets_the_documents_openings(repo, db):
    doc = document("manual.md", manual())
    path, before, turns = stored(repo, [doc], "zzz qqq")
    prompt = chat_prompt(turns, path, before, DocumentRepository(db), WordTokens(), 500, 256)
    assert prompt.sources and prompt.sources[0].chunk_index == 0


def test_documents_keep_the_order_they_were_first_attached_in_along_the_branch(repo, db):
    a, b = document("a.md", "alpha " * 40), document("b.md", "beta " * 40)
    conv = repo.create_conversation(title="t")
    first = repo.add_message(conv.id, "user", "one", documents=(b,))
    reply = repo.start_reply(conv.id, parent_id=first.id)
    repo.finish_reply(reply.id, "ok")
    second = repo.add_message(conv.id, "user", "two", documents=(a, b))
    repo.start_reply(conv.id, parent_id=second.id)
    path = repo.active_path(conv.id)
    assert attached_shas(path, path.messages) == [b.sha256, a.sha256]


def test_without_documents_the_turns_go_as_they_are():
    turns = ({"role": "user", "content": "hi"},)
    prompt = build_prompt(turns, [], GuessedTokens(), 2048, None, lambda shas, q, n: [])
    assert prompt.messages == turns and prompt.documents == () and prompt.pinned_block is None


def test_an_unknown_context_puts_documents_whole(repo, db):
    doc = document("manual.md", manual())
    path, before, turns = stored(repo, [doc], "q")
    prompt = chat_prompt(turns, path, before, DocumentRepository(db), WordTokens(), None, None)
    assert not prompt.retrieval and "1200 rpm" in prompt.messages[0]["content"]


@pytest.mark.parametrize(("reply", "labels"), [
    ("The fan turns at 1200 rpm [2].", {2}),
    ("See [1, 3] and [4].", {1, 3, 4}),
    ("No citation here [x].", set()),
])
def test_the_reply_cites_excerpts_by_their_labels(reply, labels):
    assert cited_labels(reply) == labels
    sources = [SourceRecord(n, "s", "m.md", n, None, False) for n in (1, 2, 3, 4)]
    assert {s.label for s in with_cited(sources, reply) if s.cited} == labels


def test_a_reply_that_quotes_an_excerpt_cites_it_without_its_label(repo, db):
    """Small models rarely write "[2]": a reply that repeats six words of an excerpt in a row
    (case and punctuation aside) cites it; one that shares a few words with each does not."""
    doc = document("manual.md", manual())
    path, before, turns = stored(repo, [doc], "How long does the warranty last, and how fast is the fan?")
    prompt = chat_prompt(turns, path, before, DocumentRepository(db), WordTokens(), 500, 256)
    assert prompt.retrieval and len(prompt.excerpt_texts) == len(prompt.sources) >= 2
    labels = {where: {s.label for s in prompt.sources if s.where == where} for where in ("Warranty", "Cooling")}
    assert all(labels.values())  # each excerpt says where it is: both sections were retrieved
    quoting = "Good news: THE WARRANTY lasts two years, from the date of purchase!"
    holding = {s.label for s, text in zip(prompt.sources, prompt.excerpt_texts) if "lasts two years" in text}
    assert holding and holding <= labels["Warranty"]  # (not its bare heading's chunk)
    assert {s.label for s in prompt.cited_sources(quoting) if s.cited} == holding
    near = "The warranty is long and the fan is fast."  # words of both, no run of six
    assert not any(s.cited for s in prompt.cited_sources(near))
    cooling = min(labels["Cooling"])
    assert {s.label for s in prompt.cited_sources(f"{quoting} [{cooling}]") if s.cited} == holding | {cooling}


def test_the_cached_share_of_the_documents_follows_the_cached_prompt_tokens(repo, db):
    doc = document("manual.md", manual())
    path, before, turns = stored(repo, [doc], "q", system="Be brief.")
    prompt = chat_prompt(turns, path, before, DocumentRepository(db), WordTokens(), 8192, 256)
    start, total = prompt.documents_start, prompt.document_tokens
    assert 0 < start < 20
    assert prompt.documents_cached(0) == 0
    assert prompt.documents_cached(start + 10) == 10
    assert prompt.documents_cached(start + total + 50) == total


def test_a_chip_says_what_a_document_costs_and_whether_it_fits_whole():
    text = "word " * 300
    assert fit_text("a.md", text, None, WordTokens(), 8192).endswith("tokens · fits whole")
    assert fit_text("a.md", text, None, WordTokens(), 400).endswith("tokens · too long: excerpts")
    assert fit_text("a.md", text, None, WordTokens(), None) == "303 tokens"
    assert fit_text("a.md", text, None, GuessedTokens(), None).startswith("≈")


class RecordingTokens(WordTokens):
    """WordTokens that remembers the length of every text it was asked to count."""

    def __init__(self) -> None:
        self.lengths: list[int] = []

    def count(self, text: str) -> int:
        self.lengths.append(len(text))
        return super().count(text)


def test_documents_far_over_the_context_are_not_counted_as_one_block(repo, db):
    """Bounded by characters first: 2 documents of 40,000 words against a 500-token context go
    to retrieval without their joined block being counted (a 50 MB file took minutes so)."""
    big = [document(f"log{i}.txt", f"entry {i} of the warranty log. " * 8000) for i in range(2)]
    path, before, turns = stored(repo, big, "What does the warranty log say?")
    counter = RecordingTokens()
    prompt = chat_prompt(turns, path, before, DocumentRepository(db), counter, 500, 256)
    assert prompt.retrieval and prompt.document_tokens <= 500 - reply_room(500, 256)  # the engine's room
    each = max(len(d.text) for d in big) + 100  # one document as rendered, with its tag
    assert max(counter.lengths) <= each
    rendered = [f'<document name="{d.name}">\n{d.text.strip()}\n</document>' for d in big]
    assert [d.tokens for d in prompt.documents] == [WordTokens().count(r) for r in rendered]


class CountingEngine:
    """The one call EngineTokens makes of an engine client, counted."""

    info = object()

    def __init__(self) -> None:
        self.calls = 0

    def count_tokens(self, texts):
        self.calls += 1
        return [len(t.split()) for t in texts]


def test_the_engine_counts_a_long_text_once_for_every_question():
    from app.documents import EngineTokens

    engine = CountingEngine()
    counter = EngineTokens(engine)  # type: ignore[arg-type]
    long_text = "word " * 10_000
    assert [counter.count(long_text) for _ in range(8)] == [10_000] * 8
    assert engine.calls == 1
    assert counter.count("a short question") == 3 and counter.count("a short question") == 3
    assert engine.calls == 3  # short texts are not worth remembering
