"""Prompts with an image's rows (negative placeholder ids), scheduled inside the real
EngineCore on the fake runner: a chunk is all text or all one image's rows, a prompt's runs
follow each other in one step while the budget holds them, and the draft tokens placed never
hold an image's ids."""

from __future__ import annotations

import numpy as np

from inference.params import ImageEmbedding, image_slot_row, image_token
from inference.sched.plan import Drafts
from tests.support.core_driver import make_sim, prompt


def image(slot: int, rows: int) -> ImageEmbedding:
    return ImageEmbedding(f"sha{slot}", slot, np.zeros((rows, 8), dtype=np.float32))


def kinds(chunk) -> set[str]:
    return {"image" if t < 0 else "text" for t in chunk.request.tokens[chunk.start:chunk.start + chunk.n_tokens]}


def steps_of(sim, req, n_tokens: int) -> list[list[tuple[int, int, str, bool]]]:
    """Each step's chunks of req, (start, tokens, kind, wants logits), until its prompt is in."""
    steps = []
    while req.num_computed < n_tokens:
        chunks = [c for c in sim.step().chunks if c.request is req]
        assert all(len(kinds(c)) == 1 for c in chunks)
        steps.append([(c.start, c.n_tokens, kinds(c).pop(), c.wants_logits) for c in chunks])
    return steps


def test_text_and_image_rows_never_share_a_chunk_and_the_budget_bounds_both() -> None:
    sim = make_sim(n_batch=64)
    pic = image(3, 100)
    tokens = prompt(1, 10) + pic.token_ids + prompt(2, 10)
    req = sim.add("a", tokens, max_tokens=2, images=(pic,))
    # the text up to the image and the image's first rows in one step (each its own chunk),
    # the rest of its rows as the budget allows, and the text after them with the last ones
    assert steps_of(sim, req, len(tokens)) == [
        [(0, 10, "text", False), (10, 54, "image", False)],
        [(64, 46, "image", False), (110, 10, "text", True)]]
    assert image_slot_row(tokens[64]) == (3, 54)


def test_a_prompt_s_runs_around_its_images_go_in_one_step_while_the_budget_holds_them() -> None:
    """SmolVLM's tiles: pieces with marker text between them were a step a run (34 steps for
    17 pieces); now as many runs as the budget holds go in one step, in order."""
    sim = make_sim(n_batch=64)
    a, b = image(1, 5), image(2, 5)
    tokens = prompt(1, 3) + a.token_ids + prompt(3, 2) + b.token_ids + prompt(2, 3)
    req = sim.add("a", tokens, max_tokens=1, images=(a, b))
    assert steps_of(sim, req, len(tokens)) == [
        [(0, 3, "text", False), (3, 5, "image", False), (8, 2, "text", False), (10, 5, "image", False),
         (15, 3, "text", True)]]


def test_two_images_side_by_side_are_two_chunks() -> None:
    sim = make_sim(n_batch=64)
    a, b = image(1, 5), image(2, 5)
    tokens = prompt(1, 3) + a.token_ids + b.token_ids + prompt(2, 3)
    req = sim.add("a", tokens, max_tokens=1, images=(a, b))
    [step] = steps_of(sim, req, len(tokens))
    assert [(start, n) for start, n, _kind, _logits in step] == [(0, 3), (3, 5), (8, 5), (13, 3)]


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
    return [n for step in steps_of(sim, req, n_tokens) for _start, n, kind, _logits in step if kind == "image"]


def test_a_bidirectional_image_goes_whole_past_a_small_budget_a_causal_one_is_cut() -> None:
    """Beside a decoding chat a step has 16 prompt tokens to give (64 // 4): a causal
    image's 40 rows go 16 at a time, a bidirectional image's (Gemma 3) all 40 in one step,
    since its rows must see each other in one decode."""
    # (the 3 text tokens before the image share its first step's 16)
    for pic, expected in ((image(1, 40), [13, 16, 11]), (bidirectional(2, 40), [40])):
        sim = make_sim(n_batch=64)
        sim.add("reader", prompt(9, 4), max_tokens=200)
        sim.step()
        tokens = prompt(1, 3) + pic.token_ids + prompt(2, 3)
        req = sim.add("asker", tokens, max_tokens=1, images=(pic,))
        assert image_chunks(sim, req, len(tokens)) == expected

