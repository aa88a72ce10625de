"""A pooled embedding context: a GGUF model loaded for embeddings (llama.cpp's
embeddings=True with a pooling type), apart from the engine's context, so that computing
embeddings never touches a chat's KV cells or its steps.

Its own load of the model file rather than a second context on the engine's model: the
engine's model belongs to the engine thread and may live in another process (the app's
engine), and a second context on it would outlive it if the engine stopped first. The file
is memory-mapped and loaded without CPU weight repacking, so on the CPU its weights are
the page cache's pages the engine's load already maps (docs/benchmarks.md measures what
it adds). Not thread-safe: one thread owns it (embedding_worker.py)."""

from __future__ import annotations

import logging
from pathlib import Path

import llama_cpp as ll
import numpy as np

from inference.errors import ModelLoadError, RequestError
from inference.params import physical_cores
from inference.tokenizer.vocab import LlamaVocab
from inference.worker import backend
from inference.worker.batch import BatchItem, TokenBatch
from inference.worker.loading import free_model

log = logging.getLogger(__name__)

N_CTX = 2048  # the longest input, in tokens (a batch holds at least one whole input)
N_SEQ_MAX = 64  # inputs decoded together in one batch


def default_threads() -> int:
    """Half the cores: the engine's decode keeps the rest. llama.cpp's threads spin while
    they wait for each other, so two contexts each on every core slow both many times over
    (measured on the 2-core VM: 18 tokens took 0.23 s on one thread and 4 s on two while
    other work ran)."""
    return max(1, physical_cores() // 2)


class LlamaEmbedder:
    def __init__(self, path: Path, n_gpu_layers: int = 0, n_ctx: int = N_CTX, n_seq_max: int = N_SEQ_MAX,
                 threads: int | None = None) -> None:
        backend.init_backend()
        self.path = Path(path)
        self._model = self._load(self.path, n_gpu_layers)
        try:
            self._ctx, self.pooling = self._context(n_ctx, n_seq_max, threads or default_threads())
        except Exception:
            ll.llama_model_free(self._model)
            raise
        self.vocab = LlamaVocab(self._model)
        self.n_vocab = ll.llama_vocab_n_tokens(ll.llama_model_get_vocab(self._model))
        self.n_ctx = ll.llama_n_ctx(self._ctx)
        self.dimensions = int(ll.llama_model_n_embd_out(self._model) or ll.llama_model_n_embd(self._model))
        self.n_seq_max = n_seq_max
        self._mem = ll.llama_get_memory(self._ctx)
        self._batch = TokenBatch(self.n_ctx, n_seq_max)
        self._closed = False

    @staticmethod
    def _load(path: Path, n_gpu_layers: int) -> ll.llama_model_p:
        params = ll.llama_model_default_params()
        params.n_gpu_layers = n_gpu_layers
        params.use_extra_bufts = False  # no repacked copy: the weights stay the mapped file's pages
        backend.clear_last_error()
        model = ll.llama_model_load_from_file(str(path).encode(), params)
        if not model:
            raise ModelLoadError(f"llama.cpp could not load {path.name} for embeddings ({backend.last_error()})")
        return model

    def _context(self, n_ctx: int, n_seq_max: int, threads: int) -> tuple[ll.llama_context_p, int]:
        """The model's own pooling when its file names one (an embedding model's), else the
        mean of the tokens' states (a chat model's)."""
        ctx = self._new_context(n_ctx, n_seq_max, threads, ll.LLAMA_POOLING_TYPE_UNSPECIFIED)
        pooling = ll.llama_pooling_type(ctx)
        if pooling == ll.LLAMA_POOLING_TYPE_NONE:
            ll.llama_free(ctx)
            ctx, pooling = self._new_context(n_ctx, n_seq_max, threads, ll.LLAMA_POOLING_TYPE_MEAN), \
                ll.LLAMA_POOLING_TYPE_MEAN
        if pooling == ll.LLAMA_POOLING_TYPE_RANK:
            ll.llama_free(ctx)
            raise ModelLoadError(f"{self.path.name} is a reranker: it scores pairs, it gives no embeddings")
        return ctx, int(pooling)

    def _new_context(self, n_ctx: int, n_seq_max: int, threads: int, pooling: int) -> ll.llama_context_p:
        params = ll.llama_context_default_params()
        params.n_ctx = params.n_batch = params.n_ubatch = n_ctx  # a pooled input is decoded in one ubatch
        params.n_seq_max = n_seq_max
        params.kv_unified = True
        params.n_threads = params.n_threads_batch = threads
        params.embeddings = True
        params.pooling_type = pooling
        params.no_perf = True
        ctx = ll.llama_init_from_model(self._model, params)
        if not ctx:
            raise ModelLoadError(f"llama.cpp could not create an embedding context of {n_ctx} tokens (out of memory?)")
        return ctx

    def tokenize(self, text: str) -> list[int]:
        """Text as text: a "<|im_end|>" in it stays those characters."""
        return self.vocab.tokenize(text, add_special=True, parse_special=False)

    def check(self, tokens: list[int], where: str) -> None:
        if not tokens:
            raise RequestError(f"{where} is empty: there is nothing to embed")
        if len(tokens) > self.n_ctx:
            raise RequestError(f"{where} has {len(tokens)} tokens, more than the {self.n_ctx} of the embedding context")
        bad = next((t for t in tokens if not 0 <= t < self.n_vocab), None)
        if bad is not None:
            raise RequestError(f"{where} has token {bad}, outside the model's vocabulary of {self.n_vocab}")

    def embed(self, inputs: list[list[int]]) -> np.ndarray:
        """One unit-length vector a row for each input (checked), as many at a decode as
        the batch holds."""
        out = np.empty((len(inputs), self.dimensions), dtype=np.float32)
        for rows in self._batches(inputs):
            ll.llama_memory_clear(self._mem, True)
            self._batch.fill([BatchItem(seq, 0, inputs[i], len(inputs[i])) for seq, i in enumerate(rows)])
            status = ll.llama_decode(self._ctx, self._batch.batch)
            if status != 0:
                raise RequestError(f"llama.cpp could not compute the embeddings (llama_decode returned {status})")
            for seq, i in enumerate(rows):
                out[i] = np.ctypeslib.as_array(ll.llama_get_embeddings_seq(self._ctx, seq), shape=(self.dimensions,))
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms > 0, norms, 1.0)

    def _batches(self, inputs: list[list[int]]) -> list[list[int]]:
        """Input indexes grouped into decodes of at most n_ctx tokens and n_seq_max inputs."""
        groups: list[list[int]] = [[]]
        tokens = 0
        for i, item in enumerate(inputs):
            if groups[-1] and (tokens + len(item) > self.n_ctx or len(groups[-1]) == self.n_seq_max):
                groups.append([])
                tokens = 0
            groups[-1].append(i)
            tokens += len(item)
        return [g for g in groups if g]

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        free_model(self._batch, self._ctx, self._model)
