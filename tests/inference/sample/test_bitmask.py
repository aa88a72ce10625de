"""Token bitmasks: the bit operations the grammar, the closing reserve and the sampler share."""

import numpy as np

from inference.sample.bitmask import allow_only, allowed_bits, allowed_tokens, apply_mask, new_masks


def test_a_new_mask_allows_every_token() -> None:
    masks = new_masks(2, 70)
    assert masks.shape == (2, 3)
    assert allowed_tokens(masks[1], 70).tolist() == list(range(70))


def test_allow_only_sets_exactly_those_tokens_across_words() -> None:
    mask = new_masks(1, 100)[0]
    allow_only(mask, [0, 31, 32, 63, 99])
    assert allowed_tokens(mask, 100).tolist() == [0, 31, 32, 63, 99]
    assert allowed_bits(mask, 100).sum() == 5


def test_allow_only_nothing_forbids_everything() -> None:
    mask = new_masks(1, 40)[0]
    allow_only(mask, [])
    assert allowed_tokens(mask, 40).size == 0


def test_apply_mask_forbids_what_the_mask_leaves_out() -> None:
    mask = new_masks(1, 40)[0]
    allow_only(mask, [3, 35])
    logits = np.zeros(40, dtype=np.float32)
    apply_mask(logits, mask)
    assert np.isfinite(logits).nonzero()[0].tolist() == [3, 35]
