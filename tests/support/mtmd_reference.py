"""llama.cpp's own way of reading a prompt with an image, for tests to compare the engine with.

libmtmd cuts an image into the projector's pieces with their marker text (`mtmd_tokenize`),
and its helper (`mtmd_helper_eval_chunk_single`, what llama.cpp's server and mtmd-cli run)
encodes a piece and decodes it into a sequence: Gemma 3's whole with causal attention off,
at the positions after the text before it. Here a prompt the engine prepared (its tokens,
with the image's part in it) is read that way on a fresh context of its own, the text runs
as tokens and each image piece through the helper, every run at the positions libmtmd gives
(after a Qwen-VL piece, its n_pos on from its start); the last position's log-probabilities
are what the engine's first sampled token must see. The runs are decoded one at a time, as
the engine's steps take them: llama.cpp's results move by a few hundredths when a sequence's
tokens are cut into other batches (Gemma 3 270M: 0.07 for its top log-probability).
"""

from __future__ import annotations

import ctypes
from dataclasses import replace

import llama_cpp as ll
import llama_cpp.mtmd_cpp as mtmd
import numpy as np

from inference.params import LoadSettings
from inference.worker.image_file import decode_image
from inference.worker.loading import create_context

_TEXT, _IMAGE = 0, 1  # libmtmd's chunk types


def reference_logprobs(settings: LoadSettings, tokens: list[int], image_ids: list[int], image: bytes) -> np.ndarray:
    """The log-softmax at the last of `tokens` (the engine's prompt, holding `image_ids`, the
    image's part of it, once), each image piece decoded by libmtmd's helper. The model,
    projector and context as `settings` give them (the engine's own context maker: its cache
    type and attention kernels), one sequence."""
    assert settings.mmproj is not None
    model = ll.llama_model_load_from_file(str(settings.model_path).encode(), ll.llama_model_default_params())
    ctx = create_context(model, replace(settings, n_seq_max=1))
    mparams = mtmd.mtmd_context_params_default()
    mparams.use_gpu, mparams.print_timings, mparams.warmup = False, False, False
    mparams.n_threads = settings.threads_batch()
    if settings.image_max_tokens is not None:  # as llama-server's --image-max-tokens
        mparams.image_max_tokens = settings.image_max_tokens
    mctx = mtmd.mtmd_init_from_file(str(settings.mmproj).encode(), model, mparams)
    bitmap, chunks = _tokenized(mctx, image)
    try:
        kinds = [mtmd.mtmd_input_chunk_get_type(mtmd.mtmd_input_chunks_get(chunks, i))
                 for i in range(mtmd.mtmd_input_chunks_size(chunks))]
        pieces = [mtmd.mtmd_input_chunks_get(chunks, i) for i, kind in enumerate(kinds) if kind == _IMAGE]
        marker_text = [t for i, kind in enumerate(kinds) if kind == _TEXT
                       for t in _text_tokens(mtmd.mtmd_input_chunks_get(chunks, i))]
        if marker_text != [t for t in image_ids if t >= 0]:
            raise AssertionError("the engine's markers around the image are not libmtmd's")
        _find(tokens, image_ids)
        n_past = 0  # the next position: after an M-RoPE piece, less than the tokens so far
        for run in _runs(tokens):
            if run[0] >= 0:
                _decode_tokens(ctx, run, n_past)
                n_past += len(run)
                continue
            piece = pieces.pop(0)
            if mtmd.mtmd_input_chunk_get_n_tokens(piece) != len(run):
                raise AssertionError("libmtmd cuts the image otherwise than the engine's prompt shows it")
            new_n_past = ll.llama_pos(0)
            if mtmd.mtmd_helper_eval_chunk_single(mctx, ctx, piece, n_past, 0, settings.n_batch, False,
                                                  ctypes.byref(new_n_past)) != 0:
                raise RuntimeError("mtmd_helper_eval_chunk_single failed")
            n_past = int(new_n_past.value)
        n_vocab = ll.llama_vocab_n_tokens(ll.llama_model_get_vocab(model))
        logits = np.ctypeslib.as_array(ll.llama_get_logits_ith(ctx, -1), shape=(n_vocab,)).astype(np.float64)
        shifted = logits - logits.max()
        return shifted - np.log(np.exp(shifted).sum())
    finally:
        mtmd.mtmd_input_chunks_free(chunks)
        mtmd.mtmd_bitmap_free(bitmap)
        mtmd.mtmd_free(mctx)
        ll.llama_free(ctx)
        ll.llama_model_free(model)


def _runs(tokens: list[int]) -> list[list[int]]:
    """The prompt as the engine's steps take it: runs of text, and of one image piece's rows
    (consecutive placeholder ids); a prompt this short fits a step's budget whole."""
    runs: list[list[int]] = []
    for t in tokens:
        last = runs[-1] if runs else None
        if last is not None and ((t >= 0 and last[-1] >= 0) or (t < 0 and last[-1] < 0 and t == last[-1] - 1)):
            last.append(t)
        else:
            runs.append([t])
    return runs


def _find(tokens: list[int], part: list[int]) -> int:
    for i in range(len(tokens) - len(part) + 1):
        if tokens[i:i + len(part)] == part:
            return i
    raise ValueError("the image's part is not in the prompt")


def _decode_tokens(ctx: ll.llama_context_p, tokens: list[int], first_pos: int) -> None:
    """Tokens at positions first_pos, first_pos + 1...; the last one's logits kept."""
    batch = ll.llama_batch_init(len(tokens), 0, 1)
    try:
        for i, token in enumerate(tokens):
            batch.token[i], batch.pos[i], batch.n_seq_id[i] = token, first_pos + i, 1
            batch.seq_id[i][0], batch.logits[i] = 0, i == len(tokens) - 1
        batch.n_tokens = len(tokens)
        if ll.llama_decode(ctx, batch) != 0:
            raise RuntimeError("llama_decode failed")
    finally:
        ll.llama_batch_free(batch)


def _tokenized(mctx: mtmd.mtmd_context_p, image: bytes) -> tuple[mtmd.mtmd_bitmap_p, mtmd.mtmd_input_chunks_p]:
    """The image cut by libmtmd into its pieces and marker text (the caller frees both)."""
    pixels = decode_image(image)  # the engine's pixels (upright, RGB), so both read the same image
    buf = (ctypes.c_uint8 * len(pixels.rgb)).from_buffer_copy(pixels.rgb)
    bitmap = mtmd.mtmd_bitmap_init(pixels.width, pixels.height, buf)
    chunks = mtmd.mtmd_input_chunks_init()
    marker = mtmd.mtmd_default_marker()
    text = mtmd.mtmd_input_text(marker, len(marker), False, False)
    bitmaps = (mtmd.mtmd_bitmap_p_ctypes * 1)(bitmap)
    if mtmd.mtmd_tokenize(mctx, chunks, ctypes.byref(text), bitmaps, 1) != 0:
        raise RuntimeError("mtmd_tokenize failed")
    return bitmap, chunks


def _text_tokens(chunk: mtmd.mtmd_input_chunk_p) -> list[int]:
    n = ctypes.c_size_t(0)
    tokens = mtmd.mtmd_input_chunk_get_tokens_text(chunk, ctypes.byref(n))
    return [int(tokens[i]) for i in range(n.value)]
