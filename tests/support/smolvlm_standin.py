"""A stand-in for SmolVLM's text model: SmolLM2-135M with SmolVLM's added tokens.

SmolVLM-256M's language model is SmolLM2-135M with the tokens its image format needs added
to the vocabulary (`<fake_token_around_image>`, `<global-img>`, `<row_1_col_1>`...
`<row_6_col_6>`, `<image>`, `<end_of_utterance>`); libmtmd looks them up by text to mark an
image's overview and tiles. SmolVLM cannot be downloaded here, so the tests make its text
model from the default one: the same weights and tokenizer, those tokens appended as control
tokens (their embedding rows copies of an existing row), read with the tiny "idefics3"
projector (tests/support/tiny_projector.py) as SmolVLM's GGUF is read with its mmproj.

    python -m tests.support.smolvlm_standin SMOLLM2.gguf OUT.gguf
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

ADDED_TOKENS = ("<fake_token_around_image>", "<image>", "<end_of_utterance>", "<global-img>",
                *(f"<row_{r}_col_{c}>" for r in range(1, 7) for c in range(1, 7)))
_CONTROL = 3  # llama.cpp's LLAMA_TOKEN_TYPE_CONTROL: matched as a whole when parsing special text
_COPIED_ROW = 0  # the embedding row the added tokens start as


def write_smolvlm_standin(model: Path, out: Path) -> Path:
    """Writes SmolLM2 at `model` with SmolVLM's added tokens to `out` and returns it."""
    import gguf  # the test extra

    reader = gguf.GGUFReader(str(model))
    arch = reader.fields["general.architecture"].contents()
    out.parent.mkdir(parents=True, exist_ok=True)
    writer = gguf.GGUFWriter(str(out), arch)
    for field in reader.fields.values():
        if field.name.startswith("GGUF.") or field.name == "general.architecture":
            continue
        value = field.contents()
        if field.name == "tokenizer.ggml.tokens":
            value = [*value, *ADDED_TOKENS]
        elif field.name == "tokenizer.ggml.token_type":
            value = [*value, *([_CONTROL] * len(ADDED_TOKENS))]
        elif field.name == "tokenizer.ggml.scores":
            value = [*value, *([0.0] * len(ADDED_TOKENS))]
        sub_type = field.types[-1] if field.types[0] == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, value, field.types[0], sub_type=sub_type)
    for tensor in reader.tensors:
        # numpy's order (rows first); a quantized tensor's rows are its bytes, which
        # gguf's writer turns back into the tensor's shape.
        data = np.asarray(tensor.data)
        if tensor.name in ("token_embd.weight", "output.weight"):  # a row per token
            data = np.concatenate([data, np.repeat(data[_COPIED_ROW:_COPIED_ROW + 1], len(ADDED_TOKENS), axis=0)])
        writer.add_tensor(tensor.name, data, raw_shape=data.shape, raw_dtype=tensor.tensor_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.support.smolvlm_standin",
                                     description="Write SmolLM2 with SmolVLM's added tokens.")
    parser.add_argument("model", type=Path, help="SmolLM2-135M's .gguf")
    parser.add_argument("out", type=Path, help="the .gguf file to write")
    args = parser.parse_args(argv)
    path = write_smolvlm_standin(args.model, args.out)
    print(f"{path} ({path.stat().st_size} bytes, {len(ADDED_TOKENS)} tokens added)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
