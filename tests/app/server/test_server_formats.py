"""The server's formats without a model: the Prometheus export of the engine's snapshot
(histograms of time to first token and inter-token latency from cumulative buckets), and
log-probabilities in OpenAI's two shapes."""

from __future__ import annotations

import math
from types import SimpleNamespace

from prometheus_client import CollectorRegistry, generate_latest

from app.server.metrics import EngineCollector, HttpMetrics
from inference.errors import EngineError
from tests.support.metrics import prometheus_text


def exported(snapshot) -> dict[str, float]:
    text = prometheus_text(snapshot)
    return {k: float(v) for k, v in (line.rsplit(" ", 1) for line in text.splitlines() if not line.startswith("#"))}


def snapshot(**fields):
    base = dict(prefill_tok_s=1.0, decode_tok_s=2.0, last_step_seqs=1, running=1, queued=0, kv_cells_used=3,
                kv_cells_total=64, kv_cells_shared=0, prefix_hits=0, prompt_tokens_saved=0, prompt_tokens_computed=5,
                generated_tokens=7, requests_finished=1, requests_failed=0, preemptions=0, ttft_p50_s=None,
                ttft_p95_s=None, itl_p50_s=0.05, itl_p95_s=0.1, ttft_buckets=(), ttft_sum_s=0.0, ttft_count=0,
                itl_buckets=(), itl_sum_s=0.0, itl_count=0)
    return SimpleNamespace(**{**base, **fields})


def test_cumulative_buckets_become_prometheus_histograms():
    values = exported(snapshot(ttft_buckets=((0.1, 2), (1.0, 5), (math.inf, 6)), ttft_sum_s=2.5, ttft_count=6,
                               itl_buckets=((0.05, 10), (math.inf, 12)), itl_sum_s=0.7, itl_count=12))
    assert values['chorus_ttft_seconds_bucket{le="0.1"}'] == 2 and values['chorus_ttft_seconds_bucket{le="1.0"}'] == 5
    assert values['chorus_ttft_seconds_bucket{le="+Inf"}'] == 6 and values["chorus_ttft_seconds_count"] == 6
    assert values["chorus_ttft_seconds_sum"] == 2.5 and values["chorus_itl_seconds_count"] == 12
    assert values["chorus_generated_tokens_total"] == 7 and values["chorus_itl_seconds_p50"] == 0.05
    assert "chorus_ttft_seconds_p50" not in values  # no sample yet: no value rather than a 0


def test_an_engine_that_cannot_answer_exports_nothing_of_its_own():
    def down():
        raise EngineError("the engine is not running")

    registry = CollectorRegistry()
    registry.register(EngineCollector(down))
    HttpMetrics(registry).requests.labels("/v1/models", "GET", "200").inc()
    text = generate_latest(registry).decode()
    assert "chorus_generated_tokens" not in text and "chorus_http_requests_total" in text


def test_logprobs_in_both_of_openais_shapes():
    from app.server.openai.format import chat_logprobs, text_logprobs

    top = (SimpleNamespace(token="Hi", bytes=b"Hi", logprob=-0.1), SimpleNamespace(token="Hey", bytes=b"Hey",
                                                                                    logprob=-2.5))
    entries = [SimpleNamespace(token="Hi", bytes=b"Hi", logprob=-0.1, top=top),
               SimpleNamespace(token="!", bytes=b"!", logprob=-0.7, top=())]
    chat = chat_logprobs(entries)["content"]
    assert chat[0] == {"token": "Hi", "logprob": -0.1, "bytes": [72, 105],
                       "top_logprobs": [{"token": "Hi", "logprob": -0.1, "bytes": [72, 105]},
                                        {"token": "Hey", "logprob": -2.5, "bytes": [72, 101, 121]}]}
    assert chat[1]["top_logprobs"] == []
    text = text_logprobs(entries, offset=3)
    assert text == {"tokens": ["Hi", "!"], "token_logprobs": [-0.1, -0.7],
                    "top_logprobs": [{"Hi": -0.1, "Hey": -2.5}, {}], "text_offset": [3, 5]}
