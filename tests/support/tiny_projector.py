"""A tiny vision projector for the default model, for tests of the image path.

No real vision model can be downloaded on the machines the tests run on, so the tests make
one: a CLIP-style projector GGUF in llama.cpp's "mlp" (LLaVA) format, read by
`tools/mtmd/clip.cpp`, with random weights and an output width of SmolLM2-135M's n_embd
(576), which is all `mtmd_init_from_file` checks against the text model. Its embeddings mean
nothing, but they are real embeddings: an image becomes IMAGE_TOKENS positions of the
prompt, encoded by libmtmd and decoded by llama.cpp like any vision model's.

    python -m tests.support.tiny_projector OUT.gguf [--seed N]

The shapes, as clip.cpp's loader and its LLaVA graph (`clip_graph_llava`) read them:
a 32x32 image in 4x4 patches (64 patches, no class embedding, so 64 image tokens), a ViT of
two blocks (the graph runs all but the last, as LLaVA takes the second-to-last layer's
output), then mm.0 -> GELU -> mm.2 to 576. numpy shapes are (out, in); GGUF stores them
reversed, which is ggml's [in, out].
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

IMAGE_SIZE = 32
PATCH_SIZE = 4
IMAGE_TOKENS = (IMAGE_SIZE // PATCH_SIZE) ** 2
TEXT_EMBD = 576  # SmolLM2-135M's n_embd: the projector's output width
_EMBD = 64
_HEADS = 4
_FFN = 96  # not _EMBD: clip.cpp swaps up/down of old LLaVA files whose ffn_down is n_embd wide
_BLOCKS = 2
_MM_HIDDEN = 128


def write_tiny_projector(path: Path, seed: int = 0, text_embd: int = TEXT_EMBD) -> Path:
    """Writes the projector to `path` (the same bytes for the same seed) and returns it."""
    import gguf  # the test extra; imported here so that importing the constants needs no gguf

    rng = np.random.default_rng(seed)

    def weight(*shape: int, scale: float = 0.0) -> np.ndarray:
        fan_in = shape[-1] if len(shape) == 2 else int(np.prod(shape[1:]))
        return (rng.standard_normal(shape) * (scale or fan_in ** -0.5)).astype(np.float32)

    def ones(n: int) -> np.ndarray:
        return np.ones(n, dtype=np.float32)

    def zeros(n: int) -> np.ndarray:
        return np.zeros(n, dtype=np.float32)

    path.parent.mkdir(parents=True, exist_ok=True)
    writer = gguf.GGUFWriter(str(path), "clip")
    writer.add_name("chorus tiny projector (tests)")
    writer.add_bool("clip.has_vision_encoder", True)
    writer.add_bool("clip.has_llava_projector", True)
    writer.add_string("clip.projector_type", "mlp")
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

    # ggml's conv kernel is [KW, KH, C_in, C_out]: numpy (C_out, C_in, KH, KW).
    writer.add_tensor("v.patch_embd.weight", weight(_EMBD, 3, PATCH_SIZE, PATCH_SIZE))
    writer.add_tensor("v.position_embd.weight", weight(IMAGE_TOKENS, _EMBD, scale=0.02))
    writer.add_tensor("v.pre_ln.weight", ones(_EMBD))
    writer.add_tensor("v.pre_ln.bias", zeros(_EMBD))
    for i in range(_BLOCKS):
        blk = f"v.blk.{i}"
        for name in ("attn_q", "attn_k", "attn_v", "attn_out"):
            writer.add_tensor(f"{blk}.{name}.weight", weight(_EMBD, _EMBD))
            writer.add_tensor(f"{blk}.{name}.bias", zeros(_EMBD))
        for name in ("ln1", "ln2"):
            writer.add_tensor(f"{blk}.{name}.weight", ones(_EMBD))
            writer.add_tensor(f"{blk}.{name}.bias", zeros(_EMBD))
        writer.add_tensor(f"{blk}.ffn_up.weight", weight(_FFN, _EMBD))
        writer.add_tensor(f"{blk}.ffn_up.bias", zeros(_FFN))
        writer.add_tensor(f"{blk}.ffn_down.weight", weight(_EMBD, _FFN))
        writer.add_tensor(f"{blk}.ffn_down.bias", zeros(_EMBD))
    writer.add_tensor("mm.0.weight", weight(_MM_HIDDEN, _EMBD))
    writer.add_tensor("mm.0.bias", zeros(_MM_HIDDEN))
    # Small outputs, about the size of SmolLM2's token embeddings, so that the image's
    # positions do not swamp the text's.
    writer.add_tensor("mm.2.weight", weight(text_embd, _MM_HIDDEN, scale=0.01))
    writer.add_tensor("mm.2.bias", zeros(text_embd))

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.support.tiny_projector",
                                     description="Write a tiny random vision projector for SmolLM2-135M.")
    parser.add_argument("out", type=Path, help="the .gguf file to write")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    path = write_tiny_projector(args.out, seed=args.seed)
    print(f"{path} ({path.stat().st_size} bytes, {IMAGE_TOKENS} tokens per image)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
