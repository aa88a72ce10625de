"""A repository's GGUF files as the Hub lists them, grouped into models: quantization names
from the file names, split GGUFs (`name-00001-of-00003.gguf`, llama.cpp's gguf-split naming)
as one file with its parts in order, and a vision model's projector.

A repository with `mmproj*.gguf` files holds a vision model: each model file gets one of
them as its projector (HubFile.projector), by this rule (choose_projector):
1. the projector whose quant is the model file's own (Q8_0 with Q8_0, F16 with F16);
2. else the F16 one (llama.cpp's converter writes projectors in F16 by default, and most
   repositories have one; BF16 next, then F32);
3. else the smallest.
Among projectors equal by that rule, one whose name carries the model's name wins (a
repository of several models), then the smaller. The projector is downloaded beside the
model and becomes its library default (ModelDefaults.mmproj).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import replace

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


def is_projector(filename: str) -> bool:
    """A vision projector's GGUF (mmproj*.gguf), not a model to run on its own."""
    return filename.lower().endswith(".gguf") and _NOT_MODELS.search(filename) is not None


# The precisions a projector falls back to when none has the model's quant, best first.
_FALLBACK_QUANTS = ("F16", "FP16", "BF16", "F32", "FP32")


def choose_projector(model: HubFile, projectors: Sequence[HubFile]) -> HubFile | None:
    """The projector for model among a repository's (the rule in the module's docstring)."""
    if not projectors:
        return None
    stem = model_stem(model.name)

    def rank(p: HubFile) -> tuple[int, int, int, str]:
        quant = (p.quant or "").upper()
        if model.quant and quant == model.quant.upper():
            tier = 0
        elif quant in _FALLBACK_QUANTS:
            tier = 1 + _FALLBACK_QUANTS.index(quant)
        else:
            tier = 1 + len(_FALLBACK_QUANTS)
        own = 0 if stem and stem.strip("-_.") in model_stem(p.name) else 1
        return tier, own, p.size_bytes, p.name

    return min(projectors, key=rank)


def projector_reason(model: HubFile) -> str:
    """Why model.projector was chosen, in a few words ("its own quant", "F16", "the smallest")."""
    projector = model.projector
    if projector is None:
        return ""
    quant = (projector.quant or "").upper()
    if model.quant and quant == model.quant.upper():
        return f"the model's own quant, {quant}"
    if quant in _FALLBACK_QUANTS:
        return f"{quant}: none has the model's quant"
    return "the smallest: none has the model's quant or F16"


def group_gguf_files(repo_id: str, parts: Iterable[HubFilePart], revision: str | None = None) -> list[HubFile]:
    """GGUF model files of a repository, split ones grouped, sorted by size; each with its
    vision projector where the repository has mmproj files."""
    parts = list(parts)
    projectors = projector_files(repo_id, parts, revision)
    models = _model_files(repo_id, parts, revision)
    if projectors:
        models = [replace(f, projector=choose_projector(f, projectors)) for f in models]
    return models


def projector_files(repo_id: str, parts: Iterable[HubFilePart], revision: str | None = None) -> list[HubFile]:
    """The repository's vision projectors (mmproj*.gguf), smallest first."""
    found = [HubFile(repo_id, p.filename, quant_of(p.filename), (p,), revision) for p in parts
             if is_projector(p.filename)]
    return sorted(found, key=lambda f: (f.size_bytes, f.name))


def _model_files(repo_id: str, parts: Iterable[HubFilePart], revision: str | None) -> list[HubFile]:
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
