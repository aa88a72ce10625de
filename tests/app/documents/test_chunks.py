"""split_chunks: cuts at headings and pages, packs paragraphs, never leaves a gap."""

from __future__ import annotations

import random

import pytest

from app.documents import split_chunks
from tests.support.document_files import assert_chunks_cover


def texts(text: str, chunks) -> list[str]:
    return [text[c.start:c.end] for c in chunks]


def test_short_paragraphs_are_packed_into_one_chunk():
    text = "One.\n\nTwo.\n\nThree."
    chunks = split_chunks(text, target_chars=100)
    assert texts(text, chunks) == [text]
    assert chunks[0].page is None and chunks[0].heading == ""


def test_paragraphs_are_packed_up_to_the_target_and_cut_between_paragraphs():
    paragraphs = [f"Paragraph {i} " + "word " * 30 for i in range(10)]  # ~165 chars each
    text = "\n\n".join(paragraphs)
    chunks = split_chunks(text, target_chars=400)
    assert_chunks_cover(text, chunks)
    assert len(chunks) == 5
    for chunk_text in texts(text, chunks):
        assert len(chunk_text) <= 400
        assert chunk_text.startswith("Paragraph ")  # every cut is at a paragraph's start


def test_every_heading_starts_a_chunk_and_names_the_chunks_below_it():
    text = "Preface words.\n\n# Intro\n\nHello there.\n\n## Details\n\nMore.\n\nEven more."
    chunks = split_chunks(text, target_chars=1000)
    assert texts(text, chunks) == ["Preface words.\n\n", "# Intro\n\nHello there.\n\n",
                                   "## Details\n\nMore.\n\nEven more."]
    assert [c.heading for c in chunks] == ["", "Intro", "Intro › Details"]


def test_a_long_section_keeps_its_heading_on_every_chunk():
    text = "# Results ##\n\n" + "\n\n".join("Finding " + "x" * 80 for _ in range(10))
    chunks = split_chunks(text, target_chars=200)
    assert len(chunks) > 3
    assert {c.heading for c in chunks} == {"Results"}  # closing #s are not the title's


def test_hashes_in_code_fences_and_in_code_files_are_no_headings():
    markdown = "# Real\n\n```python\n# a comment\nx = 1\n```\n\nAfter."
    assert [c.heading for c in split_chunks(markdown)] == ["Real"]
    code = "import os\n\n# a comment\n\nprint(os.name)\n"
    chunks = split_chunks(code, markdown_headings=False)
    assert texts(code, chunks) == [code] and chunks[0].heading == ""


def test_page_boundaries_cut_chunks_and_number_them_from_one():
    pages = ["First page text.", "Second page text.", "Third page text."]
    text = "\n\n".join(pages)
    starts = [0, len(pages[0]) + 2, len(pages[0]) + len(pages[1]) + 4]
    chunks = split_chunks(text, starts, target_chars=1000)
    assert texts(text, chunks) == ["First page text.\n\n", "Second page text.\n\n", "Third page text."]
    assert [c.page for c in chunks] == [1, 2, 3]


def test_an_empty_page_gets_no_chunk_and_shifts_no_page_number():
    text = "Page one.\n\n\n\nPage three."
    chunks = split_chunks(text, [0, 11, 13], target_chars=1000)
    assert_chunks_cover(text, chunks)
    assert [(text[c.start:c.end].strip(), c.page) for c in chunks] == [("Page one.", 1), ("Page three.", 3)]


def test_a_comment_mark_before_a_title_joins_the_chunk_of_the_title():
    text = "<!-- Slide number: 1 -->\n# Hello\nBody one\n\n<!-- Slide number: 2 -->\n# Bye\nBody two"
    chunks = split_chunks(text, [0, text.index("<!-- Slide number: 2")])
    assert [(c.page, c.heading) for c in chunks] == [(1, "Hello"), (2, "Bye")]
    assert texts(text, chunks)[1].startswith("<!-- Slide number: 2 -->")


def test_an_overlong_paragraph_is_cut_at_sentences_never_mid_word():
    text = " ".join(f"Sentence number {i} is here." for i in range(200))
    chunks = split_chunks(text, target_chars=300)
    assert_chunks_cover(text, chunks)
    assert len(chunks) >= len(text) // 300
    for chunk_text in texts(text, chunks)[:-1]:
        assert len(chunk_text) <= 300
        assert chunk_text.endswith("here. ")


def test_an_overlong_paragraph_without_sentences_is_cut_at_spaces():
    text = " ".join(f"w{i}" for i in range(2000))
    chunks = split_chunks(text, target_chars=250)
    words = set(text.split())
    for chunk_text in texts(text, chunks):
        assert set(chunk_text.split()) <= words  # no word split in two
    assert_chunks_cover(text, chunks)


