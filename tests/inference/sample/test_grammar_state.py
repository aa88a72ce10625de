"""One request's place in its grammar (inference/sample/grammar.py) on the default model's
real vocabulary (loaded alone): what fill() allows as the reply goes on."""

from __future__ import annotations

import json

import pytest

from inference.sample.bitmask import allowed_tokens, new_masks
from inference.sample.grammar import GrammarCompiler
from inference.sample.json_schema import schema_grammar
from inference.worker.vocab_loader import load_vocab

pytestmark = pytest.mark.model

SCHEMA = {"type": "object", "properties": {"tags": {"type": "array", "items": {"type": "string"}}},
          "required": ["tags"]}


@pytest.fixture(scope="module")
def compiled(model_path):
    vocab = load_vocab(model_path)
    eog = [t for t in range(vocab.n_vocab) if vocab.is_eog(t)]
    yield GrammarCompiler(vocab._vocab, eog), vocab, eog
    vocab.close()


def _allowed(state, n_vocab: int) -> set[int]:
    mask = new_masks(1, n_vocab)[0]
    state.fill(mask)
    return set(allowed_tokens(mask, n_vocab).tolist())


def _feed(state, vocab, text: str) -> None:
    for token in vocab.tokenize(text, add_special=False, parse_special=False):
        state.accept(token)


def test_a_refused_token_leaves_only_the_end_allowed_and_says_why(compiled):
    compiler, vocab, eog = compiled
    state = compiler.start(schema_grammar(SCHEMA))
    assert not _allowed(state, vocab.n_vocab) & set(eog)  # a JSON object must open first
    state.accept(vocab.tokenize("hello", add_special=False, parse_special=False)[0])  # not JSON
    assert state.error is not None and "refused" in state.error
    assert _allowed(state, vocab.n_vocab) == set(eog)


def test_the_reserve_narrows_only_from_its_start(compiled):
    compiler, vocab, eog = compiled
    grammar = schema_grammar(SCHEMA)
    text = '{"tags": ["a", "b'
    n_text = len(vocab.tokenize(text, add_special=False, parse_special=False))
    roomy, tight = compiler.start(grammar, max_tokens=4 * n_text + 40), compiler.start(grammar, max_tokens=n_text)
    _feed(roomy, vocab, text)
    _feed(tight, vocab, text)
    free, narrowed = _allowed(roomy, vocab.n_vocab), _allowed(tight, vocab.n_vocab)
    assert not roomy.steered and tight.steered
    assert narrowed < free
    # Inside the string, the nearest way out is to close it (and what follows it).
    assert all(vocab.token_bytes(t, special=False).startswith(b'"') for t in narrowed)
    # Followed to its end, the narrowed reply closes as valid JSON.
    reply = text
    while not (allowed := _allowed(tight, vocab.n_vocab)) & set(eog):
        token = min(allowed)
        reply += vocab.token_bytes(token, special=False).decode()
        tight.accept(token)
    assert json.loads(reply)["tags"][0] == "a"
