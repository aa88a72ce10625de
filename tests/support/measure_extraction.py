"""The converter's cost, measured once for docs/documents.md: the import of markitdown's
converters (in a fresh interpreter) and the extraction of a 20-page PDF, a DOCX and an XLSX
made on the spot.

    .venv/bin/python -m tests.support.measure_extraction
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

from app.documents import extract_document
from tests.support.document_files import make_docx, make_pdf, make_xlsx

_IMPORT = ("import time; t = time.perf_counter(); import markitdown.converters; "
           "print(time.perf_counter() - t)")
_SENTENCE = "The engine batches the chats of many tabs into one step of the model. "


def _timed(path: Path) -> tuple[float, int]:
    start = time.perf_counter()
    document = extract_document(path)
    return time.perf_counter() - start, len(document.text)


def main() -> None:
    seconds = float(subprocess.run([sys.executable, "-c", _IMPORT], capture_output=True, text=True,
                                   check=True).stdout)
    print(f"import markitdown.converters: {seconds:.2f} s")
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        extract_document(make_docx(root / "warm.docx", [(0, "warm up")]))  # the imports, out of the timings
        files = {
            "20-page PDF": make_pdf(root / "report.pdf", [f"Page {n}. " + _SENTENCE * 40 for n in range(20)]),
            "DOCX, 10 sections": make_docx(root / "report.docx", [
                block for n in range(10) for block in ((1, f"Section {n}"), (0, _SENTENCE * 20))]),
            "XLSX, 2 sheets x 1000 rows": make_xlsx(root / "table.xlsx", {
                name: [["id", "item", "price"], *([i, f"item {i}", i * 3] for i in range(1000))]
                for name in ("First", "Second")}),
        }
        for label, path in files.items():
            took, chars = _timed(path)
            print(f"{label} ({path.stat().st_size // 1024} KiB, {chars} chars of text): {took:.2f} s")


if __name__ == "__main__":
    main()