def test_lines_of_a_table_are_cut_between_rows():
    text = "\n".join(f"| row {i} | {i * 3} |" for i in range(300))
    for chunk_text in texts(text, split_chunks(text, target_chars=500)):
        assert chunk_text.startswith("| row ")
        assert chunk_text.rstrip("\n").endswith("|")


def test_a_word_longer_than_the_target_is_cut_where_it_must_be():
    text = "a" * 2500
    chunks = split_chunks(text, target_chars=1000)
    assert [(c.start, c.end) for c in chunks] == [(0, 1000), (1000, 2000), (2000, 2500)]


def test_blank_text_is_one_chunk_and_no_text_none():
    assert split_chunks("") == ()
    assert [(c.start, c.end) for c in split_chunks("\n\n  \n")] == [(0, 5)]


@pytest.mark.parametrize("seed", range(20))
def test_random_documents_are_covered_without_gaps_or_overlaps(seed):
    rng = random.Random(seed)
    pieces = []
    for _ in range(rng.randint(1, 80)):
        kind = rng.random()
        if kind < 0.15:
            pieces.append("#" * rng.randint(1, 3) + " Heading " + str(rng.randint(0, 99)))
        elif kind < 0.2:
            pieces.append("```\n# not a heading\n```")
        else:
            pieces.append(" ".join("w" * rng.randint(1, 30) for _ in range(rng.randint(1, 300))))
    text = "".join(piece + rng.choice(["\n\n", "\n", "\n\n\n", " \r\n\r\n"]) for piece in pieces)
    page_starts = [0, *sorted(rng.sample(range(1, len(text)), min(5, len(text) - 1)))]
    target = rng.choice([50, 300, 1200])
    chunks = split_chunks(text, page_starts, target_chars=target)
    assert_chunks_cover(text, chunks)
    ends = [*page_starts[1:], len(text) + 1]
    for chunk in chunks:
        words = text[chunk.start:chunk.end]
        assert len(words.strip()) <= target
        first_word = chunk.start + len(words) - len(words.lstrip())
        assert page_starts[chunk.page - 1] <= first_word < ends[chunk.page - 1]  # the page its words begin on


def test_page_starts_out_of_order_or_off_the_text_are_refused():
    with pytest.raises(ValueError, match="first page"):
        split_chunks("abc", [1])
    with pytest.raises(ValueError, match="ascend"):
        split_chunks("abcdef", [0, 4, 2])
    with pytest.raises(ValueError, match="ascend"):
        split_chunks("abc", [0, 10])
    with pytest.raises(ValueError, match="target_chars"):
        split_chunks("abc", target_chars=0)


def test_a_chunk_s_heading_is_the_path_of_the_headings_above_it():
    text = "# Guide\nintro\n\n## Install\nx\n\n### Linux\napt\n\n## Use\nrun\n\n# Appendix\nmore\n"
    assert [c.heading for c in split_chunks(text)] == [
        "Guide", "Guide › Install", "Guide › Install › Linux", "Guide › Use", "Appendix"]


def test_table_rows_counts_a_sheet_s_rows_from_its_header_as_row_1():
    text = ("## Sales\n| Region | Q1 |\n| --- | --- |\n| R0 | 0 |\n| R1 | 1 |\n| R2 | 2 |\n\n"
            "## Costs\n| Item | Cost |\n| :-- | --: |\n| rent | 100 |")
    assert [c.heading for c in split_chunks(text, table_rows=True)] == ["Sales, rows 1–4", "Costs, rows 1–2"]
    # cut small: each chunk its own rows, the rule under the header no row (a chunk of it alone: the sheet)
    assert [c.heading for c in split_chunks(text, target_chars=25, table_rows=True)] == [
        "Sales, row 1", "Sales, row 2", "Sales, rows 3–4", "Costs, row 1", "Costs", "Costs, row 2"]
    assert [c.heading for c in split_chunks(text)] == ["Sales", "Costs"]  # a Markdown file's tables: no rows


def test_a_heading_is_never_a_chunk_alone_before_a_long_paragraph():
    """A section whose one paragraph is longer than a chunk: its heading goes with the
    paragraph's first words (a chunk of a title alone was retrieved for a question naming
    it and said nothing)."""
    text = "# Warranty\n\n" + "The warranty lasts two years from the date of purchase. " * 12
    chunks = split_chunks(text, target_chars=300)
    first = text[chunks[0].start:chunks[0].end]
    assert first.startswith("# Warranty\n\nThe warranty lasts") and len(chunks) > 1
    assert all(len(text[c.start:c.end].strip()) > len("# Warranty") for c in chunks)
