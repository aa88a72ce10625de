"""A model's files on disk: one GGUF, or the parts of a split one, and their size.

A split GGUF (llama.cpp's gguf-split) is named X-00001-of-00003.gguf, X-00002-of-00003.gguf,
...; llama.cpp loads it through its first part and finds the others next to it.
"""

from __future__ import annotations

import re
from pathlib import Path

SPLIT = re.compile(r"^(?P<stem>.+)-(?P<index>\d{5})-of-(?P<count>\d{5})\.gguf$", re.IGNORECASE)


def parts_of(path: Path) -> list[Path]:
    """Every file of the model whose (first) file is path, present or not, first part first."""
    match = SPLIT.match(path.name)
    if match is None:
        return [path]
    stem, count = match["stem"], int(match["count"])
    width = len(match["count"])
    return [path.with_name(f"{stem}-{i:0{width}d}-of-{count:0{width}d}.gguf") for i in range(1, count + 1)]


def is_later_part(path: Path) -> bool:
    """A split model's second or later part: listed and loaded through its first."""
    match = SPLIT.match(path.name)
    return match is not None and int(match["index"]) > 1


def size_on_disk(path: Path) -> int:
    """Bytes of all the model's files that are there (0 for none)."""
    total = 0
    for part in parts_of(path):
        try:
            total += part.stat().st_size
        except OSError:  # missing or unreadable: counts as nothing
            continue
    return total


def all_present(path: Path) -> bool:
    """Every part of the model is a file on disk."""
    try:
        return all(part.is_file() for part in parts_of(path))
    except OSError:
        return False
