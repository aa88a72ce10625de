"""A model's name as people read it, from its GGUF file's name: "SmolLM2-135M-Instruct.Q4_1.gguf"
is "SmolLM2 135M Instruct", quantised Q4_1 (the picker, which shows the file in its tooltip)."""

from __future__ import annotations

import re
from dataclasses import dataclass

# A quantisation at the end of the stem: llama.cpp's types (Q4_K_M, IQ2_XS, Q8_0, TQ1_0...),
# the float ones, and the Unsloth style "UD-Q4_K_XL".
_QUANT = re.compile(r"[-._ ](?P<quant>(?:UD-)?(?:I?Q\d(?:_[A-Z0-9]+)*|TQ\d_\d|F16|F32|BF16|MXFP4))$", re.IGNORECASE)
_SPLIT = re.compile(r"-\d{5}-of-\d{5}$")  # a split model's part number


@dataclass(frozen=True, slots=True)
class ModelTitle:
    name: str
    quant: str = ""  # "" when the file name does not say


def model_title(file_name: str) -> ModelTitle:
    stem = re.sub(r"\.gguf$", "", file_name, flags=re.IGNORECASE)
    stem = _SPLIT.sub("", stem)
    found = _QUANT.search(stem)
    quant = found.group("quant").upper() if found else ""
    name = stem[: found.start()] if found else stem
    name = re.sub(r"[-_]+", " ", name).strip() or stem
    return ModelTitle(name, quant)
