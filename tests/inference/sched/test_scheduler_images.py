"""Prompts with an image's rows (negative placeholder ids), scheduled inside the real
EngineCore on the fake runner: a chunk is all text or all one image's rows, within the step's
budget, and the draft tokens placed never hold an image's ids."""

from __future__ import annotations

import numpy as np

from inference.params import ImageEmbedding, image_slot_row, image_token
from inference.sched.plan import Drafts
from tests.support.core_driver import make_sim, prompt


def image(slot: int, rows: int) -> ImageEmbedding:
    return ImageEmbedding(f"sha{slot}", slot, np.zeros((rows, 8), dtype=np.float32))


def kinds(chunk) -> set[str]:
    return {"image" if t < 0 else "text" for t in chunk.request.tokens[chunk.start:chunk.start + chunk.n_tokens]}


def test_text_and_image_rows_never_share_a_chunk_and_the_budget_bounds_both() -> None:
    sim = make_sim(n_batch=64)
    pic = image(3, 100)
    tokens = prompt(1, 10) + pic.token_ids + prompt(2, 10)
    req = sim.add("a", tokens, max_tokens=2, images=(pic,))
    spans = []
    while req.num_computed < len(tokens):
        [chunk] = sim.step().chunks
        assert len(kinds(chunk)) == 1
        spans.append((chunk.start, chunk.n_tokens, kinds(chunk).pop(), chunk.wants_logits))
    # text up to the image; the image's 100 rows in budget-sized chunks; the text after it
    assert spans == [(0, 10, "text", False), (10, 64, "image", False), (74, 36, "image", False),
                     (110, 10, "text", True)]
    assert image_slot_row(tokens[74]) == (3, 64)


def test_two_images_side_by_side_are_two_chunks() -> None:
    sim = make_sim(n_batch=64)
    a, b = image(1, 5), image(2, 5)
    tokens = prompt(1, 3) + a.token_ids + b.token_ids + prompt(2, 3)
    req = sim.add("a", tokens, max_tokens=1, images=(a, b))
    starts = []
    while req.num_computed < len(tokens):
        [chunk] = sim.step().chunks
        starts.append((chunk.start, chunk.n_tokens))
    assert starts == [(0, 3), (3, 5), (8, 5), (13, 3)]


def test_draft_tokens_stop_before_an_image_id() -> None:
    sim = make_sim(n_batch=64)
    req = sim.add("a", prompt(1, 4), max_tokens=8)
    sim.step()
    plan = sim.sched.schedule()
    [decode] = [i for i, c in enumerate(plan.chunks) if c.is_decode]
    sim.sched.place_drafts(plan, Drafts({decode: (5, 6, image_token(1, 0), 7)}))
    assert plan.chunks[decode].draft == (5, 6) and plan.n_draft == 2
    assert req.is_decoding


def bidirectional(slot: int, rows: int) -> ImageEmbedding:
    return ImageEmbedding(f"sha{slot}", slot, np.zeros((rows, 8), dtype=np.float32), bidirectional=True)


def image_chunks(sim, req, n_tokens: int) -> list[int]:
    """The sizes of req's image chunks, stepping until its prompt is in."""
    sizes = []
    while req.num_computed < n_tokens:
        chunk = next(c for c in sim.step().chunks if c.request is req)
        if kinds(chunk) == {"image"}:
            sizes.append(chunk.n_tokens)
    return sizes


def test_a_bidirectional_image_goes_whole_past_a_small_budget_a_causal_one_is_cut() -> None:
    """Beside a decoding chat a step has 16 prompt tokens to give (64 // 4): a causal
    image's 40 rows go 16 at a time, a bidirectional image's (Gemma 3) all 40 in one step,
    since its rows must see each other in one decode."""
    for pic, expected in ((image(1, 40), [16, 16, 8]), (bidirectional(2, 40), [40])):
        sim = make_sim(n_batch=64)
        sim.add("reader", prompt(9, 4), max_tokens=200)
        sim.step()
        tokens = prompt(1, 3) + pic.token_ids + prompt(2, 3)
        req = sim.add("asker", tokens, max_tokens=1, images=(pic,))
        assert image_chunks(sim, req, len(tokens)) == expected

