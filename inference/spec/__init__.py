"""Speculative decoding: draft tokens a sequence verifies in the same llama_decode as the
other sequences' tokens (prompt lookup from its own tokens; a small draft model), and how
many each sequence drafts in a step (its acceptance rate against the step's cost).
"""
