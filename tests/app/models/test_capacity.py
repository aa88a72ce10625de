"""The capacity planner (`chorus models fit`, `--chats-that-fit`): chats of a context that
fit the memory free, for each KV cache type, on a GGUF header written here."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.models import capacity
from inference import LoadSettings
from inference.gguf import read_gguf_header
from tests.inference.gguf.test_memory_estimate import TOY_TENSORS, write_gguf

TOY = {  # 2 layers, a K and V width of 16 per cell: f16 128 bytes a cell
    "general.architecture": "toy", "toy.block_count": 2, "toy.embedding_length": 64,
    "toy.attention.head_count": 8, "toy.attention.head_count_kv": 2, "toy.context_length": 4096,
}
PER_CELL = {"f16": 2 * 2 * 16 * 2, "q8_0": 2 * 2 * 16 * 34 / 32, "q4_0": 2 * 2 * 16 * 18 / 32}


@pytest.fixture
def header(tmp_path: Path):
    return read_gguf_header(write_gguf(tmp_path / "toy.gguf", TOY, TOY_TENSORS))


def test_each_kv_type_fits_as_many_chats_as_its_bytes_per_cell_allow(header) -> None:
    ram = int((capacity.COMPUTE_MARGIN + header.data_bytes + 100 * 1024 * PER_CELL["f16"]) / capacity.RAM_FITS) + 1
    rows = {(r.kv_type, r.ctx_per_chat): r for r in capacity.plan(header, ram, None, False, contexts=(1024, 2048))}
    assert rows[("f16", 1024)].chats == 100 and rows[("f16", 2048)].chats == 50
    assert rows[("q8_0", 1024)].chats == int(100 * 2 / (34 / 32))  # 188
    assert rows[("q4_0", 1024)].chats == capacity.MAX_CHATS  # 355 would fit: llama.cpp holds 256
    assert rows[("q4_0", 2048)].chats == 177
    assert {r.limit for r in rows.values()} == {"RAM"}
    assert rows[("q8_0", 2048)].kv_bytes_per_chat == pytest.approx(2048 * PER_CELL["q8_0"])
    assert capacity.plan(header, capacity.COMPUTE_MARGIN, None, False)[0].chats == 0  # not even one


def test_the_gpu_limits_when_the_model_goes_there(header) -> None:
    ram = 10**12
    gpu = int((capacity.COMPUTE_MARGIN + header.data_bytes + 10 * 1024 * PER_CELL["f16"]) / capacity.GPU_FITS) + 10**4
    (row,) = capacity.plan(header, ram, gpu, True, contexts=(1024,), kv_types=("f16",))
    assert (row.limit, row.chats) == ("GPU memory", 10)


def test_chats_that_fit_sets_the_sequences_and_the_context(header, tmp_path) -> None:
    ram = int((capacity.COMPUTE_MARGIN + header.data_bytes + 40 * 2048 * PER_CELL["q8_0"]) / capacity.RAM_FITS) + 1
    base = LoadSettings(model_path=tmp_path / "toy.gguf", kv_type="q8_0")
    fitted = capacity.chats_that_fit(base, header, 2048, ram, None, False)
    assert (fitted.n_seq_max, fitted.n_ctx, fitted.kv_type) == (40, 40 * 2048, "q8_0")
    fitted.validate()
    with pytest.raises(ValueError, match="not one chat of 2048 tokens fits in RAM with a f16 KV cache"):
        capacity.chats_that_fit(LoadSettings(model_path=base.model_path), header, 2048, capacity.COMPUTE_MARGIN, None,
                                False)
