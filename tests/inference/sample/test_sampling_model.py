"""Sampling on the real default model: greedy picks llama.cpp's token on the very same
logits, and seeded sampling gives the same text alone, in a batch and from a warm prefix
cache; what the logits themselves depend on (the KV cells' order) is pinned down here."""

from __future__ import annotations

import llama_cpp as ll
import numpy as np
import pytest

from inference import SamplingParams
from inference.params import LoadSettings
from inference.sample.llama_chain import SamplerChain
from inference.sample.sampler_set import SamplerSet
from inference.worker.runner import LlamaRunner
from tests.support.chat_requests import user_chat

pytestmark = pytest.mark.model

QUESTIONS = ["What is 2+2?", "List three fruits.", "Say hi.", "Explain recursion."]



@pytest.mark.parametrize("ignore_eos", [False, True])
def test_greedy_tokens_are_llama_cpps_on_the_same_logits(shared_engine, monkeypatch, ignore_eos) -> None:
    pairs: list[tuple[int, int]] = []
    ours = SamplerSet.sample_step

    def both(self, ctx, prepared, rows):
        # llama.cpp's greedy chain first: the numpy sampler edits the rows in place after.
        chain = SamplerChain(SamplingParams.greedy(ignore_eos=ignore_eos), self._n_vocab, self._eog_tokens)
        expected = [ll.llama_sampler_sample(chain._chain, ctx, row) for row in rows]
        chain.close()
        got = ours(self, ctx, prepared, rows)
        pairs.extend(zip(got, expected))
        return got

    monkeypatch.setattr(SamplerSet, "sample_step", both)
    handles = [shared_engine.submit(user_chat(q, SamplingParams.greedy(40, ignore_eos=ignore_eos))) for q in QUESTIONS]
    results = [h.result(120) for h in handles]
    assert all(r.error is None for r in results)
    stopped = 0 if ignore_eos else sum(r.finish_reason.value == "stop" for r in results)  # EOS: not kept
    assert len(pairs) == sum(len(r.token_ids) for r in results) + stopped
    assert [a for a, _ in pairs] == [b for _, b in pairs]


def test_seeded_text_is_the_same_alone_in_a_batch_and_from_a_warm_cache(make_engine) -> None:
    """The app's default sampling with a seed. Alone on a cold cache, inside a batch of
    five other requests (other seeds, greedy, other lengths), and again with its prompt
    in the prefix cache: the same tokens each time (reproducible mode, see below)."""
    engine = make_engine(n_ctx=4096, n_seq_max=8, reproducible=True)
    story = user_chat("Write a short story about a lighthouse keeper.",
                      SamplingParams(seed=1234, max_tokens=48, ignore_eos=True))
    others = [user_chat(q, SamplingParams(seed=i, max_tokens=30 + i)) for i, q in enumerate(QUESTIONS)]
    others.append(user_chat("Describe the moon.", SamplingParams.greedy(24)))

    alone = engine.submit(story).result(300).token_ids
    engine.call(lambda core: core.kv.clear())
    handles = [engine.submit(r) for r in (*others[:2], story, *others[2:])]
    batched = handles[2].result(300).token_ids
    assert all(h.result(300).error is None for h in handles)
    cached_before = engine.metrics(fresh=True).prompt_tokens_saved
    warm = engine.submit(story).result(300).token_ids
    assert engine.metrics(fresh=True).prompt_tokens_saved > cached_before  # really from the cache
    assert len(alone) == 48 and len(set(alone)) > 10
    assert batched == alone
    assert warm == alone
    different_seed = user_chat("Write a short story about a lighthouse keeper.",
                               SamplingParams(seed=1235, max_tokens=48, ignore_eos=True))
    assert engine.submit(different_seed).result(300).token_ids != alone


