"""The OpenAI-compatible server's API, driven by the official `openai` client over
loopback on the real model."""

from __future__ import annotations

import json
import threading

import pytest

from tests.support.served import ask, client, exchange, post_json, request_bytes, serving

openai = pytest.importorskip("openai")
pytestmark = pytest.mark.model  # a server on a real engine


@pytest.fixture(scope="module")
def server(shared_engine):
    with serving(shared_engine) as srv:
        yield srv


def test_models_and_a_plain_completion_with_usage(server):
    c = client(server)
    assert [m.id for m in c.models.list()] == ["smollm2"]
    assert c.models.list().data[0].context_length == 4096  # the engine's n_ctx (issue 25)
    out = c.chat.completions.create(**ask("Say hello.", max_tokens=8))
    assert out.choices[0].message.role == "assistant" and out.choices[0].message.content
    assert 0 < out.usage.completion_tokens <= 8 and out.usage.prompt_tokens > 5
    assert out.usage.total_tokens == out.usage.prompt_tokens + out.usage.completion_tokens
    assert out.choices[0].finish_reason in ("stop", "length")


def test_streaming_gives_the_same_text_as_a_plain_completion(fresh):
    c = client(fresh)
    plain = c.chat.completions.create(**ask("Name three colours.", max_tokens=24)).choices[0].message.content
    parts, finishes = [], []
    for chunk in c.chat.completions.create(**ask("Name three colours.", max_tokens=24), stream=True):
        assert chunk.usage is None  # not asked for
        parts.append(chunk.choices[0].delta.content or "")
        finishes.append(chunk.choices[0].finish_reason)
    assert "".join(parts) == plain
    assert finishes[-1] in ("stop", "length") and set(finishes[:-1]) == {None}


def test_stream_options_include_usage_ends_with_a_usage_chunk(server):
    chunks = list(client(server).chat.completions.create(
        **ask("Count to five.", max_tokens=6, ignore_eos=True), stream=True,
        stream_options={"include_usage": True}))
    last = chunks[-1]
    assert last.choices == [] and last.usage.completion_tokens == 6 and last.usage.prompt_tokens > 5
    assert all(c.usage is None for c in chunks[:-1])
    assert chunks[-2].choices[0].finish_reason == "length"


def test_a_call_is_its_client_s_lane_in_the_engine_s_metrics(server, shared_engine):
    """The performance panel's lanes: an API call is named by its client's user agent."""
    stream = client(server).chat.completions.create(**ask("Count to fifty.", max_tokens=200, ignore_eos=True),
                                                    stream=True)
    # under way: a token written (the first chunk, the role's, may come while it is queued)
    next(chunk for chunk in stream if chunk.choices and chunk.choices[0].delta.content)
    lanes = [lane for lane in shared_engine.metrics(fresh=True).lanes if lane.kind == "api"]
    stream.close()
    assert len(lanes) == 1 and lanes[0].name.startswith("OpenAI/Python") and lanes[0].rows == 1, lanes


@pytest.fixture
def fresh(make_engine):
    """A server on a new engine, for tests that compare two greedy answers: on the shared
    engine, holes that earlier tests left in the cache's layout can move a greedy token
    (README, "Reproducible mode"), and the full suite saw exactly that."""
    with serving(make_engine(n_ctx=1024, n_seq_max=4, reproducible=True)) as srv:
        yield srv


@pytest.fixture(scope="module")
def sampled(model_path):
    """A server on an engine of its own for sampled (temperature 1) replies: what earlier
    tests left in the shared engine's cache must not move a sampled token."""
    from inference.core.engine import Engine
    from inference.params import LoadSettings

    engine = Engine.start(LoadSettings(model_path=model_path, n_ctx=1024, n_seq_max=4, reproducible=True))
    with serving(engine) as srv:
        yield srv
    engine.shutdown()


