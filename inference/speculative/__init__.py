"""Speculative decoding, the propose stage of a step (schedule -> propose -> execute ->
postprocess): draft tokens a decoding sequence verifies in the same llama_decode as the
other sequences' tokens (prompt lookup from its own tokens and the engine's pool, or a small
draft model), and how many each drafts in a step (its acceptance rate against the step's
cost). The scheduler places the drafts it is given; the worker verifies them.
"""
