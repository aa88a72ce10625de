"""Splits a GGUF file the way llama.cpp's gguf-split does (tools/gguf-split/gguf-split.cpp),
for the stand-in Hub's split model: no such tool ships with llama-cpp-python.

Each part is a whole GGUF file. The first keeps every metadata key of the original; every
part gets split.no (u16, from 0), split.count (u16) and split.tensors.count (i32, all parts
together), and holds a run of the tensors, their offsets counted from its own data section.
Parts are named <prefix>-00001-of-0000N.gguf (llama_split_path), which is how llama.cpp,
given the first part, finds the others. Cutting a file into byte ranges would not load.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

_SCALAR = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
_STRING, _ARRAY = 8, 9
_U16, _I32 = 2, 5


@dataclass
class _Tensor:
    name: bytes
    info_tail: bytes  # n_dims, dims, type: everything but the offset
    offset: int
    nbytes: int


def split_gguf(source: Path, out_dir: Path, prefix: str, n_parts: int = 2) -> list[Path]:
    with source.open("rb") as f:
        version, kvs, tensors, data_offset, alignment = _parse(f)
        size = source.stat().st_size
        ordered = sorted(tensors, key=lambda t: t.offset)
        ends = [t.offset for t in ordered[1:]] + [size - data_offset]
        for t, end in zip(ordered, ends):
            t.nbytes = end - t.offset
        groups = [ordered[i * len(ordered) // n_parts:(i + 1) * len(ordered) // n_parts] for i in range(n_parts)]
        paths = []
        for i, group in enumerate(groups):
            path = out_dir / f"{prefix}-{i + 1:05d}-of-{n_parts:05d}.gguf"
            split_kvs = [_kv("split.no", _U16, struct.pack("<H", i)),
                         _kv("split.count", _U16, struct.pack("<H", n_parts)),
                         _kv("split.tensors.count", _I32, struct.pack("<i", len(ordered)))]
            part_kvs = (kvs if i == 0 else [kv for kv in kvs if kv.startswith(_key("general.alignment"))]) + split_kvs
            _write(path, f, version, part_kvs, group, data_offset, alignment)
            paths.append(path)
    return paths


def _write(path: Path, src: BinaryIO, version: int, kvs: list[bytes], tensors: list[_Tensor],
           src_data: int, alignment: int) -> None:
    with path.open("wb") as out:
        out.write(b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kvs)))
        for kv in kvs:
            out.write(kv)
        offset = 0
        placed = []
        for t in tensors:
            out.write(struct.pack("<Q", len(t.name)) + t.name + t.info_tail + struct.pack("<Q", offset))
            placed.append(offset)
            offset = _align(offset + t.nbytes, alignment)
        out.write(b"\0" * (_align(out.tell(), alignment) - out.tell()))
        start = out.tell()
        for t, at in zip(tensors, placed):
            out.write(b"\0" * (start + at - out.tell()))
            src.seek(src_data + t.offset)
            out.write(src.read(t.nbytes))


def _parse(f: BinaryIO) -> tuple[int, list[bytes], list[_Tensor], int, int]:
    assert f.read(4) == b"GGUF"
    version, n_tensors, n_kv = struct.unpack("<IQQ", f.read(20))
    kvs, alignment = [], 32
    for _ in range(n_kv):
        start = f.tell()
        key = _string(f)
        (vtype,) = struct.unpack("<I", f.read(4))
        if key == b"general.alignment":
            (alignment,) = struct.unpack("<I", f.read(4))
        else:
            _skip_value(f, vtype)
        end = f.tell()
        f.seek(start)
        kvs.append(f.read(end - start))
    tensors = []
    for _ in range(n_tensors):
        name = _string(f)
        (n_dims,) = struct.unpack("<I", f.read(4))
        tail = struct.pack("<I", n_dims) + f.read(8 * n_dims + 4)
        (offset,) = struct.unpack("<Q", f.read(8))
        tensors.append(_Tensor(name, tail, offset, 0))
    return version, kvs, tensors, _align(f.tell(), alignment), alignment


def _skip_value(f: BinaryIO, vtype: int) -> None:
    if vtype in _SCALAR:
        f.seek(_SCALAR[vtype], 1)
    elif vtype == _STRING:
        _string(f)
    elif vtype == _ARRAY:
        item, count = struct.unpack("<IQ", f.read(12))
        if item in _SCALAR:
            f.seek(_SCALAR[item] * count, 1)
        else:
            for _ in range(count):
                _skip_value(f, item)
    else:
        raise ValueError(f"GGUF value type {vtype}")


def _string(f: BinaryIO) -> bytes:
    (n,) = struct.unpack("<Q", f.read(8))
    return f.read(n)


def _key(name: str) -> bytes:
    raw = name.encode()
    return struct.pack("<Q", len(raw)) + raw


def _kv(name: str, vtype: int, value: bytes) -> bytes:
    return _key(name) + struct.pack("<I", vtype) + value


def _align(n: int, alignment: int) -> int:
    return -(-n // alignment) * alignment