def test_n_choices_use_seed_plus_index(sampled):
    c = client(sampled)
    kw = dict(messages=[{"role": "user", "content": "Tell me a word."}], model="m", temperature=1.0,
              max_tokens=8, seed=1234)
    many = c.chat.completions.create(n=3, **kw)
    assert [ch.index for ch in many.choices] == [0, 1, 2]
    alone = [c.chat.completions.create(**{**kw, "seed": 1234 + i}).choices[0].message.content for i in range(3)]
    assert [ch.message.content for ch in many.choices] == alone
    single = sum(c.chat.completions.create(**{**kw, "seed": 1234 + i}).usage.completion_tokens for i in range(3))
    assert many.usage.completion_tokens == single
    assert many.usage.prompt_tokens == c.chat.completions.create(**kw).usage.prompt_tokens  # counted once


def test_n_choices_stream_with_their_index(fresh):
    stream = client(fresh).chat.completions.create(**ask("Hi", max_tokens=4, ignore_eos=True), n=2, stream=True)
    texts, finishes = {0: "", 1: ""}, {}
    for chunk in stream:
        for choice in chunk.choices:
            texts[choice.index] += choice.delta.content or ""
            if choice.finish_reason:
                finishes[choice.index] = choice.finish_reason
    assert finishes == {0: "length", 1: "length"}
    assert texts[0] == texts[1] != ""  # greedy: the same reply twice


