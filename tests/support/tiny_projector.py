"""Tiny vision projectors for the tests' models, for tests of the image path.

No real vision model can be downloaded on the machines the tests run on, so the tests make
them: projector GGUFs in three of the formats llama.cpp's `tools/mtmd/clip.cpp` reads, with
random weights and an output width of the text model's n_embd, which is all
`mtmd_init_from_file` checks against it. Their embeddings mean nothing, but they are real
embeddings, encoded by libmtmd and decoded by llama.cpp as a real vision model's are:

- "mlp" (LLaVA) for SmolLM2-135M: a 32x32 image in 4x4 patches, 64 image tokens, the rows
  alone in the prompt.
- "idefics3" (SmolVLM, whose text model is SmolLM2) for the SmolVLM stand-in
  (tests/support/standin_models.py): an image resized to 64 pixels on its longer side and cut
  in 32x32 tiles, each tile and an overview 16 tokens (pixel shuffle by 2), between
  SmolVLM's markers: `<fake_token_around_image><global-img>`, `<row_1_col_1>`...
- "gemma3" for Gemma 3 270M (n_embd 640): one 32x32 piece pooled to 16 tokens between
  `<start_of_image>` and `<end_of_image>`, whose rows attend to each other both ways.
- "qwen2vl" (Qwen2-VL's merger) for the Qwen2-VL stand-in (SmolLM2 as llama.cpp's "qwen2vl",
  tests/support/standin_models.py): the image at about its own size in multiples of 8
  pixels, a token for each 8x8 (2x2 patches merged), its rows at M-RoPE's 2-D positions
  between `<|vision_start|>` and `<|vision_end|>` (plain text in SmolLM2's vocabulary).

    python -m tests.support.tiny_projector OUT.gguf [--kind mlp|idefics3|gemma3|qwen2vl] [--seed N]

The ViT, as clip.cpp's loader reads it: 4x4 patches, blocks of attention and a GELU FFN
(LLaVA's graph runs all but the last block). numpy shapes are (out, in); GGUF stores them
reversed, which is ggml's [in, out].
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np

IMAGE_SIZE = 32
PATCH_SIZE = 4
IMAGE_TOKENS = (IMAGE_SIZE // PATCH_SIZE) ** 2  # the "mlp" projector's tokens per image
TEXT_EMBD = 576  # SmolLM2-135M's n_embd: the projector's output width
GEMMA_TEXT_EMBD = 640  # Gemma 3 270M's
MERGE = 2  # idefics3's pixel shuffle and gemma3's pooling: 2x2 patches a token
PIECE_TOKENS = IMAGE_TOKENS // MERGE**2  # idefics3's tokens per tile and overview; gemma3's per image
LONGEST_EDGE = 64  # idefics3: the longer side the image is resized to before its tiles
KINDS = ("mlp", "idefics3", "gemma3", "qwen2vl")
_EMBD = 64
_HEADS = 4
_FFN = 96  # not _EMBD: clip.cpp swaps up/down of old LLaVA files whose ffn_down is n_embd wide
_BLOCKS = 2
_MM_HIDDEN = 128


def tiles(width: int, height: int) -> int:
    """How many tiles the idefics3 projector cuts a width x height image in (and one overview)."""
    long_side, short_side = max(width, height), min(width, height)
    resized = int(LONGEST_EDGE / (long_side / short_side))
    resized += resized % 2
    return -(-LONGEST_EDGE // IMAGE_SIZE) * -(-resized // IMAGE_SIZE)


def write_tiny_projector(path: Path, seed: int = 0, text_embd: int = TEXT_EMBD, kind: str = "mlp") -> Path:
    """Writes the projector to `path` (the same bytes for the same seed) and returns it."""
    import gguf  # the test extra; imported here so that importing the constants needs no gguf

    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}")
    rng = np.random.default_rng(seed)

    def weight(*shape: int, scale: float = 0.0) -> np.ndarray:
        fan_in = shape[-1] if len(shape) == 2 else int(np.prod(shape[1:]))
        return (rng.standard_normal(shape) * (scale or fan_in ** -0.5)).astype(np.float32)

    path.parent.mkdir(parents=True, exist_ok=True)
    writer = gguf.GGUFWriter(str(path), "clip")
    writer.add_name(f"chorus tiny {kind} projector (tests)")
    writer.add_bool("clip.has_vision_encoder", True)
    writer.add_bool("clip.has_llava_projector", kind == "mlp")
    writer.add_string("clip.projector_type", "qwen2vl_merger" if kind == "qwen2vl" else kind)
    writer.add_bool("clip.use_gelu", True)
    writer.add_uint32("clip.vision.image_size", IMAGE_SIZE)
    writer.add_uint32("clip.vision.patch_size", PATCH_SIZE)
    writer.add_uint32("clip.vision.embedding_length", _EMBD)
    writer.add_uint32("clip.vision.feed_forward_length", _FFN)
    writer.add_uint32("clip.vision.block_count", _BLOCKS)
    writer.add_uint32("clip.vision.projection_dim", text_embd)
    writer.add_uint32("clip.vision.attention.head_count", _HEADS)
    writer.add_float32("clip.vision.attention.layer_norm_epsilon", 1e-6)
    writer.add_array("clip.vision.image_mean", [0.5, 0.5, 0.5])
    writer.add_array("clip.vision.image_std", [0.5, 0.5, 0.5])
    if kind in ("idefics3", "gemma3"):
        writer.add_uint32("clip.vision.projector.scale_factor", MERGE)
    if kind == "idefics3":
        writer.add_uint32("clip.vision.preproc_image_size", LONGEST_EDGE)

    _add_vit(writer, weight, pre_ln=kind == "mlp", learned_positions=kind != "qwen2vl")
    # Small outputs, about the size of the text model's token embeddings, so that the
    # image's positions do not swamp the text's.
    if kind == "mlp":
        writer.add_tensor("mm.0.weight", weight(_MM_HIDDEN, _EMBD))
        writer.add_tensor("mm.0.bias", np.zeros(_MM_HIDDEN, dtype=np.float32))
        writer.add_tensor("mm.2.weight", weight(text_embd, _MM_HIDDEN, scale=0.01))
        writer.add_tensor("mm.2.bias", np.zeros(text_embd, dtype=np.float32))
    elif kind == "idefics3":
        writer.add_tensor("mm.model.fc.weight", weight(text_embd, _EMBD * MERGE**2, scale=0.01))
    elif kind == "gemma3":  # RMS norm, then a projection clip.cpp applies transposed: ggml [text, vit]
        writer.add_tensor("mm.soft_emb_norm.weight", np.ones(_EMBD, dtype=np.float32))
        writer.add_tensor("mm.input_projection.weight", weight(_EMBD, text_embd, scale=0.01))
    else:  # qwen2vl: a second patch kernel (a video's next frame; a still image uses both), the merger
        writer.add_tensor("v.patch_embd.weight.1", weight(_EMBD, 3, PATCH_SIZE, PATCH_SIZE))
        writer.add_tensor("mm.0.weight", weight(_MM_HIDDEN, _EMBD * MERGE**2))
        writer.add_tensor("mm.0.bias", np.zeros(_MM_HIDDEN, dtype=np.float32))
        writer.add_tensor("mm.2.weight", weight(text_embd, _MM_HIDDEN, scale=0.01))
        writer.add_tensor("mm.2.bias", np.zeros(text_embd, dtype=np.float32))

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def _add_vit(writer: Any, weight: Any, pre_ln: bool, learned_positions: bool = True) -> None:
    """The vision tower: patch and position embeddings (Qwen2-VL's has none: RoPE), _BLOCKS
    blocks; a LayerNorm before them (LLaVA's CLIP) or after (SigLIP's)."""
    ones = np.ones(_EMBD, dtype=np.float32)
    zeros = np.zeros(_EMBD, dtype=np.float32)
    # ggml's conv kernel is [KW, KH, C_in, C_out]: numpy (C_out, C_in, KH, KW).
    writer.add_tensor("v.patch_embd.weight", weight(_EMBD, 3, PATCH_SIZE, PATCH_SIZE))
    if learned_positions:
        writer.add_tensor("v.position_embd.weight", weight(IMAGE_TOKENS, _EMBD, scale=0.02))
    norm = "v.pre_ln" if pre_ln else "v.post_ln"
    writer.add_tensor(f"{norm}.weight", ones)
    writer.add_tensor(f"{norm}.bias", zeros)
    for i in range(_BLOCKS):
        blk = f"v.blk.{i}"
        for name in ("attn_q", "attn_k", "attn_v", "attn_out"):
            writer.add_tensor(f"{blk}.{name}.weight", weight(_EMBD, _EMBD))
            writer.add_tensor(f"{blk}.{name}.bias", zeros)
        for name in ("ln1", "ln2"):
            writer.add_tensor(f"{blk}.{name}.weight", ones)
            writer.add_tensor(f"{blk}.{name}.bias", zeros)
        writer.add_tensor(f"{blk}.ffn_up.weight", weight(_FFN, _EMBD))
        writer.add_tensor(f"{blk}.ffn_up.bias", np.zeros(_FFN, dtype=np.float32))
        writer.add_tensor(f"{blk}.ffn_down.weight", weight(_EMBD, _FFN))
        writer.add_tensor(f"{blk}.ffn_down.bias", zeros)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.support.tiny_projector",
                                     description="Write a tiny random vision projector for a test model.")
    parser.add_argument("out", type=Path, help="the .gguf file to write")
    parser.add_argument("--kind", choices=KINDS, default="mlp",
                        help="mlp: LLaVA's, for SmolLM2-135M (the default); idefics3: SmolVLM's tiles, "
                             "for the SmolVLM stand-in; gemma3: for Gemma 3 270M")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    width = GEMMA_TEXT_EMBD if args.kind == "gemma3" else TEXT_EMBD
    path = write_tiny_projector(args.out, seed=args.seed, text_embd=width, kind=args.kind)
    per_image = f"{IMAGE_TOKENS} tokens per image" if args.kind == "mlp" else f"{PIECE_TOKENS} tokens a piece"
    print(f"{path} ({path.stat().st_size} bytes, {per_image})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
