"""An input's rows as job items: CSV (a header row names the columns), JSONL (one object a
line), or a folder (one item a file, its text attached to the prompt). A broken row becomes
an item already failed with its reason; the rest go on."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from app.jobs.spec import DOCUMENT
from storage import ItemInput

MAX_INPUT_BYTES = 200 * 1024 * 1024


class InputError(ValueError):
    """The whole input cannot be read (too big, no rows, unknown format)."""


def read_rows(path: Path) -> list[ItemInput]:
    if path.is_dir():
        return folder_rows(path)
    size = path.stat().st_size
    if size > MAX_INPUT_BYTES:
        raise InputError(f"{path.name}: {size} bytes, over the {MAX_INPUT_BYTES}-byte limit")
    text = path.read_text(encoding="utf-8-sig", errors="replace")
    if path.suffix.lower() == ".csv":
        return csv_rows(text)
    if path.suffix.lower() in (".jsonl", ".ndjson"):
        return jsonl_rows(text)
    raise InputError(f"{path.name}: not a .csv or .jsonl file, nor a folder")


def folder_rows(folder: Path) -> list[ItemInput]:
    """Every file of a folder (not its subfolders, not hidden files), by name: an item each,
    its name the column `file`, the file itself read when the item runs and attached to its
    prompt (a file Chorus cannot read fails its item with the reason; the others go on)."""
    files = sorted((p for p in folder.iterdir() if p.is_file() and not p.name.startswith(".")), key=lambda p: p.name)
    if not files:
        raise InputError(f"{folder.name}: the folder holds no file")
    return [ItemInput(fields={"file": p.name, DOCUMENT: str(p.resolve())}) for p in files]


def csv_rows(text: str) -> list[ItemInput]:
    reader = csv.reader(io.StringIO(text, newline=""))
    header = next(reader, None)
    if not header:
        raise InputError("the CSV has no header row")
    items = []
    for row in reader:
        if not row:
            continue
        if len(row) != len(header):
            items.append(ItemInput(fields={"row": row}, error=(
                f"line {reader.line_num}: {len(row)} fields where the header has {len(header)}")))
        else:
            items.append(ItemInput(fields=dict(zip(header, row))))
    return items


def jsonl_rows(text: str) -> list[ItemInput]:
    items = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as bad:
            items.append(ItemInput(fields={"line": line[:200]}, error=f"line {number}: not JSON ({bad.msg})"))
            continue
        if not isinstance(row, dict):
            items.append(ItemInput(fields={"line": line[:200]}, error=f"line {number}: not a JSON object"))
        else:
            items.append(ItemInput(fields=row))
    return items
