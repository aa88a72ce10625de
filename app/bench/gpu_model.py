"""A model for `make gpu-check` that fits what travels to the lent GPU machine (64 MiB with
the checkout and the sources): SmolLM2-135M itself is 98 MB at Q4_1, and no smaller
quantization of it exists (its 576-wide rows take no 256-wide k-quant; Q4_0, the smallest
32-wide type, would still be 77 MB).

The stand-in is the real file with the weights of layers N.. replaced by those of layers
0..N-1 (layer i holds layer i mod N's tensors): the same header, tokenizer, chat template,
tensor shapes, types and offsets, so llama.cpp loads it the same way and a step costs the
same (the GPU reads the same bytes from distinct addresses; what a step costs does not
depend on the weights' values), while its text is not the real model's. Repeated layers cost
almost nothing in an xz stream whose window holds the first copy, so it travels as
28 MB of embeddings, N distinct layers and the header, xz-compressed."""

from __future__ import annotations

import hashlib
import lzma
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from inference.gguf import GgufHeader, TensorInfo, read_gguf_header

REAL_LAYERS = 8
XZ_PRESET = 9  # a 64 MiB window: the first copy of each layer is within reach of every repeat
CHUNK = 1 << 20
_LAYER_TENSOR = re.compile(r"^blk\.(\d+)\.(.+)$")


class StandInError(ValueError):
    pass


@dataclass(frozen=True)
class StandIn:
    path: Path
    source: str  # the real model's file name
    n_layer: int
    real_layers: int
    replaced_tensors: int


def layer_source(name: str, real_layers: int) -> str | None:
    """The tensor whose data a tensor of the stand-in holds, when it is not its own: layer i
    of N.. takes layer i mod N's tensor of the same name."""
    match = _LAYER_TENSOR.match(name)
    if match is None or int(match[1]) < real_layers:
        return None
    return f"blk.{int(match[1]) % real_layers}.{match[2]}"


def write_stand_in(model: Path, out: Path, real_layers: int = REAL_LAYERS) -> StandIn:
    """out: model with layers real_layers.. holding copies of layers 0..real_layers-1."""
    header = read_gguf_header(model)
    n_layer = header.metadata.get(f"{header.metadata.get('general.architecture')}.block_count")
    if not isinstance(n_layer, int) or not 0 < real_layers < n_layer:
        raise StandInError(f"{model.name} has {n_layer} layers: cannot keep {real_layers} of them")
    by_name = {t.name: t for t in header.tensors}
    shutil.copyfile(model, out)
    replaced = 0
    with model.open("rb") as src, out.open("r+b") as dst:
        for tensor in header.tensors:
            source_name = layer_source(tensor.name, real_layers)
            if source_name is None:
                continue
            source = _same_layout(by_name.get(source_name), tensor, source_name)
            src.seek(header.data_offset + source.offset)
            dst.seek(header.data_offset + tensor.offset)
            dst.write(src.read(source.nbytes))
            replaced += 1
    return StandIn(out, model.name, n_layer, real_layers, replaced)


def _same_layout(source: TensorInfo | None, tensor: TensorInfo, source_name: str) -> TensorInfo:
    if source is None or (source.shape, source.ggml_type, source.nbytes) != (tensor.shape, tensor.ggml_type,
                                                                             tensor.nbytes):
        raise StandInError(f"{tensor.name} and {source_name} differ in shape, type or size")
    return source


def compress(path: Path, out: Path) -> None:
    with path.open("rb") as src, lzma.open(out, "wb", preset=XZ_PRESET) as dst:
        shutil.copyfileobj(src, dst, CHUNK)


def decompress(archive: Path, out: Path) -> None:
    with lzma.open(archive, "rb") as src, out.open("wb") as dst:
        shutil.copyfileobj(src, dst, CHUNK)


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(CHUNK):
            digest.update(block)
    return digest.hexdigest()


def layer_bytes(header: GgufHeader, layer: int) -> int:
    """The bytes of one layer's tensors in the file (what each distinct layer adds)."""
    return sum(t.nbytes for t in header.tensors if t.name.startswith(f"blk.{layer}."))
