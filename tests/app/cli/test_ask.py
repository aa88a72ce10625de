"""`chorus ask` and `chorus chat --attach`: documents asked about from the terminal, on the
real model, saved to the history like the app's chats."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from storage import DEFAULT_FILENAME, ChatRepository, DocumentRepository, open_database
from tests.support.cli import chorus, chorus_in_process

QUESTIONS = ("How fast does the fan turn?", "How long is the warranty?", "What does the pump move?")


@pytest.fixture
def data_dir(tmp_path, model_path) -> Path:
    models = tmp_path / "models"
    models.mkdir()
    (models / model_path.name).symlink_to(model_path)
    return tmp_path


def manual(tmp_path: Path, sections: int = 3) -> Path:
    parts = []
    for i in range(sections):
        parts.append(f"# Part {i}\n\nThe pump of unit {i} moves coolant at {i + 10} litres a minute. "
                     f"Its fan turns at {1000 + i} rpm when the coolant is hot.\n")
    parts.append("# Warranty\n\nThe warranty lasts two years from the date of purchase.\n")
    path = tmp_path / "manual.md"
    path.write_text("\n".join(parts))
    return path


def questions(*qs: str) -> list[str]:
    return [arg for q in qs for arg in ("-q", q)]


def conversations_with_documents(data_dir: Path) -> dict[int, list[str]]:
    db = open_database(data_dir / DEFAULT_FILENAME)
    try:
        repo, docs = ChatRepository(db), DocumentRepository(db)
        return {c.id: [a.name for a in docs.conversation_documents(c.id)] for c in repo.list_conversations()}
    finally:
        db.close()


@pytest.mark.model
def test_ask_answers_every_question_in_its_own_chat_computing_the_document_once(data_dir, tmp_path):
    doc = manual(tmp_path)
    out = chorus(data_dir, "ask", str(doc), *questions(*QUESTIONS), "--max-tokens", "8", "--json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert [a["question"] for a in report["answers"]] == list(QUESTIONS)
    assert all(a["answer"].strip() for a in report["answers"])
    assert report["retrieval"] is False and report["document_tokens"] > 50
    # Once the document, then each question's few tokens: far below three documents' worth.
    assert report["prompt_tokens_computed"] < report["document_tokens"] + 3 * 40
    chats = conversations_with_documents(data_dir)
    assert sorted(chats) == sorted(a["conversation_id"] for a in report["answers"])
    assert all(names == ["manual.md"] for names in chats.values())


@pytest.mark.model
def test_ask_about_a_document_longer_than_the_context_retrieves_excerpts_with_citations(data_dir, tmp_path):
    doc = manual(tmp_path, sections=60)  # some 2,500 tokens against a 1,024-token context
    out = chorus(data_dir, "ask", str(doc), *questions("How long does the warranty last?"),
                 "--ctx", "1024", "--max-tokens", "8", "--json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["retrieval"] is True
    citations = report["answers"][0]["citations"]
    assert citations and all(c["document"] == "manual.md" for c in citations)
    assert report["prompt_tokens_computed"] < 1024
    # each says where its excerpt is, in the document's headings, and carries its text
    warranty = next(c for c in citations if c["where"] == "Warranty")
    assert "The warranty lasts two years" in warranty["text"]
    assert all(c["text"] and c["where"].startswith(("Part ", "Warranty")) for c in citations)
    # cited: named by its label, or quoted (six of its words in a row); the answer decides which
    answer = report["answers"][0]["answer"]
    for c in citations:
        assert c["cited"] == (f"[{c['label']}]" in answer or quotes(answer, c["text"], 6)), c


def quotes(answer: str, excerpt: str, n: int) -> bool:
    """Whether n words of answer in a row are n words in a row of excerpt (case and punctuation aside)."""
    words = re.findall(r"\w+", answer.casefold())
    text = " " + " ".join(re.findall(r"\w+", excerpt.casefold())) + " "
    return any(f" {' '.join(words[i:i + n])} " in text for i in range(len(words) - n + 1))


def test_ask_about_an_empty_file_is_one_line_and_stores_nothing(tmp_path, capsys):
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    out = chorus_in_process(capsys, tmp_path, "ask", str(empty), "-q", "What is in it?")
    assert out.returncode == 2
    assert out.stderr.strip() == "chorus: empty.txt is empty"
    assert not (tmp_path / DEFAULT_FILENAME).exists() or conversations_with_documents(tmp_path) == {}


@pytest.mark.model
def test_chat_attach_puts_the_document_in_the_prompt_and_the_history(data_dir, tmp_path):
    doc = manual(tmp_path)
    out = chorus(data_dir, "chat", "--attach", str(doc), "--max-tokens", "8", "--temperature", "0",
                 stdin="What does the pump move?\n/quit\n")
    assert out.returncode == 0, out.stderr
    prompt_tokens = int(re.search(r"(\d+)/(\d+) prompt tokens cached", out.stderr).group(2))
    assert prompt_tokens > 100  # the question alone is a dozen tokens: the document went with it
    assert list(conversations_with_documents(data_dir).values()) == [["manual.md"]]


@pytest.mark.model
def test_bench_documents_reports_sharing_and_the_restart(data_dir):
    out = chorus(data_dir, "bench-documents", "--chats", "2", "--document-tokens", "300", "--max-tokens", "2",
                 "--json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["prompt_tokens_computed"] <= 1.15 * report["prompt_tokens_ideal"]
    assert report["prompt_tokens_ideal"] < report["prompt_tokens_without_sharing"]
    assert {"at_once", "one_after_another", "restart"} <= set(report)
    assert report["restart"]["ttft_restored_s"] > 0 and report["restart"]["ttft_recompute_s"] > 0
