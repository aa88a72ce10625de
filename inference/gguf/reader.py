"""A small reader of GGUF headers: metadata and tensor table, no tensor data.

Enough to describe a model before llama.cpp loads it (the model dialog's memory estimate)
without importing llama.cpp or reading gigabytes. Format: github.com/ggml-org/ggml,
docs/gguf.md (little-endian; versions 2 and 3 use 64-bit counts and lengths).
"""

from __future__ import annotations

import io
import stat
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from inference.errors import ModelLoadError

MAGIC = b"GGUF"
DEFAULT_ALIGNMENT = 32
# Guards against reading a corrupt length as a request for gigabytes.
MAX_STRING_BYTES = 1 << 24
MAX_COUNT = 1 << 32

# Value types: fixed-size scalars by struct code, then string (8) and array (9).
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9


# Smallest sane GGUF: header + a few metadata entries. Anything shorter is certainly broken.
MIN_GGUF_BYTES = 1024


def check_gguf_file(path: Path) -> None:
    """Fail early, with a message a user understands, on files llama.cpp would reject."""
    try:
        info = path.stat()
    except FileNotFoundError:
        raise ModelLoadError(f"model file not found: {path}") from None
    except OSError as exc:  # a link loop, no permission on a folder above it, an I/O error
        raise ModelLoadError(f"cannot open model file {path}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(info.st_mode):
        raise ModelLoadError(f"model path is not a file: {path}")
    size = info.st_size
    with path.open("rb") as f:
        magic = f.read(4)
    if magic != MAGIC:
        raise ModelLoadError(f"{path.name} is not a GGUF model file (starts with {magic!r})")
    if size < MIN_GGUF_BYTES:
        raise ModelLoadError(f"{path.name} is too small to be a model ({size} bytes)")


class GgufError(ValueError):
    """The file is not a GGUF file this reader understands (message says why)."""


def as_int(value: object) -> int:
    """A metadata value read as a number (or numeric text) as an int. Raises TypeError for
    anything else (a list, None) and ValueError for text that is no number."""
    if isinstance(value, (int, float, str)):
        return int(value)
    raise TypeError(f"expected a number, got {type(value).__name__}")


def as_float(value: object) -> float:
    if isinstance(value, (int, float, str)):
        return float(value)
    raise TypeError(f"expected a number, got {type(value).__name__}")


@dataclass(frozen=True, slots=True)
class TensorInfo:
    name: str
    shape: tuple[int, ...]
    ggml_type: int
    offset: int  # from the start of the data section
    nbytes: int  # up to the next tensor (or the end): its data plus alignment padding


@dataclass(frozen=True, slots=True)
class GgufHeader:
    path: Path
    version: int
    metadata: dict[str, object]  # string arrays are kept as their length only (see _read_value)
    tensors: tuple[TensorInfo, ...]
    data_offset: int
    file_size: int

    @property
    def architecture(self) -> str:
        return str(self.metadata.get("general.architecture", ""))

    def arch_value(self, key: str, default: object = None) -> object:
        """`<architecture>.<key>`, e.g. arch_value("block_count")."""
        return self.metadata.get(f"{self.architecture}.{key}", default)

    @property
    def data_bytes(self) -> int:
        return self.file_size - self.data_offset


def read_gguf_header(path: Path) -> GgufHeader:
    path = Path(path)
    try:
        size = path.stat().st_size
        with path.open("rb") as f:
            return _read(f, path, size)
    except OSError as exc:
        raise GgufError(f"cannot read {path.name}: {exc.strerror or exc}") from None
    except (struct.error, EOFError, UnicodeDecodeError):
        raise GgufError(f"{path.name} is truncated or damaged (its GGUF header does not parse)") from None


def read_gguf_header_prefix(data: bytes, name: str, file_size: int) -> GgufHeader | None:
    """The header from the first bytes of a file of file_size bytes (a ranged HTTP read);
    None when data ends before the header does: read more and ask again."""
    try:
        return _read(io.BytesIO(data), Path(name), file_size)
    except (struct.error, EOFError):
        return None
    except UnicodeDecodeError:
        raise GgufError(f"{name} is damaged (its GGUF header does not parse)") from None


def _read(f: BinaryIO, path: Path, size: int) -> GgufHeader:
    magic = f.read(4)
    if magic != MAGIC:
        raise GgufError(f"{path.name} is not a GGUF model file (starts with {magic!r})")
    (version,) = _unpack(f, "<I")
    if version not in (2, 3):
        raise GgufError(f"{path.name} uses GGUF version {version}; this reader knows 2 and 3")
    n_tensors, n_kv = _unpack(f, "<QQ")
    if n_tensors > MAX_COUNT or n_kv > MAX_COUNT:
        raise GgufError(f"{path.name} is damaged (impossible counts in its header)")
    metadata: dict[str, object] = {}
    for _ in range(n_kv):
        key = _read_string(f)
        (value_type,) = _unpack(f, "<I")
        metadata[key] = _read_value(f, value_type)
    raw = []
    for _ in range(n_tensors):
        name = _read_string(f)
        (n_dims,) = _unpack(f, "<I")
        shape = _unpack(f, f"<{n_dims}Q")
        ggml_type, offset = _unpack(f, "<IQ")
        raw.append((name, tuple(shape), ggml_type, offset))
    alignment = as_int(metadata.get("general.alignment", DEFAULT_ALIGNMENT) or DEFAULT_ALIGNMENT)
    data_offset = -(-f.tell() // alignment) * alignment
    if data_offset > size:
        raise GgufError(f"{path.name} is truncated (no tensor data after its header)")
    return GgufHeader(path, version, metadata, _with_sizes(raw, size - data_offset), data_offset, size)


def _with_sizes(raw: list[tuple], data_bytes: int) -> tuple[TensorInfo, ...]:
    # A tensor's bytes run to the next tensor's offset: no table of ggml type sizes needed,
    # at the cost of counting each tensor's alignment padding (< 32 bytes) as its own.
    ordered = sorted(raw, key=lambda t: t[3])
    ends = [t[3] for t in ordered[1:]] + [data_bytes]
    return tuple(TensorInfo(n, s, t, off, max(0, end - off)) for (n, s, t, off), end in zip(ordered, ends))


def _unpack(f: BinaryIO, fmt: str) -> tuple:
    n = struct.calcsize(fmt)
    data = f.read(n)
    if len(data) != n:
        raise EOFError
    return struct.unpack(fmt, data)


def _read_string(f: BinaryIO) -> str:
    (n,) = _unpack(f, "<Q")
    if n > MAX_STRING_BYTES:
        raise GgufError(f"damaged GGUF header (a {n}-byte string)")
    data = f.read(n)
    if len(data) != n:
        raise EOFError
    return data.decode("utf-8")


def _read_value(f: BinaryIO, value_type: int) -> object:
    if value_type in _SCALARS:
        return _unpack(f, _SCALARS[value_type])[0]
    if value_type == _STRING:
        return _read_string(f)
    if value_type == _ARRAY:
        item_type, count = _unpack(f, "<IQ")
        if count > MAX_COUNT:
            raise GgufError(f"damaged GGUF header (an array of {count} items)")
        if item_type in _SCALARS:
            return list(_unpack(f, "<" + _SCALARS[item_type][1] * count))
        if item_type == _STRING:
            # A vocabulary is 50k-250k strings: skip their bytes, keep how many there are.
            for _ in range(count):
                (n,) = _unpack(f, "<Q")
                f.seek(n, 1)
            return count
        raise GgufError(f"unsupported GGUF array item type {item_type}")
    raise GgufError(f"unsupported GGUF value type {value_type}")
