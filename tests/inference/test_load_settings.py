"""LoadSettings' KV cache type and flash attention: what the context gets, and the
combinations llama.cpp refuses named before a load."""

from __future__ import annotations

from pathlib import Path

import pytest

from inference.params import LoadSettings

M = Path("model.gguf")


def test_the_cache_type_and_flash_attention_each_setting_gives() -> None:
    assert (LoadSettings(M).cache_type(), LoadSettings(M).uses_flash_attn()) == ("f16", None)
    assert (LoadSettings(M, kv_type="q4_0").cache_type(), LoadSettings(M, kv_type="q4_0").uses_flash_attn()) == \
        ("q4_0", True)  # a quantized V needs flash attention
    assert LoadSettings(M, flash_attn=False).uses_flash_attn() is False
    assert (LoadSettings(M, reproducible=True).cache_type(), LoadSettings(M, reproducible=True).uses_flash_attn()) == \
        ("q8_0", True)


@pytest.mark.parametrize(("fields", "reason"), [
    ({"kv_type": "q5_1"}, "kv_type must be one of f16, q8_0, q4_0"),
    ({"kv_type": "q8_0", "flash_attn": False}, "needs flash attention"),
    ({"reproducible": True, "kv_type": "q4_0"}, "reproducible mode uses a q8_0 KV cache"),
    ({"speculative": "medusa"}, "speculative must be one of off, lookup"),
    ({"draft_max": 0}, "draft_max must be in 1..64"),
])
def test_settings_llama_cpp_would_refuse_are_named(fields, reason) -> None:
    with pytest.raises(ValueError, match=reason):
        LoadSettings(M, **fields).validate()
