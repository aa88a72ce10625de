"""The memory estimate the model dialog shows, from the GGUF header alone: checked on
synthetic GGUF files written here and against what llama.cpp itself reports for the real
default model (llama_model_size and its KV cache log line)."""

from __future__ import annotations

import ctypes
import re
import struct
from pathlib import Path

import pytest

from inference.gguf.memory_estimate import estimate_memory, model_shape
from inference.gguf.reader import GgufError, read_gguf_header

# ----- a tiny GGUF writer (version 3, little-endian) -----------------------------------------


def _str(s: str) -> bytes:
    data = s.encode()
    return struct.pack("<Q", len(data)) + data


def _kv(key: str, value) -> bytes:
    if isinstance(value, bool):
        return _str(key) + struct.pack("<I?", 7, value)
    if isinstance(value, int):
        return _str(key) + struct.pack("<II", 4, value)
    if isinstance(value, float):
        return _str(key) + struct.pack("<If", 6, value)
    if isinstance(value, str):
        return _str(key) + struct.pack("<I", 8) + _str(value)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return _str(key) + struct.pack("<IIQ", 9, 8, len(value)) + b"".join(_str(v) for v in value)
    return _str(key) + struct.pack("<IIQ", 9, 5, len(value)) + struct.pack(f"<{len(value)}i", *value)


