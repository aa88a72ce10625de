"""POST /v1/embeddings (issue 25) with the official `openai` client's `embeddings` over
loopback on the real model: a pooled embedding context of its own beside the engine's.
The model is a tiny chat model: these check the mechanics (dimensions, the same text the
same vector, different texts different ones, base64 the same floats, token inputs, errors,
chats undisturbed), not how good the vectors are."""

from __future__ import annotations

import base64
import json

import numpy as np
import pytest

from tests.support.served import client, post_json, serving

openai = pytest.importorskip("openai")
pytestmark = pytest.mark.model  # a server on a real engine

DIMENSIONS = 576  # SmolLM2-135M's embedding size


@pytest.fixture(scope="module")
def server(shared_engine):
    with serving(shared_engine) as srv:
        yield srv


def vectors(srv, inputs, **kw) -> np.ndarray:
    out = client(srv).embeddings.create(model="smollm2", input=inputs, encoding_format="float", **kw)
    assert [d.index for d in out.data] == list(range(len(out.data)))
    return np.array([d.embedding for d in out.data])


def test_embeddings_have_the_models_size_unit_length_and_follow_the_text(server):
    v = vectors(server, ["The lighthouse keeper watched the sea.", "The lighthouse keeper watched the sea.",
                         "Quarterly tax forms are due in April."])
    assert v.shape == (3, DIMENSIONS)
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert np.array_equal(v[0], v[1])  # the same text, the same vector (even in one batch)
    assert v[0] @ v[2] < 0.99  # another text, another vector
    again = vectors(server, "The lighthouse keeper watched the sea.")
    assert np.allclose(again[0], v[0], atol=1e-5)  # alone in its batch, the same again


def test_the_sdk_default_base64_decodes_to_the_same_floats(server):
    text = "Quarterly tax forms are due in April."
    floats = vectors(server, text)[0]
    sdk = client(server).embeddings.create(model="smollm2", input=text)  # the SDK asks for base64 and decodes it
    assert np.array_equal(np.array(sdk.data[0].embedding, dtype=np.float32), floats.astype(np.float32))
    status, _headers, raw = post_json(server, "/v1/embeddings", {"input": text, "encoding_format": "base64"})
    assert status == 200
    decoded = np.frombuffer(base64.b64decode(json.loads(raw)["data"][0]["embedding"]), dtype="<f4")
    assert np.array_equal(decoded, floats.astype(np.float32))


def test_token_arrays_embed_as_their_text_and_usage_counts_tokens(server):
    out = client(server).embeddings.create(model="smollm2", input=["hello there"], encoding_format="float")
    tokens = out.usage.prompt_tokens
    assert tokens > 0 and out.usage.total_tokens == tokens
    ids = server.state.engine.text_tokens("hello there")
    assert len(ids) == tokens  # this model's tokenizer adds no BOS
    text = vectors(server, "hello there")
    assert np.allclose(vectors(server, [ids]), text, atol=1e-5)  # a list of one token array
    assert np.allclose(vectors(server, ids), text, atol=1e-5)  # one token array


def test_64_inputs_in_one_request_match_them_one_at_a_time(server):
    texts = [f"Note number {i}: the tide comes in at {i % 12 + 1} o'clock." for i in range(64)]
    together = vectors(server, texts)
    assert together.shape == (64, DIMENSIONS)
    for i in (0, 31, 63):
        alone = vectors(server, texts[i])[0]
        # Not bit-equal: llama.cpp's CPU kernels round differently past a batch size (a
        # cosine of 0.99994 measured), but each input stays its own, nearest to itself.
        similarity = together @ alone
        assert similarity[i] > 0.9995 and int(np.argmax(similarity)) == i


def test_dimensions_other_than_the_models_is_a_clear_400(server):
    assert vectors(server, "x", dimensions=DIMENSIONS).shape == (1, DIMENSIONS)
    with pytest.raises(openai.BadRequestError, match=f"have {DIMENSIONS} dimensions and cannot be shortened to 64"):
        vectors(server, "x", dimensions=64)


def test_bad_inputs_are_400s_naming_the_field(server):
    cases = [({"input": []}, "input"), ({"input": ""}, "input"), ({"input": ["ok", 3]}, "input[1]"),
             ({"input": "x", "encoding_format": "int8"}, "encoding_format"),
             ({"input": "hi \ud800"}, "input"), ({"input": [[1, 2, 10**9]]}, "input"),
             ({"input": "word " * 5000}, "input")]
    for body, param in cases:
        status, _headers, raw = post_json(server, "/v1/embeddings", {"model": "m", **body})
        assert status == 400, (body, raw)
        assert json.loads(raw)["error"]["param"] == param, (body, raw)


def test_chats_beside_embeddings_are_undisturbed(make_engine):
    """A greedy chat reply is the same before and after embeddings were computed (on a
    reproducible engine), and the engine ran no request of its own for them."""
    engine = make_engine(n_ctx=1024, n_seq_max=2, reproducible=True)
    with serving(engine) as srv:
        c = client(srv)
        ask = dict(model="m", messages=[{"role": "user", "content": "Say hello."}], temperature=0, max_tokens=12)
        before = c.chat.completions.create(**ask).choices[0].message.content
        requests = engine.metrics(fresh=True).requests_finished
        vectors(srv, [f"text {i}" for i in range(16)])
        assert engine.metrics(fresh=True).requests_finished == requests
        assert c.chat.completions.create(**ask).choices[0].message.content == before