def test_logits_depend_on_the_kv_cells_order_not_on_chunking_or_sharing(model_path) -> None:
    """Why seeded text can still change with the cache's history: a sequence's logits
    are bit-identical however its prompt was split into decode calls, whether its prefix
    was shared from another sequence (seq_cp) and whatever other sequences hold cells;
    but when its later tokens land in cells before its earlier ones (holes left by freed
    cells: llama.cpp fills the first free cells), attention sums in another order and the
    logits move slightly. Sampling is then a function of slightly different numbers: the
    same seed can give another token where a draw falls near a boundary (and greedy where
    two tokens are nearly tied). Not the sampler: it gets the same uniforms either way."""
    runner = LlamaRunner(LoadSettings(model_path=model_path, n_ctx=1024, n_seq_max=4, reproducible=True))
    try:
        tokens = runner.tokenize("<|im_start|>user\nWrite a sentence about the sea.<|im_end|>\n"
                                 "<|im_start|>assistant\n")
        n = len(tokens)

        def decode(seq: int, start: int, chunk: list[int]) -> np.ndarray:
            batch = ll.llama_batch_init(len(chunk), 0, 1)
            try:
                for i, token in enumerate(chunk):
                    batch.token[i], batch.pos[i], batch.n_seq_id[i] = token, start + i, 1
                    batch.seq_id[i][0] = seq
                    batch.logits[i] = i == len(chunk) - 1
                batch.n_tokens = len(chunk)
                assert ll.llama_decode(runner._ctx, batch) == 0
                return runner._logits(len(chunk) - 1)
            finally:
                ll.llama_batch_free(batch)

        def fresh() -> None:
            runner.clear_memory()

        fresh()
        whole = decode(0, 0, tokens)
        fresh()
        decode(0, 0, tokens[:10])
        decode(0, 10, tokens[10:-1])
        chunked = decode(0, n - 1, tokens[-1:])
        fresh()
        decode(1, 0, tokens[:10])
        runner.seq_cp(1, 0, 0, 10)
        shared = decode(0, 10, tokens[10:])
        fresh()
        decode(2, 0, tokens[:1] * 30)  # another sequence's cells first
        decode(0, 0, tokens[:10])
        beside_others = decode(0, 10, tokens[10:])
        runner.seq_rm(2, -1, -1)  # frees cells 0..29: the rest of sequence 0 goes there
        runner.seq_rm(0, 10, -1)
        in_holes = decode(0, 10, tokens[10:])
    finally:
        runner.close()
    assert np.array_equal(chunked, whole)
    assert np.array_equal(shared, whole)
    assert np.array_equal(beside_others, whole)
    p, q = _softmax(whole), _softmax(in_holes)
    assert float(np.sum(p * np.log(p / q))) < 0.01  # close, though not bit-identical on llama.cpp today
    assert int(in_holes.argmax()) == int(whole.argmax())


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x.astype(np.float64) - x.max())
    return e / e.sum()


ENGINE_RUN = """
import json, sys
questions, model, path = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3]
if path == "numpy":
    sys.modules["inference.sample._kernel"] = None  # as where the extension could not be built
from inference import ChatRequest, Engine, LoadSettings, SamplingParams
from inference.sample import kernel
assert kernel.AVAILABLE == (path == "kernel"), kernel.AVAILABLE
with Engine.start(LoadSettings(model_path=model, n_ctx=4096, n_seq_max=8, reproducible=True)) as engine:
    handles = [engine.submit(ChatRequest(messages=({"role": "user", "content": q},),
                                         sampling=SamplingParams.greedy(32))) for q in questions]
    print(json.dumps([list(h.result(300).token_ids) for h in handles]))
"""


def _greedy_replies(model_path, path: str) -> list[list[int]]:
    """QUESTIONS' greedy replies from a fresh engine in its own process, sampling on `path`.
    Fresh engines on both sides: the shared one's cache holds other tests' cells, and a
    batch laid out differently in the KV cache may round to another greedy token."""
    import json
    import subprocess
    import sys

    ran = subprocess.run([sys.executable, "-c", ENGINE_RUN, json.dumps(QUESTIONS), str(model_path), path],
                         capture_output=True, text=True, timeout=600)
    assert ran.returncode == 0, ran.stderr[-3000:]
    return json.loads(ran.stdout.strip().splitlines()[-1])


def test_without_the_c_kernel_the_engine_samples_in_numpy_with_the_same_greedy_text(model_path) -> None:
    from inference.sample import kernel

    if not kernel.AVAILABLE:
        pytest.skip("the C sampling kernel is not built here: nothing to compare the numpy path with")
    without = _greedy_replies(model_path, "numpy")
    assert without == _greedy_replies(model_path, "kernel")
    assert all(without)
