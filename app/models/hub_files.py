"""A repository's GGUF files as the Hub lists them, grouped into models: quantization names
from the file names, split GGUFs (`name-00001-of-00003.gguf`, llama.cpp's gguf-split naming)
as one file with its parts in order."""

from __future__ import annotations

import re
from collections.abc import Iterable

from app.models.hub_types import HubFile, HubFilePart

# llama.cpp's split naming (llama_split_path: "%s-%05d-of-%05d.gguf").
_SPLIT = re.compile(r"^(?P<prefix>.+)-(?P<no>\d{5})-of-(?P<count>\d{5})\.gguf$", re.IGNORECASE)
# Quantization names as llama.cpp's quantize tool and the usual uploaders spell them.
_QUANT = re.compile(
    r"(?:^|[-_.])("
    r"IQ[1-4]_(?:XXS|XS|S|M|NL)|IQ[1-4]"
    r"|Q[2-8]_K(?:_(?:XL|XS|S|M|L))?|Q[2-8]_[01](?:_[48])?|Q[2-8]"
    r"|TQ[12]_0|MXFP4(?:_MOE)?|BF16|F16|FP16|F32|FP32"
    r")(?=$|[-_.])",
    re.IGNORECASE,
)
# Files that are GGUF but not a model to run on its own (vision projectors).
_NOT_MODELS = re.compile(r"(^|/)mmproj", re.IGNORECASE)


def quant_of(filename: str) -> str | None:
    """The quantization named in a file name ("Q4_K_M"), or None."""
    stem = filename.rsplit("/", 1)[-1]
    stem = stem[: -len(".gguf")] if stem.lower().endswith(".gguf") else stem
    split = _SPLIT.match(stem + ".gguf")
    if split:
        stem = split.group("prefix")
    found = _QUANT.findall(stem)
    return found[-1].upper() if found else None


def model_stem(filename: str) -> str:
    """The file name without folder, split suffix and quant: the same for every quant of a model."""
    stem = filename.rsplit("/", 1)[-1]
    split = _SPLIT.match(stem)
    stem = split.group("prefix") if split else stem[: -len(".gguf")] if stem.lower().endswith(".gguf") else stem
    return _QUANT.sub("", stem).lower()


def group_gguf_files(repo_id: str, parts: Iterable[HubFilePart], revision: str | None = None) -> list[HubFile]:
    """GGUF model files of a repository, split ones grouped, sorted by size."""
    singles: list[HubFile] = []
    splits: dict[tuple[str, int], dict[int, HubFilePart]] = {}
    for part in parts:
        if not part.filename.lower().endswith(".gguf") or _NOT_MODELS.search(part.filename):
            continue
        match = _SPLIT.match(part.filename)
        if match is None:
            singles.append(HubFile(repo_id, part.filename, quant_of(part.filename), (part,), revision))
            continue
        key = (match.group("prefix"), int(match.group("count")))
        splits.setdefault(key, {})[int(match.group("no"))] = part
    for (_prefix, count), numbered in splits.items():
        # A split whose parts are not all listed cannot be loaded: leave it out.
        if sorted(numbered) != list(range(1, count + 1)):
            continue
        ordered = tuple(numbered[n] for n in range(1, count + 1))
        singles.append(HubFile(repo_id, ordered[0].filename, quant_of(ordered[0].filename), ordered, revision))
    return sorted(singles, key=lambda f: (f.size_bytes, f.name))
