"""Which files Chorus reads as documents, by suffix, and how each is read."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from pathlib import Path


class Reader(Enum):
    TEXT = "text"  # decoded and kept verbatim
    PDF = "pdf"  # pdfminer, page by page
    DOCX = "docx"  # the others through markitdown, as Markdown
    PPTX = "pptx"
    XLSX = "xlsx"
    HTML = "html"


@dataclass(frozen=True, slots=True)
class Format:
    label: str  # for messages: "x.pdf is damaged or not a PDF"
    mime: str
    reader: Reader
    # Whether "# Title" lines are headings to split chunks at (Markdown and what markitdown
    # writes), not comments (Python, shell, YAML, TOML...).
    markdown_headings: bool
    # A workbook (markitdown writes a heading per sheet and its table): a chunk's place says
    # which of the sheet's rows it holds.
    table_rows: bool = False


_PLAIN = Format("a text file", "text/plain", Reader.TEXT, markdown_headings=False)
_MARKDOWN = Format("a Markdown file", "text/markdown", Reader.TEXT, markdown_headings=True)

_CODE_SUFFIXES = (
    ".py .pyi .pyx .js .mjs .cjs .jsx .ts .tsx .c .h .cc .cpp .cxx .hpp .hh .hxx .rs .go .java .kt .kts "
    ".scala .swift .m .mm .cs .fs .rb .php .pl .pm .lua .r .jl .hs .ml .mli .ex .exs .erl .clj .dart .vue "
    ".svelte .zig .nim .f90 .asm .s .sh .bash .zsh .fish .ps1 .bat .cmd .toml .yaml .yml .ini .cfg .conf "
    ".properties .env .sql .graphql .proto .css .scss .sass .less .xml .tex .bib .rst .adoc .org .diff "
    ".patch .cmake .gradle .mk .tf .nix .gitignore .dockerfile"
).split()

_TEXT_MIMES = {".csv": "text/csv", ".tsv": "text/tab-separated-values", ".json": "application/json",
               ".jsonl": "application/jsonl", ".ndjson": "application/x-ndjson"}

FORMATS: dict[str, Format] = {
    **{suffix: _PLAIN for suffix in (".txt", ".text", ".log", *_CODE_SUFFIXES)},
    **{suffix: Format("a text file", mime, Reader.TEXT, markdown_headings=False)
       for suffix, mime in _TEXT_MIMES.items()},
    **{suffix: _MARKDOWN for suffix in (".md", ".markdown", ".mdown", ".mkd")},
    ".pdf": Format("a PDF", "application/pdf", Reader.PDF, markdown_headings=True),
    ".docx": Format("a Word document",
                    "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
                    Reader.DOCX, markdown_headings=True),
    ".pptx": Format("a PowerPoint presentation",
                    "application/vnd.openxmlformats-officedocument.presentationml.presentation",
                    Reader.PPTX, markdown_headings=True),
    ".xlsx": Format("an Excel workbook", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
                    Reader.XLSX, markdown_headings=True, table_rows=True),
    ".html": Format("an HTML page", "text/html", Reader.HTML, markdown_headings=True),
    ".htm": Format("an HTML page", "text/html", Reader.HTML, markdown_headings=True),
}

SUPPORTED_SUFFIXES: frozenset[str] = frozenset(FORMATS)

# Text files that by custom have no suffix.
_TEXT_NAMES = frozenset({"makefile", "dockerfile", "license", "licence", "readme", "changelog", "authors",
                         "copying", "notice", "todo", "gemfile", "rakefile", "procfile", "vagrantfile"})

SUPPORTED_KINDS = ("text, Markdown, source code, CSV, JSON, HTML, PDF, Word (.docx), PowerPoint (.pptx) "
                   "and Excel (.xlsx)")


def format_of(path: Path) -> Format | None:
    """The format a file is read as, from its name; None for a type Chorus does not read."""
    name = path.name.lower()
    if not path.suffix and name in _TEXT_NAMES:
        return _PLAIN
    # A dot file (".gitignore", ".env") has no suffix: its whole name is one.
    return FORMATS.get(path.suffix.lower() or (name if name.startswith(".") else ""))
