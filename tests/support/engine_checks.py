"""What the tests check of an engine (inference.Engine) through its own counters."""

from __future__ import annotations

from inference import ChatRequest, SamplingParams


def assert_nothing_else_generates(engine, probe_tokens: int = 8) -> None:
    """No request but a probe of this check's own generates in the engine: the probe decodes
    `probe_tokens` tokens (greedy, to its limit), and over those steps the engine's count of
    generated tokens grows by exactly that many. A request still running (one that should
    have been cancelled) would add its tokens in the same steps; unlike a pause, this cannot
    pass by being too short, and it takes only the probe's steps."""
    before = engine.metrics(fresh=True).generated_tokens
    probe = ChatRequest(messages=({"role": "user", "content": "Say one word."},),
                        sampling=SamplingParams.greedy(probe_tokens, ignore_eos=True))
    done = engine.submit(probe).result(120)
    assert done.error is None and len(done.token_ids) == probe_tokens, done
    generated = engine.metrics(fresh=True).generated_tokens - before
    assert generated == probe_tokens, f"{generated - probe_tokens} tokens generated for nobody beside the probe"