def write_gguf(path: Path, metadata: dict, tensors: list[tuple[str, int]], alignment: int = 32) -> Path:
    """tensors: (name, byte size); each is stored as raw bytes, aligned like llama.cpp's."""
    header = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(metadata))
    header += b"".join(_kv(k, v) for k, v in metadata.items())
    offset, infos, data = 0, b"", b""
    for name, size in tensors:
        infos += _str(name) + struct.pack("<I", 1) + struct.pack("<Q", size) + struct.pack("<IQ", 24, offset)
        padded = -(-size // alignment) * alignment
        data += bytes([len(data) % 251]) * size + b"\0" * (padded - size)
        offset += padded
    head = header + infos
    head += b"\0" * (-len(head) % alignment)
    path.write_bytes(head + data)
    return path


TOY = {
    "general.architecture": "toy",
    "general.name": "Toy",
    "toy.block_count": 2,
    "toy.embedding_length": 64,
    "toy.attention.head_count": 8,
    "toy.attention.head_count_kv": 2,
    "toy.context_length": 512,
    "tokenizer.ggml.tokens": ["a", "b", "<eos>"],
    "tokenizer.ggml.token_type": [1, 1, 3],
    "toy.flag": True,
    "toy.eps": 1e-5,
}
TOY_TENSORS = [("token_embd.weight", 1000), ("blk.0.attn_q.weight", 300), ("blk.1.attn_q.weight", 310),
               ("output_norm.weight", 64), ("output.weight", 700)]


@pytest.fixture
def toy(tmp_path) -> Path:
    return write_gguf(tmp_path / "toy.gguf", TOY, TOY_TENSORS)


def test_the_reader_returns_metadata_and_the_tensor_table(toy) -> None:
    header = read_gguf_header(toy)
    assert header.version == 3 and header.architecture == "toy"
    assert header.arch_value("block_count") == 2
    assert header.metadata["toy.flag"] is True
    assert header.metadata["toy.eps"] == pytest.approx(1e-5)
    assert header.metadata["tokenizer.ggml.tokens"] == 3  # a vocabulary is kept as its size
    assert header.metadata["tokenizer.ggml.token_type"] == [1, 1, 3]
    assert [t.name for t in header.tensors] == [name for name, _ in TOY_TENSORS]
    assert header.data_offset % 32 == 0
    # sizes run to the next tensor: each one's own bytes plus its alignment padding
    assert [t.nbytes for t in header.tensors] == [1024, 320, 320, 64, 704]
    assert header.data_bytes == sum(t.nbytes for t in header.tensors) == toy.stat().st_size - header.data_offset


def test_not_gguf_truncated_and_missing_files_are_readable_errors(tmp_path, toy) -> None:
    (tmp_path / "notes.gguf").write_bytes(b"PK\x03\x04 a zip, not a model")
    with pytest.raises(GgufError, match="not a GGUF model file"):
        read_gguf_header(tmp_path / "notes.gguf")
    (tmp_path / "cut.gguf").write_bytes(toy.read_bytes()[:200])
    with pytest.raises(GgufError, match="truncated or damaged"):
        read_gguf_header(tmp_path / "cut.gguf")
    with pytest.raises(GgufError, match="cannot read missing.gguf"):
        read_gguf_header(tmp_path / "missing.gguf")


def test_kv_cache_is_two_times_layers_cells_and_the_gqa_width(toy) -> None:
    header = read_gguf_header(toy)
    shape = model_shape(header)
    assert (shape.n_layer, shape.n_embd_k_gqa, shape.n_embd_v_gqa) == (2, 16, 16)  # head 64/8 = 8, x 2 KV heads
    est = estimate_memory(header, n_ctx=1000)
    assert est.n_ctx == 1024  # llama.cpp pads the context to 256 cells
    assert est.kv_bytes == 2 * 2 * 1024 * 16 * 2
    assert est.weights_bytes == header.data_bytes
    assert est.total_bytes == est.weights_bytes + est.kv_bytes
    assert estimate_memory(header, n_ctx=1024, kv_type="q8_0").kv_bytes == 2 * 2 * 1024 * 16 * 34 // 32


def test_gpu_layers_move_the_last_blocks_then_the_output_layer(toy) -> None:
    header = read_gguf_header(toy)
    assert estimate_memory(header, 1024, gpu_layers=None, gpu_supported=False).gpu_bytes == 0
    one = estimate_memory(header, 1024, gpu_layers=1, gpu_supported=True)
    assert one.gpu_layers == 1
    assert one.weights_gpu_bytes == 320  # blk.1 only: llama.cpp offloads the last layers
    assert one.kv_gpu_bytes == one.kv_bytes // 2
    blocks = estimate_memory(header, 1024, gpu_layers=2, gpu_supported=True)
    assert blocks.weights_gpu_bytes == 640 and blocks.kv_gpu_bytes == blocks.kv_bytes
    everything = estimate_memory(header, 1024, gpu_layers=None, gpu_supported=True)
    assert everything.gpu_layers == 3  # the blocks and the output layer; embeddings stay on the CPU
    assert everything.weights_gpu_bytes == 640 + 64 + 704
    assert everything.gpu_bytes < everything.total_bytes


def test_a_header_without_layer_counts_is_refused(tmp_path) -> None:
    path = write_gguf(tmp_path / "odd.gguf", {"general.architecture": "toy"}, [("x", 32)])
    with pytest.raises(GgufError, match="lacks the layer count"):
        estimate_memory(read_gguf_header(path), n_ctx=512)


# ----- against llama.cpp, on the real model --------------------------------------------------

KV_LINE = re.compile(r"llama_kv_cache: size =\s+([\d.]+) MiB \(\s*(\d+) cells")


def llama_cpp_report(model_path: Path, n_ctx: int, reproducible: bool, kv_type: str = "f16") -> tuple[int, float, int]:
    """(llama_model_size, KV MiB and cells from llama.cpp's own log) for a real load."""
    import llama_cpp as ll

    from inference.params import LoadSettings
    from inference.worker import backend
    from inference.worker.runner import LlamaRunner

    backend.init_backend()
    lines: list[str] = []

    @ll.llama_log_callback
    def capture(_level: int, text: bytes, _user: ctypes.c_void_p) -> None:
        lines.append(text.decode("utf-8", "replace"))

    ll.llama_log_set(capture, ctypes.c_void_p())
    try:
        settings = LoadSettings(model_path=model_path, n_ctx=n_ctx, n_seq_max=4, reproducible=reproducible,
                                kv_type="f16" if reproducible else kv_type)
        loaded = LlamaRunner(settings)
    finally:
        ll.llama_log_set(backend._log_callback, ctypes.c_void_p())  # back to the app's handler
    try:
        match = KV_LINE.search("".join(lines))
        assert match, "llama.cpp did not log its KV cache size"
        return loaded.info.size_bytes, float(match.group(1)), int(match.group(2))
    finally:
        loaded.close()


@pytest.mark.model
@pytest.mark.parametrize(("n_ctx", "reproducible", "kv_type"),
                         [(1000, False, "f16"), (3000, True, "q8_0"), (2000, False, "q8_0"), (2000, False, "q4_0")])
def test_the_estimate_matches_what_llama_cpp_allocates(model_path, n_ctx, reproducible, kv_type) -> None:
    header = read_gguf_header(model_path)
    shape = model_shape(header)
    assert (shape.n_layer, shape.n_embd, shape.n_head, shape.n_embd_k_gqa) == (30, 576, 9, 192)
    est = estimate_memory(header, n_ctx=n_ctx, kv_type=kv_type)
    model_size, kv_mib, cells = llama_cpp_report(model_path, n_ctx, reproducible, kv_type)
    # Weights: the file's tensor bytes include each tensor's alignment padding (< 32 bytes);
    # llama_model_size counts the tensors alone. For this file they are equal.
    assert abs(est.weights_bytes - model_size) <= 32 * len(header.tensors)
    assert est.n_ctx == cells
    # llama.cpp logs MiB with two decimals: the estimate must agree to that rounding.
    assert est.kv_bytes / 2**20 == pytest.approx(kv_mib, abs=0.006)