def test_a_stop_string_ends_the_reply_before_it(fresh):
    c = client(fresh)
    full = c.chat.completions.create(**ask("Count from 1 to 20.", max_tokens=40)).choices[0].message.content
    cut = full.split()[len(full.split()) // 2]
    out = c.chat.completions.create(**ask("Count from 1 to 20.", max_tokens=40), stop=["zzz", cut])
    assert out.choices[0].finish_reason == "stop"
    assert out.choices[0].message.content == full[:full.index(cut)]


def test_max_completion_tokens_wins_over_max_tokens(server):
    out = client(server).chat.completions.create(**ask("Write a story.", max_tokens=20, ignore_eos=True),
                                                 max_completion_tokens=3)
    assert out.usage.completion_tokens == 3 and out.choices[0].finish_reason == "length"


def test_max_tokens_are_capped_by_the_server(shared_engine):
    with serving(shared_engine, max_tokens_cap=5) as srv:
        c = client(srv)
        asked = c.chat.completions.create(**ask("Write a story.", max_tokens=100, ignore_eos=True))
        default = c.chat.completions.create(**ask("Write a story.", ignore_eos=True))
    assert asked.usage.completion_tokens == 5 and default.usage.completion_tokens == 5


def test_penalties_are_accepted(server):
    out = client(server).chat.completions.create(**ask("Hi", max_tokens=3), frequency_penalty=0.5,
                                                 presence_penalty=-0.5, user="someone")
    assert out.choices[0].message.content


@pytest.mark.parametrize("penalty", ["frequency_penalty", "presence_penalty"])
def test_openai_s_penalties_change_what_a_greedy_reply_repeats(server, penalty):
    """Issue 25: both were accepted and silently unused. Greedy on a prompt that invites
    repeating: with the penalty the reply repeats its tokens less (more distinct ones)."""
    def tokens(**extra) -> list[str]:
        out = client(server).completions.create(model="m", prompt="cat " * 24, max_tokens=16, temperature=0,
                                                logprobs=0, **extra)
        return out.choices[0].logprobs.tokens

    plain, penalised = tokens(), tokens(**{penalty: 2.0})
    assert len(plain) == len(penalised) == 16
    assert len(set(penalised)) > len(set(plain)), (plain, penalised)


def test_completions_take_a_raw_prompt_of_token_ids(fresh, shared_engine):
    tokens = shared_engine.inputs.chat_tokens([{"role": "user", "content": "Name a fruit."}])
    c = client(fresh)
    out = c.completions.create(model="m", prompt=tokens, max_tokens=6, temperature=0)
    chat = c.chat.completions.create(**ask("Name a fruit.", max_tokens=6))
    assert out.object == "text_completion" and out.choices[0].text == chat.choices[0].message.content
    assert out.usage.prompt_tokens == len(tokens) and out.usage.completion_tokens == chat.usage.completion_tokens
    streamed = "".join(ch.choices[0].text for ch in c.completions.create(
        model="m", prompt=tokens, max_tokens=6, temperature=0, stream=True) if ch.choices)
    assert streamed == out.choices[0].text


def test_a_missing_or_wrong_key_is_401_on_every_route_but_health(server):
    with pytest.raises(openai.AuthenticationError):
        client(server, key="wrong").models.list()
    for path in ("/v1/models", "/metrics", "/nowhere"):
        status, _, body = exchange(server, request_bytes("GET", path, key=None))
        assert status == 401 and json.loads(body)["error"]["type"] == "authentication_error"
    status, _, _ = exchange(server, request_bytes("GET", "/metrics", key="sekrit-but-longer"))
    assert status == 401
    # /health is open (a probe holds no key), and says no more than whether the model is loaded
    for key in (None, "sekrit-but-longer"):
        status, _, body = exchange(server, request_bytes("GET", "/health", key=key))
        assert status == 200 and json.loads(body) == {"status": "ok"}


def test_bad_requests_are_400_with_a_reason(server):
    c = client(server)
    with pytest.raises(openai.BadRequestError, match="temperature") as err:
        c.chat.completions.create(**{**ask("hi"), "temperature": -1})
    assert err.value.body["param"] == "temperature"
    with pytest.raises(openai.BadRequestError, match="context holds"):
        c.chat.completions.create(**ask("word " * 5000, max_tokens=4))
    with pytest.raises(openai.BadRequestError, match="context holds"):
        c.chat.completions.create(**ask("word " * 5000, max_tokens=4), stream=True)


def test_logprobs_of_each_token_with_alternatives(fresh):
    c = client(fresh)
    out = c.chat.completions.create(**ask("Name a colour.", max_tokens=6), logprobs=True, top_logprobs=3)
    entries = out.choices[0].logprobs.content
    assert "".join(e.token for e in entries) == out.choices[0].message.content
    assert len(entries) == out.usage.completion_tokens
    for e in entries:
        assert len(e.top_logprobs) == 3 and e.logprob <= 0
        assert e.top_logprobs[0].token == e.token and e.top_logprobs[0].logprob == e.logprob  # greedy: the top one
    stream = c.chat.completions.create(**ask("Name a colour.", max_tokens=6), logprobs=True, stream=True)
    streamed = [ch.choices[0].logprobs for ch in stream if ch.choices and ch.choices[0].delta.content]
    assert [e.token for lp in streamed for e in lp.content] == [e.token for e in entries]
    plain = c.chat.completions.create(**ask("Name a colour.", max_tokens=6))
    assert plain.choices[0].logprobs is None


def test_response_format_json_object_gives_json(server):
    """Room for a long object: the shared engine's cache holds what earlier tests left, and a
    greedy answer computed on a reused prefix may differ from one computed fresh (in CI one
    ran past 120 tokens after a new test earlier in the run had changed what was cached)."""
    out = client(server).chat.completions.create(
        **ask("Describe a cat as JSON with a name and an age.", max_tokens=400),
        response_format={"type": "json_object"})
    assert out.choices[0].finish_reason == "stop", out.choices[0].message.content
    assert isinstance(json.loads(out.choices[0].message.content), dict)


def test_completions_take_a_text_prompt_with_its_markup(fresh, shared_engine):
    c = client(fresh)
    prompt = "<|im_start|>user\nName a fruit.<|im_end|>\n<|im_start|>assistant\n"
    out = c.completions.create(model="m", prompt=prompt, max_tokens=6, temperature=0, logprobs=2)
    # The caller wrote the whole prompt: its markup is parsed into control tokens.
    parsed, as_text = shared_engine.text_tokens(prompt), shared_engine.text_tokens(prompt, parse_special=False)
    assert out.usage.prompt_tokens == len(parsed) < len(as_text)
    by_ids = c.completions.create(model="m", prompt=parsed, max_tokens=6, temperature=0)
    assert out.choices[0].text == by_ids.choices[0].text and out.choices[0].text
    assert "".join(out.choices[0].logprobs.tokens) == out.choices[0].text
    assert all(len(top) == 2 for top in out.choices[0].logprobs.top_logprobs)
    with pytest.raises(openai.BadRequestError, match="context"):
        c.completions.create(model="m", prompt="word " * 9000, max_tokens=2)


def test_health_and_metrics(server):
    status, _, body = exchange(server, request_bytes("GET", "/health"))
    assert status == 200 and json.loads(body) == {"status": "ok"}
    client(server).chat.completions.create(**ask("Hi", max_tokens=4))
    status, headers, body = exchange(server, request_bytes("GET", "/metrics"))
    text = body.decode()
    assert status == 200 and headers["content-type"].startswith("text/plain")
    assert "# TYPE chorus_decode_tokens_per_second gauge" in text
    values = dict(line.rsplit(" ", 1) for line in text.splitlines() if line and not line.startswith("#"))
    assert float(values["chorus_generated_tokens_total"]) > 0
    assert float(values["chorus_kv_cells_total"]) == 4096
    ok = 'chorus_http_requests_total{method="POST",route="/v1/chat/completions",status="200"}'
    assert float(values[ok]) >= 1
    assert float(values["chorus_http_requests_in_flight"]) == 1  # this scrape
    assert float(values['chorus_ttft_seconds_bucket{le="+Inf"}']) >= 1 and float(values["chorus_itl_seconds_count"]) > 0


def test_health_is_503_once_the_engine_is_down(make_engine):
    engine = make_engine(n_ctx=512, n_seq_max=1)
    with serving(engine) as srv:
        assert exchange(srv, request_bytes("GET", "/health"))[0] == 200
        engine.shutdown()
        status, _, body = exchange(srv, request_bytes("GET", "/health"))
        assert status == 503 and json.loads(body)["error"]["code"] == "service_unavailable"
        status, _, body = post_json(srv, "/v1/chat/completions", ask("hi", max_tokens=2))
        assert status == 503 and "not running" in json.loads(body)["error"]["message"]


def test_models_reports_the_name_it_is_given(shared_engine):
    with serving(shared_engine, model_id="first") as srv:
        assert [m.id for m in client(srv).models.list()] == ["first"]
        srv.rename_model("second")
        assert [m.id for m in client(srv).models.list()] == ["second"]


def test_concurrent_requests_share_one_batch(make_engine):
    # An engine of its own: its largest batch is these requests' (the shared engine's
    # running maximum may come from any earlier test).
    engine = make_engine(n_ctx=2048, n_seq_max=4)
    assert engine.metrics(fresh=True).max_step_seqs == 0
    results = []
    start = threading.Barrier(4)

    def one(i):
        start.wait(30)
        out = c.chat.completions.create(**ask(f"Count to {i + 5}.", max_tokens=24, ignore_eos=True))
        results.append(out.usage.completion_tokens)

    with serving(engine) as srv:
        c = client(srv)
        threads = [threading.Thread(target=one, args=(i,)) for i in range(4)]
        [t.start() for t in threads]
        [t.join(120) for t in threads]
    assert results == [24] * 4
    assert engine.metrics(fresh=True).max_step_seqs >= 3


def test_a_big_body_of_many_messages_is_parsed_and_refused_off_the_loop(server):
    messages = [{"role": "user" if i % 2 == 0 else "assistant", "content": "hi"} for i in range(5001)]
    with pytest.raises(openai.BadRequestError, match="context holds"):
        client(server).chat.completions.create(model="m", messages=messages, max_tokens=2)
    assert client(server).chat.completions.create(**ask("Hi", max_tokens=2)).choices[0].message.content
