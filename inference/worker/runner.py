"""The only module that drives the llama.cpp context (through llama-cpp-python's ctypes).

Loads the model, tokenizes and detokenizes, executes a step plan (fill the batch, decode,
sample each request with its own chain) and edits sequences in the KV memory: the
ModelRunner of model_runner.py on llama.cpp. Not thread-safe: the engine thread owns it.
"""

from __future__ import annotations

import ctypes
import logging
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import llama_cpp as ll
import numpy as np

from inference.gguf.reader import check_gguf_file
from inference.kv.disk_store import model_key
from inference.outputs import ModelInfo
from inference.params import LoadSettings, SamplingParams, image_slot_row
from inference.positions import position, position_shifts
from inference.sample.grammar import GrammarCompiler
from inference.sample.logits import LogitsView
from inference.sample.logprobs import SampledLogprobs, sampled_logprobs
from inference.sample.sampler_set import SamplerSet
from inference.tokenizer.vocab import LlamaVocab, SpecialToken
from inference.worker import backend
from inference.worker.batch import BatchItem, EmbeddingBatch, TokenBatch
from inference.worker.draft_runner import LlamaDraftModel
from inference.worker.image_encoder import ImageEncoder
from inference.worker.loading import ProgressCallback, create_context, gpu_layers, load_model
from inference.worker.model_runner import DECODE_OK, StepOutput

if TYPE_CHECKING:
    from inference.sched.plan import ScheduledChunk, StepPlan

log = logging.getLogger(__name__)


