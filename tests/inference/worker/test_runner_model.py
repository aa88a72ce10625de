"""LlamaRunner on the real default model, below the engine: plans in, sampled tokens out."""

from __future__ import annotations

import pytest

from inference.params import LoadSettings, SamplingParams
from inference.request import Request
from inference.sched.plan import ScheduledChunk, StepPlan
from inference.worker.runner import LlamaRunner


@pytest.mark.model
def test_the_runner_refuses_a_plan_larger_than_its_batch_before_decoding(model_path):
    runner = LlamaRunner(LoadSettings(model_path=model_path, n_ctx=256, n_seq_max=1, n_batch=8, n_ubatch=8))
    try:
        tokens = runner.tokenize("one two three four five six seven eight nine ten eleven")
        req = Request("r", tokens, SamplingParams.greedy(4), seq=0)
        runner.start_sampling("r", req.sampling, tokens)
        assert len(tokens) > 8
        with pytest.raises(ValueError, match="exceeds the batch of 8"):
            runner.execute(StepPlan([ScheduledChunk(req, 0, len(tokens), True)]))
        assert runner.seq_pos_max(0) == -1  # nothing reached the KV cache
        head = runner.execute(StepPlan([ScheduledChunk(req, 0, 8, False)]))
        assert head.ok and head.tokens == [None] and runner.seq_pos_max(0) == 7
        tail = runner.execute(StepPlan([ScheduledChunk(req, 8, len(tokens) - 8, True)]))
        assert tail.ok and isinstance(tail.tokens[0], int)
    finally:
        runner.close()
