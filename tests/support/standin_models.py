"""Stand-ins for vision models' text models, made from the default model (SmolLM2-135M).

No vision model can be downloaded here, so the tests make the text models their projectors
(tests/support/tiny_projector.py) are read with:

- SmolVLM's: SmolVLM-256M's language model is SmolLM2-135M with the tokens its image format
  needs added to the vocabulary (`<fake_token_around_image>`, `<global-img>`, `<row_1_col_1>`...
  `<row_6_col_6>`, `<image>`, `<end_of_utterance>`); libmtmd looks them up by text to mark an
  image's overview and tiles. Here: the same weights and tokenizer, those tokens appended as
  control tokens (their embedding rows copies of an existing row).
- Qwen2-VL's: llama.cpp's "qwen2vl" architecture, whose M-RoPE gives an image's rows 2-D
  positions. Here: SmolLM2's weights under that architecture, with zero attention biases and
  M-RoPE sections that split its 64-wide heads' rotary dimensions (8 + 12 + 12). It means
  nothing as a model, but llama.cpp and libmtmd read it as a Qwen2-VL.

    python -m tests.support.standin_models smolvlm|qwen2vl SMOLLM2.gguf OUT.gguf
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ADDED_TOKENS = ("<fake_token_around_image>", "<image>", "<end_of_utterance>", "<global-img>",
                *(f"<row_{r}_col_{c}>" for r in range(1, 7) for c in range(1, 7)))
_CONTROL = 3  # llama.cpp's LLAMA_TOKEN_TYPE_CONTROL: matched as a whole when parsing special text
_COPIED_ROW = 0  # the embedding row the added tokens start as
MROPE_SECTIONS = (8, 12, 12, 0)  # of SmolLM2's 32 rotary pairs a head: time, height, width


def write_smolvlm_standin(model: Path, out: Path) -> Path:
    """Writes SmolLM2 at `model` with SmolVLM's added tokens to `out` and returns it."""
    added = {"tokenizer.ggml.tokens": ADDED_TOKENS, "tokenizer.ggml.token_type": [_CONTROL] * len(ADDED_TOKENS),
             "tokenizer.ggml.scores": [0.0] * len(ADDED_TOKENS)}

    def field(name: str, value: Any) -> Any:
        return [*value, *added[name]] if name in added else value

    def tensor(name: str, data: np.ndarray) -> np.ndarray:
        if name not in ("token_embd.weight", "output.weight"):  # a row per token
            return data
        return np.concatenate([data, np.repeat(data[_COPIED_ROW:_COPIED_ROW + 1], len(ADDED_TOKENS), axis=0)])

    return _rewrite(model, out, None, field, tensor)


def write_qwen2vl_standin(model: Path, out: Path) -> Path:
    """Writes SmolLM2 at `model` as a llama.cpp "qwen2vl" (M-RoPE) model to `out`."""

    def biases(reader: Any) -> dict[str, np.ndarray]:
        widths = {t.name: int(t.shape[1]) for t in reader.tensors if t.name.endswith(("attn_q.weight", "attn_k.weight",
                                                                                        "attn_v.weight"))}
        return {name.replace(".weight", ".bias"): np.zeros(width, dtype=np.float32) for name, width in widths.items()}

    def extra_fields(writer: Any) -> None:
        writer.add_array("qwen2vl.rope.dimension_sections", list(MROPE_SECTIONS))

    return _rewrite(model, out, "qwen2vl", lambda _name, value: value, lambda _name, data: data,
                    extra_tensors=biases, extra_fields=extra_fields)


def _rewrite(model: Path, out: Path, arch: str | None, field: Callable[[str, Any], Any],
             tensor: Callable[[str, np.ndarray], np.ndarray],
             extra_tensors: Callable[[Any], dict[str, np.ndarray]] | None = None,
             extra_fields: Callable[[Any], None] | None = None) -> Path:
    """A copy of the GGUF at `model` with each field's value and tensor's data through field()
    and tensor(), under another architecture's keys when `arch` is given."""
    import gguf  # the test extra

    reader = gguf.GGUFReader(str(model))
    old_arch = reader.fields["general.architecture"].contents()
    new_arch = arch or old_arch
    out.parent.mkdir(parents=True, exist_ok=True)
    writer = gguf.GGUFWriter(str(out), new_arch)
    for f in reader.fields.values():
        if f.name.startswith("GGUF.") or f.name == "general.architecture":
            continue
        name = new_arch + f.name[len(old_arch):] if f.name.startswith(old_arch + ".") else f.name
        sub_type = f.types[-1] if f.types[0] == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(name, field(f.name, f.contents()), f.types[0], sub_type=sub_type)
    if extra_fields is not None:
        extra_fields(writer)
    for t in reader.tensors:
        # numpy's order (rows first); a quantized tensor's rows are its bytes, which gguf's
        # writer turns back into the tensor's shape.
        data = tensor(t.name, np.asarray(t.data))
        writer.add_tensor(t.name, data, raw_shape=data.shape, raw_dtype=t.tensor_type)
    for name, data in (extra_tensors(reader) if extra_tensors is not None else {}).items():
        writer.add_tensor(name, data)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.support.standin_models",
                                     description="Write a vision model's text-model stand-in from SmolLM2.")
    parser.add_argument("kind", choices=("smolvlm", "qwen2vl"))
    parser.add_argument("model", type=Path, help="SmolLM2-135M's .gguf")
    parser.add_argument("out", type=Path, help="the .gguf file to write")
    args = parser.parse_args(argv)
    write = write_smolvlm_standin if args.kind == "smolvlm" else write_qwen2vl_standin
    path = write(args.model, args.out)
    print(f"{path} ({path.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