class LlamaRunner:
    def __init__(self, settings: LoadSettings, progress: ProgressCallback | None = None) -> None:
        settings.validate()
        path = Path(settings.model_path)
        check_gguf_file(path)
        backend.init_backend()
        self.settings = settings
        self._n_gpu_layers = gpu_layers(settings)
        self._model, self._progress_cb = load_model(path, self._n_gpu_layers, progress)
        try:
            self._ctx = create_context(self._model, settings)
        except Exception:
            ll.llama_model_free(self._model)
            raise
        try:  # speculative decoding's second model, on a context of its own
            self.draft_model = (LlamaDraftModel(settings, self._n_gpu_layers, self._model, path.name)
                                if settings.speculative == "draft" else None)
        except Exception:
            ll.llama_free(self._ctx)
            ll.llama_model_free(self._model)
            raise
        # An image row's width: the model's input embedding, wider than n_embd where the
        # projector feeds deeper layers too (Qwen3-VL's deepstack), as libmtmd's helper reads it.
        self.n_embd = ll.llama_model_n_embd_inp(self._model)
        try:  # the vision projector: images in prompts become embedding rows
            self._mmproj_key = model_key(Path(settings.mmproj), "projector").hex()[:32] if settings.mmproj else ""
            if self._mmproj_key and settings.image_max_tokens is not None:
                # other rows for the same image: kept (and prompts showing them) apart
                self._mmproj_key += f"-max{settings.image_max_tokens}"
            folder = (settings.kv_cache_dir / "images" / self._mmproj_key
                      if settings.mmproj and settings.kv_cache_dir is not None and settings.kv_disk_cache_mb > 0
                      else None)
            self.images = self._image_encoder(settings, folder)
        except Exception:
            if self.draft_model is not None:
                self.draft_model.close()
            ll.llama_free(self._ctx)
            ll.llama_model_free(self._model)
            raise
        self._embd_batch: EmbeddingBatch | None = None  # made at the first image
        self._vocab = ll.llama_model_get_vocab(self._model)
        self.vocab = LlamaVocab(self._model)  # thread-safe: prompts are tokenized off this thread too
        self._mem = ll.llama_get_memory(self._ctx)
        self.n_ctx = ll.llama_n_ctx(self._ctx)
        self.n_vocab = ll.llama_vocab_n_tokens(self._vocab)
        self.n_batch = settings.n_batch
        self.threads = settings.threads()
        self._batch = TokenBatch(settings.n_batch, settings.n_seq_max)
        # Every token's text, read once at load (~0.06 s for 49k tokens): the hot path of a
        # step looks pieces up instead of calling into llama.cpp per generated token.
        self._pieces = [self.vocab.token_bytes(t, special=False) for t in range(self.n_vocab)]
        self.eog_tokens = [t for t in range(self.n_vocab) if ll.llama_vocab_is_eog(self._vocab, t)]
        self._eog = frozenset(self.eog_tokens)
        self._samplers = SamplerSet(self.n_vocab, self.eog_tokens, self._vocab)
        self._logits_view = LogitsView(self.n_vocab)  # log-probabilities' rows
        self._closed = False
        self.info = ModelInfo(
            path=path,
            description=self._model_desc(),
            n_params=ll.llama_model_n_params(self._model),
            size_bytes=ll.llama_model_size(self._model),
            n_ctx_train=ll.llama_model_n_ctx_train(self._model),
            n_ctx=self.n_ctx,
            n_seq_max=settings.n_seq_max,
            n_gpu_layers=self._n_gpu_layers,
            gpu_offload_supported=bool(ll.llama_supports_gpu_offload()),
            backend=backend.backend_info(),
            mmproj=self.images.path if self.images is not None else None,
        )

    # ----- load --------------------------------------------------------------------

    def _image_encoder(self, settings: LoadSettings, folder: Path | None) -> ImageEncoder | None:
        """The vision projector's encoder, when the model is loaded with one."""
        if not settings.mmproj:
            return None
        return ImageEncoder(settings.mmproj, self._model, self.n_embd, settings.threads_batch(),
                            use_gpu=self._n_gpu_layers > 0, folder=folder, max_whole_rows=settings.n_ubatch,
                            max_tokens=settings.image_max_tokens)

    def _model_desc(self) -> str:
        buf = ctypes.create_string_buffer(256)
        ll.llama_model_desc(self._model, buf, len(buf))
        return buf.value.decode("utf-8", "replace")

    def close(self) -> None:
        """Free samplers, batch, context and model (in that order); later calls do nothing."""
        if self._closed:
            return
        self._closed = True
        if self.draft_model is not None:
            self.draft_model.close()
        if self.images is not None:
            self.images.close()
        if self._embd_batch is not None:
            self._embd_batch.free()
        self._samplers.close()
        self._batch.free()
        ll.llama_free(self._ctx)
        ll.llama_model_free(self._model)

    # ----- vocabulary --------------------------------------------------------------

    def tokenize(self, text: str, add_special: bool = True, parse_special: bool = True) -> list[int]:
        return self.vocab.tokenize(text, add_special, parse_special)

    def piece(self, token: int) -> bytes:
        """The bytes of one token as it appears in generated text (specials hidden)."""
        return self._pieces[token]

    def special_text(self, token: int) -> str:
        return self.vocab.special_text(token)

    def special_tokens(self) -> list[SpecialToken]:
        return self.vocab.special_tokens()

    @property
    def max_piece_bytes(self) -> int:
        return self.vocab.max_piece_bytes

    def is_eog(self, token: int) -> bool:
        return token in self._eog

    @property
    def bos_token(self) -> int:
        return self.vocab.bos_token

    @property
    def eos_token(self) -> int:
        return self.vocab.eos_token

    @property
    def adds_bos(self) -> bool:
        return self.vocab.adds_bos

    def chat_template(self) -> str | None:
        return self.vocab.chat_template()

    def set_threads(self, n_threads: int, n_threads_batch: int | None = None) -> None:
        """Threads for decoding from now on (engines sharing a CPU split its cores)."""
        ll.llama_set_n_threads(self._ctx, max(1, n_threads), max(1, n_threads_batch or n_threads))
        self.threads = max(1, n_threads)

    def metadata(self, key: str) -> str | None:
        """One GGUF metadata value as text, or None when the file has no such key."""
        return self.vocab.metadata(key)

    # ----- sampling and decoding (the ModelRunner protocol) -----------------------------

    def start_sampling(self, request_id: str, params: SamplingParams, prompt: list[int]) -> None:
        # An image's placeholder ids (negative) are no tokens the penalties could count.
        counted = [t for t in prompt if t >= 0] if prompt and min(prompt) < 0 else prompt
        self._samplers.start(request_id, params, counted)

    def stop_sampling(self, request_id: str) -> None:
        self._samplers.stop(request_id)

    def execute(self, plan: StepPlan) -> StepOutput:
        """Decode the plan in one llama_decode, then sample each chunk that wants logits
        from its own batch row with its request's sampler (which accepts the token); a
        chunk with draft tokens is verified row by row (SamplerSet.verify).

        Chunks that must go first go first, each in a llama_decode of its own: a request's
        chunks before its last one in the step (a prompt's runs around its images, in order)
        and image chunks (llama.cpp's batch takes token ids or embeddings, never both; the
        scheduler never mixes them in a chunk). Then the rest of the step, together."""
        first = _decoded_first(plan)
        if not first:
            return self._execute_tokens(plan)
        started = time.perf_counter()
        done: list[int] = []
        for i in first:
            chunk = plan.chunks[i]
            code = self._decode_image(chunk) if chunk.holds_image else self._decode_alone(chunk)
            if code != DECODE_OK:
                self._forget(plan, done)
                return StepOutput.failed(code)
            done.append(i)
        first_s = time.perf_counter() - started
        early = set(first)
        rest = [i for i in range(len(plan.chunks)) if i not in early]
        n = len(plan.chunks)
        if not rest:
            return StepOutput(DECODE_OK, [None] * n, [None] * n, first_s)
        out = self._execute_tokens(replace(plan, chunks=[plan.chunks[i] for i in rest]))
        if not out.ok:
            self._forget(plan, done)  # the step is planned again: these chunks too
            return out
        tokens: list[int | None] = [None] * n
        logprobs: list[SampledLogprobs | None] = [None] * n
        kept: list[int] | None = [0] * n if out.kept_drafts is not None else None
        for j, i in enumerate(rest):
            tokens[i] = out.tokens[j]
            if j < len(out.logprobs):
                logprobs[i] = out.logprobs[j]
            if kept is not None and out.kept_drafts is not None:
                kept[i] = out.kept_drafts[j]
        errors = {rest[j]: e for j, e in out.errors.items()} if out.errors else None
        return StepOutput(DECODE_OK, tokens, logprobs, out.decode_s + first_s, out.sample_s, kept, errors)

    def _decode_alone(self, chunk: ScheduledChunk) -> int:
        """A prompt chunk of text that must be in the cache before the request's next chunk
        of the step (no logits: the prompt goes on after it)."""
        self._batch.fill([_batch_item(chunk)])
        code = ll.llama_decode(self._ctx, self._batch.batch)
        if code == DECODE_OK:
            ll.llama_synchronize(self._ctx)
        return code

    def _decode_image(self, chunk: ScheduledChunk) -> int:
        """An image chunk's embedding rows into its sequence at its positions."""
        req = chunk.request
        ids = req.tokens[chunk.start : chunk.start + chunk.n_tokens]
        slot, first = image_slot_row(ids[0])
        image = req.images.get(slot)
        if image is None or image_slot_row(ids[-1]) != (slot, first + len(ids) - 1):
            raise RuntimeError(f"request {req.request_id} has image tokens without their image")
        if self._embd_batch is None:
            self._embd_batch = EmbeddingBatch(self.n_batch, self.n_embd, mrope=image.mrope is not None)
        p0 = req.position(chunk.start)
        rows = image.embd[first : first + len(ids)]
        # M-RoPE's rows at their piece's first position plus each row's (t, y, x) offsets
        # (the chunk is a whole piece: the scheduler never cuts one that has them).
        mrope = image.mrope[first : first + len(ids)] + p0 if image.mrope is not None else None
        if image.bidirectional:  # a whole piece in one ubatch (the encoder checked): as libmtmd's helper does
            ll.llama_set_causal_attn(self._ctx, False)
        try:
            # A whole M-RoPE piece may be wider than the batch: in slices, all in this step.
            for s in range(0, len(rows), self._embd_batch.capacity):
                part = slice(s, s + self._embd_batch.capacity)
                self._embd_batch.fill(chunk.seq, p0 + s, rows[part], mrope[part] if mrope is not None else None)
                code = ll.llama_decode(self._ctx, self._embd_batch.batch)
                if code != DECODE_OK:  # none of the piece stays: the step is planned again
                    self.seq_rm(chunk.seq, p0, req.position(chunk.start + chunk.n_tokens))
                    return code
                ll.llama_synchronize(self._ctx)
        finally:
            if image.bidirectional:
                ll.llama_set_causal_attn(self._ctx, True)
        return DECODE_OK

    def _forget(self, plan: StepPlan, done: list[int]) -> None:
        """The cells of chunks decoded first, in a step that failed after them."""
        for i in done:
            chunk = plan.chunks[i]
            req = chunk.request
            self.seq_rm(chunk.seq, req.position(chunk.start), req.position(chunk.start + chunk.n_tokens))

    def position_of(self, tokens: list[int], index: int) -> int:
        """The position of tokens[index] in a sequence holding tokens (the KV cache manager's
        cuts): the index, unless M-RoPE images before it span fewer positions than rows."""
        if self.images is None or not self.images.mrope:
            return index
        return position(position_shifts(tokens[:index], self.images.span), index)

    def _execute_tokens(self, plan: StepPlan) -> StepOutput:
        rows = self._batch.fill([_batch_item(chunk) for chunk in plan.chunks])
        wanted = [i for i, row in enumerate(rows) if row >= 0]
        drafted: list[int] = []
        if plan.n_draft:
            drafted = [i for i in wanted if plan.chunks[i].draft]
            wanted = [i for i in wanted if not plan.chunks[i].draft]
        prepared = self._samplers.prepare([plan.chunks[i].request.request_id for i in wanted]) if wanted else None
        with_logprobs = [i for i in wanted if plan.chunks[i].request.sampling.logprobs is not None]
        started = time.perf_counter()
        code = ll.llama_decode(self._ctx, self._batch.batch)
        if code != DECODE_OK:
            return StepOutput.failed(code)
        # On a GPU llama_decode may return before the graph ran: wait here, so the wait is
        # counted as the model's time and not as the first sampler's.
        ll.llama_synchronize(self._ctx)
        decoded = time.perf_counter()
        tokens: list[int | None] = [None] * len(plan.chunks)
        logprobs: list[SampledLogprobs | None] = [None] * len(plan.chunks)
        raw = {i: self._logits(rows[i]) for i in with_logprobs}  # copied before sampling edits rows
        if prepared is not None:  # all rows at once: the numpy sampler reads them as one matrix
            sampled = self._samplers.sample_step(self._ctx, prepared, [rows[i] for i in wanted])
            if len(wanted) == len(tokens):  # a decode step: every chunk sampled, in order
                tokens[:] = sampled
            else:
                for i, token in zip(wanted, sampled):
                    tokens[i] = token
        kept = self._verify(plan, rows, drafted, tokens) if drafted else None
        for i, row_logits in raw.items():
            sampled_token, k = tokens[i], plan.chunks[i].request.sampling.logprobs
            if sampled_token is not None and k is not None:
                logprobs[i] = sampled_logprobs(row_logits, sampled_token, k)
        grammars = prepared.grammars if prepared is not None else []
        return StepOutput(code, tokens, logprobs, decoded - started, time.perf_counter() - decoded, kept,
                          self._grammar_errors(plan, wanted) if grammars else None,
                          [wanted[i] for i, state in grammars if state.steered] or None)

    def _grammar_errors(self, plan: StepPlan, wanted: list[int]) -> dict[int, str] | None:
        failed = self._samplers.grammar_errors([plan.chunks[i].request.request_id for i in wanted])
        if not failed:
            return None
        return {i: failed[plan.chunks[i].request.request_id] for i in wanted
                if plan.chunks[i].request.request_id in failed}

    @property
    def grammars(self) -> GrammarCompiler | None:
        """The model's grammar compiler (thread-safe): Engine.prepare compiles a request's
        grammar with it off the engine thread."""
        return self._samplers.grammars

    def _verify(self, plan: StepPlan, rows: list[int], drafted: list[int], tokens: list[int | None]) -> list[int]:
        """Each drafted chunk's kept draft tokens (how many) and its last sampled token."""
        kept = [0] * len(plan.chunks)
        for i in drafted:
            chunk = plan.chunks[i]
            emitted = self._samplers.verify(self._ctx, chunk.request.request_id, rows[i], chunk.draft)
            tokens[i] = emitted[-1]
            kept[i] = len(emitted) - 1
        return kept

    def _logits(self, row: int) -> np.ndarray:
        """The raw logits of one batch row (a copy: the context reuses its buffer)."""
        return self._logits_view.row(self._ctx, row).copy()

    # ----- KV memory (the KvBackend protocol) -----------------------------------------

    def seq_rm(self, seq: int, p0: int, p1: int) -> None:
        if not ll.llama_memory_seq_rm(self._mem, seq, p0, p1):
            raise RuntimeError(f"llama_memory_seq_rm({seq}, {p0}, {p1}) failed")

    def seq_cp(self, src: int, dst: int, p0: int, p1: int) -> None:
        ll.llama_memory_seq_cp(self._mem, src, dst, p0, p1)

    def seq_pos_max(self, seq: int) -> int:
        return ll.llama_memory_seq_pos_max(self._mem, seq)

    def clear_memory(self) -> None:
        ll.llama_memory_clear(self._mem, True)

    @property
    def kv_layout(self) -> str:
        """What a saved sequence state depends on besides the model file: llama.cpp's
        version (its state format), the KV cache type and attention kernel, the offload."""
        s = self.settings
        kv = s.cache_type() + ("+fa" if s.uses_flash_attn() else "")
        # with a projector, its images' slots (the ids in saved prompts) are its own
        projector = f";mmproj={self._mmproj_key}" if self._mmproj_key else ""
        return f"llama_cpp={ll.__version__};kv={kv};gpu_layers={self._n_gpu_layers}{projector}"

    # ----- per-sequence state (the SeqStateBackend protocol: the disk prompt cache) ---

    def state_seq_get(self, seq: int) -> memoryview:
        """The KV of one sequence as llama.cpp serializes it (a fresh buffer, no extra copy)."""
        size = ll.llama_state_seq_get_size(self._ctx, seq)
        buf = (ctypes.c_uint8 * size)()
        written = ll.llama_state_seq_get_data(self._ctx, buf, size, seq)
        return memoryview(buf).cast("B")[:written]

    def state_seq_set(self, seq: int, data: bytearray) -> bool:
        """Load a blob from state_seq_get into seq (emptied first). False when llama.cpp
        refuses it (other model or KV layout, damaged, no room): it then leaves seq empty."""
        if not data:
            return False
        buf = (ctypes.c_uint8 * len(data)).from_buffer(data)  # no copy of a large blob
        read = ll.llama_state_seq_set_data(self._ctx, buf, len(data), seq)
        if read == 0:
            ll.llama_memory_seq_rm(self._mem, seq, -1, -1)
            return False
        return True


def _decoded_first(plan: StepPlan) -> list[int]:
    """The chunks decoded before the step's batch, in order: each that another chunk of its
    request follows in the step, and each image chunk."""
    last = {id(chunk.request): i for i, chunk in enumerate(plan.chunks)}
    return [i for i, chunk in enumerate(plan.chunks) if last[id(chunk.request)] != i or chunk.holds_image]


def _batch_item(chunk: ScheduledChunk) -> BatchItem:
    return BatchItem(chunk.seq, chunk.request.position(chunk.start), chunk.tokens, chunk.n_logits)
